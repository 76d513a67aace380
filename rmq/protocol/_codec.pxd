# cython: language_level=3
"""rmq.protocol._codec at C level: the output buffer the header encoders write into and the
text checks of the typed-header reader, cimported by the broker's SEND fast path
(rmq/broker/processors/_sendpath.pyx) for its reply frame and its header reads."""
from libc.stdint cimport int64_t

cdef struct _JOut:
    char* p
    Py_ssize_t n
    Py_ssize_t cap

cdef enum:
    # a header field's kind (HeaderReader, SendFastPath)
    _H_STR = 0
    _H_INT = 1
    _H_BOOL = 2

cdef int _jo_reserve(_JOut* o, Py_ssize_t extra) except -1
cdef int _jo_raw(_JOut* o, const char* s, Py_ssize_t n) except -1
cdef int _jo_lit(_JOut* o, bytes lit) except -1
cdef int _jo_str(_JOut* o, object s) except -1
cdef int _jo_i64(_JOut* o, int64_t x) except -1
cdef int _bo_utf8(_JOut* o, object s, Py_ssize_t len_bytes) except -1
cdef int _bo_dec(_JOut* o, int64_t x) except -1
cdef int _bo_key(_JOut* o, bytes key) except -1
cdef bint _has_surrogate(object s) except -1
cdef bint _ascii_decimal(object s, long long* out) noexcept
