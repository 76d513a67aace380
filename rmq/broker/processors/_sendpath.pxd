# cython: language_level=3
"""rmq.broker.processors._sendpath at C level: the plain SEND in one call, over the store's
``Appender`` (rmq/_store.pxd) and the protocol layer's SEND reply writer (rmq/protocol/_codec.pxd)."""
from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from rmq._store cimport Appender

cdef enum:
    _SF_MAX_FIELDS = 32


cdef enum:
    _PC_MS = 64                                  # PutCounters' whole-millisecond slots


cdef class _TopicCount:
    cdef int64_t nums, size, times


cdef class PutCounters:
    cdef dict topics
    cdef list slow
    cdef int64_t floor_ms[_PC_MS]
    cdef int64_t ceil_ms[_PC_MS]
    cdef int64_t rpc_total_ns
    cdef public int64_t pending
    cdef object last_topic                       # the topic of the last put and its counts
    cdef _TopicCount last_count

    cdef void put(self, object topic, int64_t size, int64_t put_ns) except *


cdef class PullCounters:
    cdef dict topics                             # topic -> {group: _TopicCount}
    cdef list slow
    cdef int64_t ceil_ms[_PC_MS]
    cdef int64_t rpc_total_ns, misses, max_ms
    cdef public int64_t pending

    cdef inline void _time(self, int64_t get_ns) except *
    cpdef void found(self, str group, str topic, int64_t nums, int64_t size, int64_t get_ns) except *
    cpdef void missed(self, int64_t get_ns) except *


cdef class SendGate:
    cdef public dict topics
    cdef public object broker_config, stats
    cdef public Appender appender
    cdef readonly PutCounters counters
    cdef readonly object broker_config_type, topic_config_type
    # slot offsets (rmq/common/slots.pxd) of the BrokerConfig and TopicConfig fields _put reads
    cdef Py_ssize_t o_region, o_broker_perm, o_type_check, o_trace
    cdef Py_ssize_t o_perm, o_write_nums, o_read_nums, o_type_code


cdef class SendFastPath:
    cdef tuple w1, w2, attrs
    cdef uint8_t kinds[_SF_MAX_FIELDS]
    cdef uint8_t required[_SF_MAX_FIELDS]
    cdef int64_t lo[_SF_MAX_FIELDS]
    cdef int64_t hi[_SF_MAX_FIELDS]
    cdef Py_ssize_t n
    cdef Py_ssize_t i_topic, i_queue, i_sys, i_born, i_flag, i_props, i_recon, i_batch
    cdef object not_allowed, retry_prefix, json_decode, last_topic_b, last_topic
    cdef readonly SendGate gate
    cdef tuple marks, w1b
    cdef uint64_t mark_bloom                     # _mark_hash of each mark's last two name bytes
    cdef object allowed_topic                    # the last topic that passed _topic_allowed
    cdef const char* w1_ptr[_SF_MAX_FIELDS]      # V1 wire names as bytes (kept by w1b)
    cdef Py_ssize_t w1_len[_SF_MAX_FIELDS]
    cdef int v2_of[256]                          # V2's one-letter wire name -> field, or -1
    cdef public Py_ssize_t taken, declined, frames, scanned, batched

    cdef int _read(self, object ext, bint v2, int64_t* vals, PyObject** texts) except -1
    cdef int _read_map(self, const uint8_t* p, Py_ssize_t pos, Py_ssize_t ext_end, bint v2, bint ascii,
                       int64_t* vals, const uint8_t** tp, Py_ssize_t* tl) except -1
    cdef object _topic_str(self, const uint8_t* p, Py_ssize_t n)
    cdef bint _has_mark(self, const uint8_t* p, Py_ssize_t n) noexcept
    cdef bint _topic_allowed(self, object topic) except -1
    cdef object store_frame(self, object data, Py_ssize_t hstart, Py_ssize_t hend, Py_ssize_t end, int ser,
                            bytes born)
    cdef object store_at(self, object data, const uint8_t* p, Py_ssize_t size, Py_ssize_t hstart,
                         Py_ssize_t hend, Py_ssize_t end, int ser, bytes born)
    cdef object _put(self, object topic, const uint8_t* pp, Py_ssize_t plen, const uint8_t* body,
                     Py_ssize_t blen, int64_t* vals, int serialize_type, int flag, int32_t opaque,
                     object born, int64_t t0)


cdef class SendFrameHook:
    cdef SendFastPath fast
    cdef bytes born
    cdef object pool
    cdef public Py_ssize_t taken
