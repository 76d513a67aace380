# cython: language_level=3
"""rmq.protocol._codec at C level, cimported by the broker's SEND fast path
(rmq/broker/processors/_sendpath.pyx): the one SEND reply writer, the text checks of the
typed-header reader and the JSON request header scan. The buffer helpers behind the writer (JOut, jo_*, bo_*) stay in the module."""
from libc.stdint cimport int32_t, int64_t, uint8_t

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
