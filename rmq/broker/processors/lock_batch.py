"""LOCK_BATCH_MQ (41) and UNLOCK_BATCH_MQ (42): queue locks of orderly consumers.

Request body (both codes, Java ``LockBatchRequestBody`` / ``UnlockBatchRequestBody``)::

    {"consumerGroup": "G", "clientId": "ip@pid", "mqSet": [{"topic","brokerName","queueId"}, ...]}

LOCK answers ``{"lockOKMQSet": [...same shape...]}``: the queues the client holds after the
call (newly locked or renewed); queues held by another live client are left out. UNLOCK
answers SUCCESS without a body. Synchronous: the table lives on the event loop. A request
naming more than ``rebalanceLockMaxBatchSize`` queues (4096) is refused with SYSTEM_ERROR
before any of them is looked at.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rmq.broker.processors.common import bad_request, parse_json_body, to_json_bytes
from rmq.broker.rebalance_lock import MessageQueue
from rmq.errors import RemotingCommandError
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand

if TYPE_CHECKING:
    from rmq.broker.context import RebalanceLockContext
    from rmq.remoting.connection import Connection

log = logging.getLogger("rmq.broker.lock")


#: bytes of JSON one queue may take in a request body (a 127-character topic and a broker name
#: fit): a larger body cannot be within the batch limit and is refused before it is parsed.
_BYTES_PER_QUEUE = 400


def _parse(cmd: RemotingCommand, what: str, max_batch: int) -> tuple[str, str, list[MessageQueue]]:
    size = len(cmd.body_bytes())
    if size > max_batch * _BYTES_PER_QUEUE + 4096:
        raise RemotingCommandError(
            f"{what}: a body of {size} bytes names more queues than allowed, at most "
            f"{max_batch} (rebalanceLockMaxBatchSize)"
        )
    body = parse_json_body(cmd, what)
    if not isinstance(body, dict):
        raise RemotingCommandError(f"{what}: body must be a JSON object")
    group, client_id = body.get("consumerGroup"), body.get("clientId")
    if not isinstance(group, str) or not group:
        raise RemotingCommandError(f"{what}: consumerGroup is missing")
    if not isinstance(client_id, str) or not client_id:
        raise RemotingCommandError(f"{what}: clientId is missing")
    raw = body.get("mqSet")
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise RemotingCommandError(f"{what}: mqSet must be a JSON array")
    if len(raw) > max_batch:
        raise RemotingCommandError(
            f"{what}: {len(raw)} queues in one request, at most {max_batch} (rebalanceLockMaxBatchSize)"
        )
    try:
        mqs = list(dict.fromkeys(MessageQueue.from_json(d) for d in raw))
    except ValueError as e:
        raise RemotingCommandError(f"{what}: {e}") from None
    return group, client_id, mqs


class RebalanceLockProcessor:
    """Handles codes 41 and 42 with the controller's ``rebalance_lock_manager``."""

    codes = (RequestCode.LOCK_BATCH_MQ, RequestCode.UNLOCK_BATCH_MQ)

    def __init__(self, controller: RebalanceLockContext):
        self.controller = controller
        self.max_batch = int(controller.broker_config.rebalance_lock_max_batch_size)

    def reject_request(self) -> bool:
        return False

    def process_request(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand:
        manager = self.controller.rebalance_lock_manager
        if cmd.code == RequestCode.LOCK_BATCH_MQ:
            try:
                group, client_id, mqs = _parse(cmd, "LOCK_BATCH_MQ", self.max_batch)
            except RemotingCommandError as e:
                return bad_request(conn, cmd, e)
            locked = manager.try_lock_batch(group, mqs, client_id)
            ordered = [mq.to_json() for mq in mqs if mq in locked]
            return cmd.response(ResponseCode.SUCCESS, None, {}, to_json_bytes({"lockOKMQSet": ordered}))
        try:
            group, client_id, mqs = _parse(cmd, "UNLOCK_BATCH_MQ", self.max_batch)
        except RemotingCommandError as e:
            return bad_request(conn, cmd, e)
        manager.unlock_batch(group, mqs, client_id)
        return cmd.response(ResponseCode.SUCCESS, None, {})
