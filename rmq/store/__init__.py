"""rmq.store: CommitLog, ConsumeQueues, getMessage, recovery and retention (Java
DefaultMessageStore and its services); the layout is described in docs/design.md, "Store"."""

from rmq.store.config import StoreConfig
from rmq.store.message import (
    AppendMessageResult,
    AppendMessageStatus,
    GetMessageResult,
    GetMessageStatus,
    MessageFilter,
    MessageInner,
    MessageSysFlag,
    PutMessageResult,
    PutMessageStatus,
    StoredMessage,
    decode_offset_msg_id,
    offset_msg_id,
    properties_to_string,
    string_to_properties,
)
from rmq.store.message_store import MessageStore

__all__ = [
    "AppendMessageResult",
    "AppendMessageStatus",
    "GetMessageResult",
    "GetMessageStatus",
    "MessageFilter",
    "MessageInner",
    "MessageStore",
    "MessageSysFlag",
    "PutMessageResult",
    "PutMessageStatus",
    "StoreConfig",
    "StoredMessage",
    "decode_offset_msg_id",
    "offset_msg_id",
    "properties_to_string",
    "string_to_properties",
]
