"""Property (SQL92) filters on the broker: compiled once, checked for clients.

``ConsumerFilterManager`` (Java ``ConsumerFilterManager`` without the bloom filter) keeps the
compiled filter of each (group, topic, subscription version, expression type, expression) in a
least-recently-used table bounded by ``filterCacheSize``; a pull finds its filter there, so an
expression is parsed once per subscription version, not once per pull. Failures are kept too
(Java ``SelectorParser`` caches its exceptions), so a client repeating a bad expression costs
one lookup.

Java's SQL92 filter can also pre-filter on a bloom-filter bit map stored in the ConsumeQueue
extension (``enableCalcFilterBitMap`` / ``enableConsumeQueueExt``, both off by default); rmq
keeps no ConsumeQueue extension, so every message of a SQL92 subscription is evaluated against
its properties during the pull scan (``rmq.store`` ``get_message``).

``CheckClientConfigProcessor`` answers CHECK_CLIENT_CONFIG (46), which clients send when they
start with a non-TAG subscription (Java ``ClientManageProcessor.checkClientConfig``).
"""
from __future__ import annotations

import logging
from collections import OrderedDict

from rmq.broker.processors.common import bad_request, parse_json_body
from rmq.common.constants import ExpressionType
from rmq.common.log import RateLimitedLog, clip, clip_remark
from rmq.common.sql92 import SelectorError, compile_sql92
from rmq.errors import RemotingCommandError
from rmq.remoting.codes import ResponseCode
from rmq.remoting.command import RemotingCommand
from rmq.store import MessageFilter

log = logging.getLogger("rmq.broker")
_rlog = RateLimitedLog(log)

__all__ = ["CheckClientConfigProcessor", "ConsumerFilterManager", "is_tag_type", "unsupported_remark"]


def is_tag_type(expression_type: str | None) -> bool:
    """Java ``ExpressionType.isTagType``: no type, empty, or TAG (any case, as rmq always
    accepted)."""
    return not expression_type or expression_type.upper() == ExpressionType.TAG


def unsupported_remark(expression_type: str) -> str:
    """The remark Java answers when ``enablePropertyFilter`` is off."""
    return f"The broker does not support consumer to filter message by {clip_remark(expression_type)}"


def compile_filter(expression_type: str, expression: str | None) -> MessageFilter:
    """A store filter for a non-TAG subscription; ``SelectorError`` when the type is unknown
    or the expression does not compile (Java ``FilterFactory.get(type).compile``)."""
    if expression_type.upper() != ExpressionType.SQL92:
        raise SelectorError(f"unknown expression type {clip(expression_type)}")
    return MessageFilter.for_properties(compile_sql92(expression or ""))


class ConsumerFilterManager:
    """Compiled property filters, least recently used first out past ``capacity``."""

    def __init__(self, capacity: int = 4096) -> None:
        self.capacity = capacity
        self._table: OrderedDict[tuple[str, str, int, str, str], MessageFilter | SelectorError] = OrderedDict()

    def __len__(self) -> int:
        return len(self._table)

    def get(self, group: str, topic: str, sub_version: int, expression_type: str,
            expression: str | None) -> MessageFilter:
        """The compiled filter of one subscription version; raises ``SelectorError`` (cached)
        when the expression is bad."""
        key = (group, topic, sub_version, expression_type, expression or "")
        table = self._table
        found = table.get(key)
        if found is None:
            try:
                found = compile_filter(expression_type, expression)
            except SelectorError as e:
                found = e
            table[key] = found
            if len(table) > self.capacity:
                table.popitem(last=False)
        else:
            table.move_to_end(key)
        if isinstance(found, SelectorError):
            raise found
        return found


class CheckClientConfigProcessor:
    """CHECK_CLIENT_CONFIG (46): is this subscription's expression usable here? Synchronous
    (a parse of at most 4096 characters)."""

    def __init__(self, controller) -> None:
        self.controller = controller

    def reject_request(self) -> bool:
        return False

    def process_request(self, conn, cmd: RemotingCommand) -> RemotingCommand:
        try:
            body = parse_json_body(cmd, "CHECK_CLIENT_CONFIG") if cmd.body_bytes() else None
        except RemotingCommandError as e:
            return bad_request(conn, cmd, e)
        sub = body.get("subscriptionData") if isinstance(body, dict) else None
        if not isinstance(body, dict) or not isinstance(sub, dict):
            return cmd.response(ResponseCode.SUCCESS, None, {})
        expression_type = str(sub.get("expressionType") or "")
        if is_tag_type(expression_type):
            return cmd.response(ResponseCode.SUCCESS, None, {})
        if not self.controller.broker_config.enable_property_filter:
            return cmd.response(ResponseCode.SYSTEM_ERROR, unsupported_remark(expression_type), {})
        expression = sub.get("subString")
        try:
            compile_filter(expression_type, expression if isinstance(expression, str) else "")
        except SelectorError as e:
            _rlog.warning("check-client-config", "Client %s@%s filter message, but failed to compile expression! "
                          "sub=%s, error=%s", clip(body.get("clientId")), clip(body.get("group")),
                          clip(expression), clip(e))
            return cmd.response(ResponseCode.SUBSCRIPTION_PARSE_FAILED, clip_remark(str(e)), {})
        return cmd.response(ResponseCode.SUCCESS, None, {})
