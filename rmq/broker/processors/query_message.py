"""QUERY_MESSAGE (12), VIEW_MESSAGE_BY_ID (33) and QUERY_TOPIC_CONSUME_BY_WHO (300).

Java QueryMessageProcessor (12, 33) and AdminBrokerProcessor.queryTopicConsumeByWho (300):

* QUERY_MESSAGE: ``QueryMessageRequestHeader`` (topic, key, maxNum, beginTimestamp,
  endTimestamp); with extField ``_UNIQUE_KEY_QUERY=true`` maxNum becomes
  ``defaultQueryMaxNum``. The store caps it at ``maxMsgsNumBatch``. SUCCESS carries the
  records back to back as the body; nothing found is QUERY_NOT_FOUND "can not find message,
  maybe time range not correct". Both carry ``QueryMessageResponseHeader``
  (indexLastUpdateTimestamp, indexLastUpdatePhyoffset).
* VIEW_MESSAGE_BY_ID: ``ViewMessageRequestHeader`` (offset) → the record as the body, or
  SYSTEM_ERROR "can not find message by the offset, <offset>".
* QUERY_TOPIC_CONSUME_BY_WHO: ``{"groupList":[...]}``: the groups subscribed to the topic
  (consumer manager) and the groups with offsets for it.

Beyond Java (docs/design.md "ACL"): QUERY_MESSAGE answers only records of the topic asked for
(the index also finds other topics' records whose key hash collides; Java's clients drop them,
so no client misses them), and with ACL on VIEW_MESSAGE_BY_ID answers a record only when the
account may SUB its topic (Java answers any record to any account that passes the ACL).

Synchronous: the index and the CommitLog are read on the event loop (a query walks at most
``maxMsgsNumBatch`` entries per matching file and copies as many records).
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from rmq import _store
from rmq.broker.acl import refuse_acl
from rmq.broker.processors.common import bad_request
from rmq.common.constants import MixAll
from rmq.common.message import RecordSpan
from rmq.errors import RemotingCommandError
from rmq.protocol.body.topic import GroupList
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.message import QueryMessageRequestHeader, QueryMessageResponseHeader, ViewMessageRequestHeader
from rmq.protocol.headers.topic import QueryTopicConsumeByWhoRequestHeader

if TYPE_CHECKING:
    from rmq.broker.context import BrokerContext
    from rmq.remoting.connection import Connection

log = logging.getLogger("rmq.broker")


def _record_topic(record: bytes) -> str:
    span = RecordSpan(*_store.record_span(record))
    return record[span.topic_at : span.topic_at + span.topic_len].decode("utf-8", "replace")


QUERY_NOT_FOUND_REMARK = "can not find message, maybe time range not correct"


class QueryMessageProcessor:
    """Codes 12 and 33 (Java QueryMessageProcessor) and 300."""

    codes = (RequestCode.QUERY_MESSAGE, RequestCode.VIEW_MESSAGE_BY_ID, RequestCode.QUERY_TOPIC_CONSUME_BY_WHO)

    def __init__(self, controller: BrokerContext):
        self.controller = controller

    def reject_request(self) -> bool:
        return False

    def process_request(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        try:
            if cmd.code == RequestCode.QUERY_MESSAGE:
                return self.query_message(cmd)
            if cmd.code == RequestCode.VIEW_MESSAGE_BY_ID:
                return self.view_message_by_id(conn, cmd)
            return self.query_topic_consume_by_who(cmd)
        except RemotingCommandError as e:
            return bad_request(conn, cmd, e)

    def query_message(self, cmd: RemotingCommand) -> RemotingCommand:
        h = QueryMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        store = self.controller.started_store
        max_num = h.max_num
        if (cmd.ext_fields or {}).get(MixAll.UNIQUE_MSG_QUERY_FLAG) == "true":
            max_num = store.config.default_query_max_num
        result = store.query_message(h.topic, h.key, max_num, h.begin_timestamp, h.end_timestamp)
        ext = QueryMessageResponseHeader(
            index_last_update_timestamp=result.index_last_update_timestamp,
            index_last_update_phyoffset=result.index_last_update_phyoffset,
        ).to_ext_fields()
        # only the topic asked for (and checked by the ACL): a colliding hash finds others' records
        found: list[bytes | bytearray | memoryview] = [b for b in result.buffers if _record_topic(b) == h.topic]
        if found:
            return cmd.response(ResponseCode.SUCCESS, None, ext, body=found)
        return cmd.response(ResponseCode.QUERY_NOT_FOUND, QUERY_NOT_FOUND_REMARK, ext)

    def view_message_by_id(self, conn: Connection, cmd: RemotingCommand) -> RemotingCommand | None:
        h = ViewMessageRequestHeader.from_ext_fields(cmd.ext_fields)
        data = self.controller.started_store.select_one_message_by_offset(h.offset)
        if data is None:
            return cmd.response(ResponseCode.SYSTEM_ERROR, f"can not find message by the offset, {h.offset}", {})
        acl = self.controller.acl
        if acl is not None:
            refusal = acl.may_read(cmd, conn.remote_addr.rpartition(":")[0], _record_topic(data))
            if refusal is not None:
                # answered as the ACL answers a refused request (Java's remark and code)
                refuse_acl(conn, cmd, refusal)
                return None
        return cmd.response(ResponseCode.SUCCESS, None, {}, body=data)

    def query_topic_consume_by_who(self, cmd: RemotingCommand) -> RemotingCommand:
        h = QueryTopicConsumeByWhoRequestHeader.from_ext_fields(cmd.ext_fields)
        c = self.controller
        groups = {
            group
            for group, info in c.consumer_manager.consumer_table.items()
            if info.find_subscription_data(h.topic) is not None
        }
        groups |= c.consumer_offset_manager.which_group_by_topic(h.topic)
        return cmd.response(ResponseCode.SUCCESS, None, {}, body=GroupList(sorted(groups)).encode())
