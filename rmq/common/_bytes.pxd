# cython: language_level=3
"""Byte-order helpers and CRC shared by the native modules (header only: cimported, never
imported). Every integer on disk and on the wire is big-endian (Java ``ByteBuffer`` order);
BODYCRC is zlib's crc32 of the body as Java's ``UtilAll.crc32`` stores it."""
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t

cdef extern from "zlib.h" nogil:
    unsigned long crc32(unsigned long crc, const unsigned char* buf, unsigned int len)

# zlib's crc32 (IEEE 802.3, reflected) with carry-less multiplication on x86-64 CPUs that have
# PCLMULQDQ and SSE4.1: the folding of Intel's "Fast CRC Computation for Generic Polynomials
# Using PCLMULQDQ Instruction" (Gopal et al., 2009), the method zlib-ng and Chromium's zlib use
# (Java's CRC32 intrinsic too); zlib's crc32 for buffers under 64 bytes, the last len % 16
# bytes and other CPUs. About 0.3 instructions per byte against zlib 1.2's 4
# (bench/README.md, "Instruction counts"); tests/store/test_codec.py compares it with zlib.
cdef extern from *:
    """
    #include <stddef.h>
    #include <stdint.h>
    #include <zlib.h>

    #if defined(__x86_64__) && (defined(__GNUC__) || defined(__clang__))
    #include <immintrin.h>

    __attribute__((target("pclmul,sse4.1")))
    static uint32_t rmq_crc32_fold(const unsigned char *buf, size_t len, uint32_t crc)
    {
        /* len >= 64, a multiple of 16; crc is the running CRC, not inverted */
        static const uint64_t __attribute__((aligned(16))) k1k2[] = {0x0154442bd4, 0x01c6e41596};
        static const uint64_t __attribute__((aligned(16))) k3k4[] = {0x01751997d0, 0x00ccaa009e};
        static const uint64_t __attribute__((aligned(16))) k5k0[] = {0x0163cd6124, 0x0000000000};
        static const uint64_t __attribute__((aligned(16))) poly[] = {0x01db710641, 0x01f7011641};
        __m128i x0, x1, x2, x3, x4, x5, x6, x7, x8, y5, y6, y7, y8;
        x1 = _mm_loadu_si128((const __m128i *)(buf + 0x00));
        x2 = _mm_loadu_si128((const __m128i *)(buf + 0x10));
        x3 = _mm_loadu_si128((const __m128i *)(buf + 0x20));
        x4 = _mm_loadu_si128((const __m128i *)(buf + 0x30));
        x1 = _mm_xor_si128(x1, _mm_cvtsi32_si128((int)~crc));
        x0 = _mm_load_si128((const __m128i *)k1k2);
        buf += 64;
        len -= 64;
        while (len >= 64) {
            x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
            x6 = _mm_clmulepi64_si128(x2, x0, 0x00);
            x7 = _mm_clmulepi64_si128(x3, x0, 0x00);
            x8 = _mm_clmulepi64_si128(x4, x0, 0x00);
            x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
            x2 = _mm_clmulepi64_si128(x2, x0, 0x11);
            x3 = _mm_clmulepi64_si128(x3, x0, 0x11);
            x4 = _mm_clmulepi64_si128(x4, x0, 0x11);
            y5 = _mm_loadu_si128((const __m128i *)(buf + 0x00));
            y6 = _mm_loadu_si128((const __m128i *)(buf + 0x10));
            y7 = _mm_loadu_si128((const __m128i *)(buf + 0x20));
            y8 = _mm_loadu_si128((const __m128i *)(buf + 0x30));
            x1 = _mm_xor_si128(_mm_xor_si128(x1, x5), y5);
            x2 = _mm_xor_si128(_mm_xor_si128(x2, x6), y6);
            x3 = _mm_xor_si128(_mm_xor_si128(x3, x7), y7);
            x4 = _mm_xor_si128(_mm_xor_si128(x4, x8), y8);
            buf += 64;
            len -= 64;
        }
        /* four lanes into one */
        x0 = _mm_load_si128((const __m128i *)k3k4);
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x3), x5);
        x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
        x1 = _mm_xor_si128(_mm_xor_si128(x1, x4), x5);
        while (len >= 16) {
            x2 = _mm_loadu_si128((const __m128i *)buf);
            x5 = _mm_clmulepi64_si128(x1, x0, 0x00);
            x1 = _mm_clmulepi64_si128(x1, x0, 0x11);
            x1 = _mm_xor_si128(_mm_xor_si128(x1, x2), x5);
            buf += 16;
            len -= 16;
        }
        /* 128 bits to 64 */
        x2 = _mm_clmulepi64_si128(x1, x0, 0x10);
        x3 = _mm_setr_epi32(~0, 0, ~0, 0);
        x1 = _mm_srli_si128(x1, 8);
        x1 = _mm_xor_si128(x1, x2);
        x0 = _mm_loadl_epi64((const __m128i *)k5k0);
        x2 = _mm_srli_si128(x1, 4);
        x1 = _mm_and_si128(x1, x3);
        x1 = _mm_clmulepi64_si128(x1, x0, 0x00);
        x1 = _mm_xor_si128(x1, x2);
        /* Barrett reduction to 32 bits */
        x0 = _mm_load_si128((const __m128i *)poly);
        x2 = _mm_and_si128(x1, x3);
        x2 = _mm_clmulepi64_si128(x2, x0, 0x10);
        x2 = _mm_and_si128(x2, x3);
        x2 = _mm_clmulepi64_si128(x2, x0, 0x00);
        x1 = _mm_xor_si128(x1, x2);
        return ~(uint32_t)_mm_extract_epi32(x1, 1);
    }

    static int rmq_crc32_has_clmul = -1;

    static inline unsigned long rmq_crc32(unsigned long crc, const unsigned char *buf, size_t len)
    {
        size_t chunk;
        if (rmq_crc32_has_clmul < 0)
            rmq_crc32_has_clmul = __builtin_cpu_supports("pclmul") && __builtin_cpu_supports("sse4.1");
        if (rmq_crc32_has_clmul && len >= 64) {
            chunk = len & ~(size_t)15;
            crc = rmq_crc32_fold(buf, chunk, (uint32_t)crc);
            buf += chunk;
            len -= chunk;
        }
        return len ? crc32(crc, buf, (unsigned int)len) : crc;
    }
    #else
    static inline unsigned long rmq_crc32(unsigned long crc, const unsigned char *buf, size_t len)
    {
        return crc32(crc, buf, (unsigned int)len);
    }
    #endif
    """
    unsigned long rmq_crc32(unsigned long crc, const unsigned char* buf, size_t len) nogil

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
            c = rmq_crc32(0, p, <size_t>n)
    else:
        c = rmq_crc32(0, p, <size_t>n)
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
