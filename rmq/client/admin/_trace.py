"""Message trace lookups (Java ``QueryMsgTraceByIdSubCommand.queryTraceByMsgId`` and
``TraceView``): the trace records of one message, read from the trace topic by the index."""

from __future__ import annotations

import time

from rmq.client.trace import TraceView, trace_views
from rmq.common.constants import TopicValidator

from ._base import AdminError
from ._messages import MessageAdmin

__all__ = ["TraceAdmin"]


class TraceAdmin(MessageAdmin):
    """Message-trace lookups of :class:`rmq.client.admin.Admin`."""

    async def query_msg_trace_by_id(
        self,
        msg_id: str,
        trace_topic: str = TopicValidator.RMQ_SYS_TRACE_TOPIC,
    ) -> list[TraceView]:
        """The trace records (Pub, SubBefore, SubAfter, EndTransaction) of message ``msg_id``
        in ``trace_topic`` (default ``RMQ_SYS_TRACE_TOPIC``), whichever client wrote them:
        the trace messages keyed by ``msg_id`` (at most 64 per broker, as mqadmin asks) are
        decoded as Java's ``TraceDataEncoder`` writes them, oldest trace message first.
        :class:`AdminError` saying how to turn tracing on when the trace topic has no route."""
        try:
            result = await self.query_message_by_key(
                trace_topic, msg_id, max_num=64, begin=0, end=int(time.time() * 1000)
            )
        except AdminError as e:
            if "no route for topic" not in str(e):
                raise
            # The trace topic exists only once a broker with traceTopicEnable=true registered
            # it (Java BrokerController / TopicConfigManager): say how to get traces.
            raise AdminError(
                f"{e}: no message trace was ever written there; start the broker with "
                f"traceTopicEnable=true and the clients with trace=True (Java: enableMsgTrace), "
                f"then send again"
            ) from None
        views: list[TraceView] = []
        for msg in result.messages:
            views.extend(trace_views(msg_id, msg))
        return views
