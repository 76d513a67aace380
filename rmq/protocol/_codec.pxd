# cython: language_level=3
"""rmq.protocol._codec at C level: the output buffer the header encoders write into and the
text checks of the typed-header reader, cimported by the broker's SEND fast path
(rmq/broker/processors/_sendpath.pyx) for its reply frame and its header reads."""
from libc.stdint cimport int64_t

cdef struct JOut:
    char* p
    Py_ssize_t n
    Py_ssize_t cap

cdef enum:
    # a header field's kind (HeaderReader, SendFastPath)
    H_STR = 0
    H_INT = 1
    H_BOOL = 2

cdef int jo_reserve(JOut* o, Py_ssize_t extra) except -1
cdef int jo_raw(JOut* o, const char* s, Py_ssize_t n) except -1
cdef int jo_lit(JOut* o, bytes lit) except -1
cdef int jo_str(JOut* o, object s) except -1
cdef int jo_i64(JOut* o, int64_t x) except -1
cdef int bo_utf8(JOut* o, object s, Py_ssize_t len_bytes) except -1
cdef int bo_dec(JOut* o, int64_t x) except -1
cdef int bo_key(JOut* o, bytes key) except -1
cdef bint has_surrogate(object s) except -1
cdef bint str_decimal(object s, long long* out) noexcept
