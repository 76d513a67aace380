"""copy_to_inner: the one place the broker turns a StoredMessage into a MessageInner."""

from rmq.broker.message_copy import copy_to_inner
from rmq.common.message import MessageSysFlag
from rmq.store import StoredMessage


def _ext(**kw):
    d = dict(
        topic="T",
        queue_id=3,
        flag=7,
        queue_offset=11,
        commit_log_offset=4096,
        sys_flag=MessageSysFlag.COMPRESSED_FLAG | MessageSysFlag.TRANSACTION_PREPARED_TYPE,
        born_timestamp=1_700_000_000_000,
        born_host=("10.0.0.9", 5555),
        store_timestamp=1_700_000_000_100,
        store_host=("10.0.0.1", 10911),
        reconsume_times=2,
        prepared_transaction_offset=99,
        body=b"payload",
        properties={"TAGS": "A"},
        body_crc=1,
        store_size=200,
        msg_id="X",
    )
    d.update(kw)
    return StoredMessage(**d)


def test_copy_keeps_the_message_and_takes_the_new_place():
    ext = _ext()
    props = {"TAGS": "A", "REAL_TOPIC": "T"}
    inner = copy_to_inner(ext, "NEW", 1, props)
    assert (inner.topic, inner.queue_id, inner.properties) == ("NEW", 1, props)
    assert (inner.body, inner.flag, inner.born_timestamp, inner.born_host) == (
        b"payload",
        7,
        ext.born_timestamp,
        ("10.0.0.9", 5555),
    )
    assert (inner.sys_flag, inner.reconsume_times) == (ext.sys_flag, 2)
    # a copy is a fresh message: no prepared offset, no pre-encoded properties, store time unset
    assert inner.prepared_transaction_offset == 0 and inner.properties_str is None and inner.store_timestamp == 0


def test_copy_overrides():
    ext = _ext()
    inner = copy_to_inner(
        ext,
        "R",
        0,
        {},
        sys_flag=MessageSysFlag.TRANSACTION_COMMIT_TYPE,
        reconsume_times=3,
        prepared_transaction_offset=4096,
    )
    assert (inner.sys_flag, inner.reconsume_times, inner.prepared_transaction_offset) == (
        MessageSysFlag.TRANSACTION_COMMIT_TYPE,
        3,
        4096,
    )
    assert copy_to_inner(ext, "R", 0, {}, sys_flag=0).sys_flag == 0  # 0 is a value, not "default"
