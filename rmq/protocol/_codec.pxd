# cython: language_level=3
"""rmq.protocol._codec at C level, cimported by the broker's SEND fast path
(rmq/broker/processors/_sendpath.pyx): the one SEND reply writer and the text checks of the
typed-header reader. The buffer helpers behind the writer (JOut, jo_*, bo_*) stay in the module."""
from libc.stdint cimport int32_t, int64_t

cdef enum:
    # a header field's kind (HeaderReader, SendFastPath)
    H_STR = 0
    H_INT = 1
    H_BOOL = 2

cdef object send_reply(int serialize_type, int code, int32_t opaque, object msg_id, const char* mid,
                       Py_ssize_t mlen, int64_t queue_id, int64_t queue_offset, object region,
                       bint trace_on)
cdef bint has_surrogate(object s) except -1
cdef bint str_decimal(object s, long long* out) noexcept
