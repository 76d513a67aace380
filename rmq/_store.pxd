# cython: language_level=3
"""rmq._store at C level: the record layout's named offsets, the buffer idiom and the store's
one writer (``Appender``), cimported by the broker's SEND fast path
(rmq/broker/processors/_sendpath.pyx)."""
cimport cython
from cpython.buffer cimport PyObject_GetBuffer, PyBUF_SIMPLE, PyBUF_WRITABLE
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_CheckExact, PyBytes_GET_SIZE
from libc.stdint cimport int32_t, int64_t, uint8_t

# Constants (Java names). The record layout is drawn once, in rmq/common/message.py; the
# offsets below carry the same names (tests/store/test_codec.py checks they agree).
cdef enum:
    OFF_TOTALSIZE = 0
    OFF_MAGIC = 4
    OFF_BODYCRC = 8
    OFF_QUEUEID = 12
    OFF_FLAG = 16
    OFF_QUEUEOFFSET = 20
    OFF_PHYSICALOFFSET = 28
    OFF_SYSFLAG = 36
    OFF_BORNTIMESTAMP = 40
    OFF_BORNHOST = 48
    HOST_V4_LEN = 8
    HOST_V6_LEN = 20
    STORETIMESTAMP_LEN = 8
    # relative to the end of STOREHOST
    REL_RECONSUMETIMES = 0
    REL_PREPARED_TX_OFFSET = 4
    REL_BODYLEN = 12
    REL_BODY = 16
    # v1 record with IPv4 hosts and an empty body, topic and properties
    FIXED = OFF_BORNHOST + HOST_V4_LEN + STORETIMESTAMP_LEN + HOST_V4_LEN + REL_BODY + 1 + 2
    # MessageSysFlag bits
    SYSFLAG_BORNHOST_V6 = 0x10
    SYSFLAG_STOREHOST_V6 = 0x20
    # ConsumeQueue unit: CommitLog offset int64, size int32, tags code int64
    CQ_UNIT = 20
    CQ_OFF_PHY = 0
    CQ_OFF_SIZE = 8
    CQ_OFF_TAGS = 12
    # batch item: TOTALSIZE, MAGIC, BODYCRC, FLAG, BODYLEN, body, PROPLEN int16, properties
    BATCH_OFF_FLAG = 12
    BATCH_OFF_BODYLEN = 16
    BATCH_HEAD = 20
    # properties separators (MessageDecoder.NAME_VALUE_SEPARATOR / PROPERTY_SEPARATOR)
    NAME_VALUE_SEPARATOR = 1
    PROPERTY_SEPARATOR = 2
    MAX_PROPERTIES_LEN = 32767
    MAX_TOPIC_LEN_V1 = 255
    # Java CommitLog.END_FILE_MIN_BLANK_LENGTH: a file keeps room for a BLANK record's head
    END_FILE_MIN_BLANK_LEN = 8
    # Java DefaultMessageStore.getMessage: maxFilterMessageCount = max(16000, maxMsgNums * 20)
    MIN_FILTER_SCAN_BYTES = 16000
    # queue ids 0..QUEUE_ARRAY_MAX-1 have a slot in a topic's offset array (rmq/_qtable.pxi)
    QUEUE_ARRAY_MAX = 1024


cdef struct RecordHead:
    # the fields of a record that are not its body, topic or properties
    int32_t body_crc
    int32_t queue_id
    int32_t flag
    int64_t queue_offset
    int64_t phy_offset
    int32_t sys_flag
    int64_t born_timestamp
    const char* born_host           # 8 bytes
    int64_t store_timestamp
    const char* store_host          # 8 bytes
    int32_t reconsume_times
    int64_t prepared_transaction_offset


@cython.final
cdef class RecordBuf:
    """A Py_buffer held for the lifetime of this object (read-only or writable view): the one
    way the store's module reads or writes a buffer. Made by ``record_buf``."""
    cdef Py_buffer view
    cdef bint held
    cdef const uint8_t* ptr
    cdef uint8_t* wptr
    cdef Py_ssize_t size


cdef inline RecordBuf record_buf(obj, bint writable=False):
    """Hold ``obj``'s buffer (writable when asked) until the returned object goes away."""
    cdef RecordBuf b = RecordBuf.__new__(RecordBuf)
    PyObject_GetBuffer(obj, &b.view, PyBUF_WRITABLE if writable else PyBUF_SIMPLE)
    b.held = True
    b.ptr = <const uint8_t*>b.view.buf
    b.wptr = <uint8_t*>b.view.buf
    b.size = b.view.len
    return b


cdef inline RecordBuf frame_bytes(object data, const uint8_t** p, Py_ssize_t* size):
    """``data``'s bytes at ``p[0][:size[0]]``: a read's ``bytes`` directly (no buffer export:
    the common case on the SEND and PULL paths, returns None), anything else (the frame
    decoder's bytearray) through ``record_buf``, whose returned holder keeps the buffer until
    the caller drops it."""
    cdef RecordBuf b
    if PyBytes_CheckExact(data):
        p[0] = <const uint8_t*>PyBytes_AS_STRING(data)
        size[0] = PyBytes_GET_SIZE(data)
        return None
    b = record_buf(data)
    p[0] = b.ptr
    size[0] = b.size
    return b


@cython.final
cdef class TopicEntry:
    """One topic's cached name and next queue offsets (rmq/_qtable.pxi, layout drawn there)."""
    cdef bytes topic_b                           # UTF-8 name once checked, or None
    cdef int64_t* offs                           # next offset by queue id, -1: none
    cdef int32_t cap                             # slots of offs (<= QUEUE_ARRAY_MAX)
    cdef Py_ssize_t count                        # offsets present (offs and far)
    cdef dict far                                # {queue id: next offset}, ids outside the array's

    cdef int64_t get(self, int32_t qid) except -2
    cdef int set(self, int32_t qid, int64_t value) except -1
    cdef int64_t remove(self, int32_t qid) except -2


cdef class QueueTable:
    """The writer's ``{topic: TopicEntry}`` (rmq/_qtable.pxi)."""
    cdef dict topics
    cdef Py_ssize_t n_offsets, n_cached
    cdef readonly Py_ssize_t max_topics

    cdef TopicEntry entry(self, str topic, bint create)
    cdef int _drop_if_empty(self, str topic, TopicEntry e) except -1
    cdef int set_offset(self, str topic, int32_t qid, int64_t value) except -1


cdef class Appender:
    """The CommitLog's one writer (rmq/_append.pxi)."""
    cdef public QueueTable queues
    cdef readonly bytes store_host_bytes
    cdef readonly str id_prefix
    cdef public object mfq, warm
    cdef object _bound, _scfg
    cdef type _mf_type                           # MappedFile, whose slots put_plain reads
    cdef type _cfg_type                          # StoreConfig, whose slots put_plain reads
    cdef Py_ssize_t _o_role, _o_flush, _o_max_size
    cdef Py_ssize_t _o_from, _o_size, _o_wrote, _o_warmed, _o_alloc, _o_mm
    cdef public tuple hooks
    cdef public object waker, notifier
    cdef public bint wake_pending, notify_armed, refusing
    cdef public int64_t put_total, put_bytes
    cdef int64_t warm_half

    cdef int _after(self, int64_t n, int64_t nbytes, int64_t warmed_to, int64_t file_size, int64_t end) except -1
    cdef int put_plain(self, object topic, int32_t queue_id, RecordHead* h, const uint8_t* body,
                       Py_ssize_t blen, const uint8_t* pp, Py_ssize_t plen, int64_t* out) except -1
