"""rmq.store: CommitLog, ConsumeQueues and getMessage (SPEC S1–S6); see docs/design.md §2."""
from rmq.store.config import StoreConfig
from rmq.store.message import (AppendMessageResult, AppendMessageStatus, GetMessageResult,
                               GetMessageStatus, MessageExt, MessageFilter, MessageInner,
                               MessageSysFlag, PutMessageResult, PutMessageStatus,
                               decode_offset_msg_id, offset_msg_id, properties_to_string,
                               string_to_properties)
from rmq.store.message_store import MessageStore

__all__ = [
    "MessageStore", "StoreConfig", "MessageInner", "MessageExt", "MessageFilter",
    "MessageSysFlag", "PutMessageStatus", "AppendMessageStatus", "GetMessageStatus",
    "PutMessageResult", "AppendMessageResult", "GetMessageResult", "offset_msg_id",
    "decode_offset_msg_id", "properties_to_string", "string_to_properties",
]
