"""QUERY_ASSIGNMENT (400) and SET_MESSAGE_REQUEST_MODE (401): server-side assignment for
RocketMQ 5 push consumers (Java ``QueryAssignmentRequestBody``, ``QueryAssignmentResponseBody``,
``SetMessageRequestModeRequestBody``; keys in fastjson's order, by name)."""

from __future__ import annotations

from typing import Any

from rmq.common import fastjson
from rmq.errors import RemotingCommandError
from rmq.protocol.codes import RequestCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.requests import check_success
from rmq.types import MessageQueue

#: Java ``MessageRequestMode`` names.
MESSAGE_REQUEST_MODES = ("PULL", "POP")


def set_message_request_mode(topic: str, group: str, mode: str, pop_share_queue_num: int = 0) -> RemotingCommand:
    """SET_MESSAGE_REQUEST_MODE: ``mode`` PULL or POP; ``pop_share_queue_num`` (default 0: in
    POP mode every client pops every queue) as Java's ``-q``."""
    body = {"consumerGroup": group, "mode": mode, "popShareQueueNum": pop_share_queue_num, "topic": topic}
    return RemotingCommand.request(RequestCode.SET_MESSAGE_REQUEST_MODE, {}, fastjson.dumps(body))


def query_assignment(
    topic: str, group: str, client_id: str, strategy_name: str = "AVG", message_model: str = "CLUSTERING"
) -> RemotingCommand:
    """QUERY_ASSIGNMENT as a Java 5 push consumer sends it (strategy ``AVG`` by default)."""
    body = {
        "clientId": client_id,
        "consumerGroup": group,
        "messageModel": message_model,
        "strategyName": strategy_name,
        "topic": topic,
    }
    return RemotingCommand.request(RequestCode.QUERY_ASSIGNMENT, {}, fastjson.dumps(body))


def assignment_json(mq: MessageQueue, mode: str) -> dict[str, Any]:
    """One ``MessageQueueAssignment`` as fastjson writes it (keys sorted, no null attachments)."""
    return {"messageQueue": {"brokerName": mq.broker_name, "queueId": mq.queue_id, "topic": mq.topic}, "mode": mode}


def parse_query_assignment(resp: RemotingCommand) -> list[tuple[MessageQueue, str]] | None:
    """``[(queue, mode), ...]`` sorted, or None when the broker had no valid answer (Java's null
    set: the client keeps what it has)."""
    check_success(resp)
    try:
        body = fastjson.loads(resp.body_bytes() or b"{}")
        raw = body.get("messageQueueAssignments")
        if raw is None:
            return None
        return sorted((MessageQueue.from_json(a["messageQueue"]), str(a.get("mode", "PULL"))) for a in raw)
    except (ValueError, TypeError, KeyError, AttributeError) as e:
        raise RemotingCommandError(f"malformed QUERY_ASSIGNMENT answer: {e}") from None
