"""Copies of stored messages: the broker re-stores a ``StoredMessage`` under another topic or
queue (delivery of a delayed message, a send-back to %RETRY%/%DLQ%, a transaction's commit,
a half message put back for its next check or kept after the last one)."""

from __future__ import annotations

from rmq.store import MessageInner, StoredMessage

__all__ = ["copy_to_inner"]


def copy_to_inner(
    ext: StoredMessage,
    topic: str,
    queue_id: int,
    properties: dict[str, str],
    *,
    sys_flag: int | None = None,
    reconsume_times: int | None = None,
    prepared_transaction_offset: int = 0,
) -> MessageInner:
    """A ``MessageInner`` holding ``ext``'s body, flag and born time/host under ``topic`` /
    ``queue_id`` with ``properties`` (encoded by the store; tags code from TAGS).

    ``sys_flag`` and ``reconsume_times`` default to ``ext``'s own;
    ``prepared_transaction_offset`` defaults to 0 (as for a fresh message).
    """
    return MessageInner(
        topic=topic,
        queue_id=queue_id,
        body=ext.body,
        flag=ext.flag,
        properties=properties,
        born_timestamp=ext.born_timestamp,
        born_host=ext.born_host,
        sys_flag=ext.sys_flag if sys_flag is None else sys_flag,
        reconsume_times=ext.reconsume_times if reconsume_times is None else reconsume_times,
        prepared_transaction_offset=prepared_transaction_offset,
    )
