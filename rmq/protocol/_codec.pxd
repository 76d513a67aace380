# cython: language_level=3
"""rmq.protocol._codec at C level, cimported by the broker's SEND and PULL fast paths
(rmq/broker/processors/_sendpath.pyx, _pullpath.pyx): the SEND and PULL reply writers, the text
checks of the typed-header reader, the JSON request header scan and the ROCKETMQ map walker. The buffer helpers behind the writer (JOut, jo_*, bo_*) stay in the module."""
from libc.stdint cimport int32_t, int64_t, uint8_t
from rmq.common._bytes cimport rd16, rd32

cdef enum:
    # a header field's kind (HeaderReader, SendFastPath)
    H_STR = 0
    H_INT = 1
    H_BOOL = 2

cdef object send_reply(int serialize_type, int code, int32_t opaque, object msg_id, const char* mid,
                       Py_ssize_t mlen, int64_t queue_id, int64_t queue_offset, object region,
                       bint trace_on)
cdef object pull_reply(int serialize_type, int code, int32_t opaque, const char* remark, Py_ssize_t rlen,
                       int64_t next_begin, int64_t min_offset, int64_t max_offset, int64_t suggest,
                       const char* body, Py_ssize_t blen)
cdef bint has_surrogate(object s) except -1
cdef bint str_decimal(object s, long long* out) noexcept


cdef struct JsonHead:
    # a JSON request header's numbers (json_header_scan)
    int64_t code
    int64_t flag
    int64_t opaque
    int64_t version

# The JSON request header ``p[:n]`` read without a dict: its numbers into ``h``, its extFields
# as a ROCKETMQ-form map into ``ext`` (at most ``cap`` bytes; ``n`` always suffices); the map's
# length, or -1 for any header outside the common shape (the general decoder's then).
cdef Py_ssize_t json_header_scan(const uint8_t* p, Py_ssize_t n, JsonHead* h, uint8_t* ext,
                                 Py_ssize_t cap) noexcept nogil


# One entry of a ROCKETMQ-serialized extFields map (Java RocketMQSerializable.mapDeserialize),
# big-endian:
#
#   +------------+-------------+--------------+---------------+
#   | i16 keyLen | key (bytes) | i32 valueLen | value (bytes) |
#   +------------+-------------+--------------+---------------+
#
# 1 with the entry at p[pos[0]:end] read (key and value as pointer and length) and pos[0] moved
# past it; 0 when it does not fit in what is left (a truncated or negative length). Every reader
# of the map (the typed-header decoder, the SEND and PULL fast paths) walks it with this.
cdef inline int map_entry(const uint8_t* p, Py_ssize_t* pos, Py_ssize_t end, const uint8_t** kp,
                          Py_ssize_t* klen, const uint8_t** vp, Py_ssize_t* vlen) noexcept nogil:
    cdef Py_ssize_t i = pos[0]
    cdef Py_ssize_t n
    if end - i < 2:
        return 0
    n = rd16(p + i)
    i += 2
    if n < 0 or n > end - i:
        return 0
    kp[0] = p + i
    klen[0] = n
    i += n
    if end - i < 4:
        return 0
    n = rd32(p + i)
    i += 4
    if n < 0 or n > end - i:
        return 0
    vp[0] = p + i
    vlen[0] = n
    pos[0] = i + n
    return 1
