# cython: language_level=3
"""Byte-order helpers and CRC shared by the native modules (header only: cimported, never
imported). Every integer on disk and on the wire is big-endian (Java ``ByteBuffer`` order);
BODYCRC is zlib's crc32 of the body as Java's ``UtilAll.crc32`` stores it."""
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

cdef extern from "zlib.h" nogil:
    unsigned long crc32(unsigned long crc, const unsigned char* buf, unsigned int len)

cdef enum:
    # bodies longer than this have their CRC computed without the GIL
    CRC_NOGIL_MIN = 4096


cdef inline int16_t rd16(const uint8_t* p) noexcept nogil:
    return <int16_t>((<uint16_t>p[0] << 8) | p[1])

cdef inline uint16_t rdu16(const uint8_t* p) noexcept nogil:
    return <uint16_t>((<uint16_t>p[0] << 8) | p[1])

cdef inline int32_t rd32(const uint8_t* p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3])

cdef inline uint32_t rdu32(const uint8_t* p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]

cdef inline int64_t rd64(const uint8_t* p) noexcept nogil:
    return <int64_t>((<uint64_t>rdu32(p) << 32) | rdu32(p + 4))

cdef inline void wr16(uint8_t* p, int v) noexcept nogil:
    p[0] = (v >> 8) & 0xFF
    p[1] = v & 0xFF

cdef inline void wr32(uint8_t* p, int64_t v) noexcept nogil:
    cdef uint32_t u = <uint32_t>v
    p[0] = (u >> 24) & 0xFF
    p[1] = (u >> 16) & 0xFF
    p[2] = (u >> 8) & 0xFF
    p[3] = u & 0xFF

cdef inline void wr64(uint8_t* p, int64_t v) noexcept nogil:
    cdef uint64_t u = <uint64_t>v
    wr32(p, <int64_t>(u >> 32))
    wr32(p + 4, <int64_t>(u & 0xFFFFFFFFu))


cdef inline int32_t java_crc(const uint8_t* p, Py_ssize_t n) noexcept:
    """``crc32 & 0x7FFFFFFF`` of ``p[:n]`` as Java stores BODYCRC (UtilAll.crc32); the GIL
    is released over bodies longer than CRC_NOGIL_MIN. ``n`` < 2**31 (a record's int32)."""
    cdef unsigned long c
    if n <= 0:
        return 0
    if n > CRC_NOGIL_MIN:
        with nogil:
            c = crc32(0, p, <unsigned int>n)
    else:
        c = crc32(0, p, <unsigned int>n)
    return <int32_t>(c & 0x7FFFFFFFu)


cdef inline bint ascii_decimal(const uint8_t* d, Py_ssize_t n, long long* out) noexcept nogil:
    """True with ``out`` set when ``d[:n]`` is ``-?[0-9]{1,18}`` (Java's ``Long.parseLong`` of
    it gives the same value; 18 digits cannot overflow int64); False for anything else. The
    header codec reads str values with it, the SEND fast path frame bytes."""
    cdef Py_ssize_t i = 0
    cdef long long x = 0
    cdef bint neg = False
    if n > 0 and d[0] == c'-':
        neg = True
        i = 1
    if n - i < 1 or n - i > 18:
        return False
    while i < n:
        if d[i] < c'0' or d[i] > c'9':
            return False
        x = x * 10 + (d[i] - c'0')
        i += 1
    out[0] = -x if neg else x
    return True
