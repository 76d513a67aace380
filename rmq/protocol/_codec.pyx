# cython: language_level=3, cdivision=True
"""rmq.protocol._codec: the JSON reply-header encoder, the ROCKETMQ binary header decoder and
encoder, the typed-header reader and the SEND reply frame of the remoting layer (the C parts
in _codec.pxd; their pure-Python references in rmq/remoting/codec.py and headers.py)."""
#
#
# Decoding JSON headers is msgspec's job (rmq/remoting/codec.py): a typed msgspec Struct
# decodes the common header shape faster than the hand-written parser that used to live here.
# Encoding stays here because writing a reply header straight into one buffer, with the frame's
# two length words in front, measured faster than orjson and msgspec (figures in bench/
# header_codec_bench.py).
#
# json_header_encode writes a reply header byte for byte as the reference encoder in
# rmq/remoting/codec.py does (fastjson's key order; strings escaped like
# ``json.dumps(ensure_ascii=False)``: ``"`` ``\`` and U+0000..U+001F only, short forms
# \b \t \n \f \r, else \u00xx in lower case hex), or returns None for anything it does not
# handle (non-str keys, non-int code, a str that does not encode to UTF-8 ...) so that the
# reference runs and raises what it raises.

from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE
from cpython.mem cimport PyMem_Malloc, PyMem_Free, PyMem_Realloc
from cpython.object cimport PyObject
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, INT64_MIN
from libc.string cimport memcpy, memcmp, strlen
from rmq.common._bytes cimport ascii_decimal, rd16, rd32, wr16, wr32
from cpython.long cimport PyLong_AsLongLong, PyLong_Check, PyLong_CheckExact
from cpython.dict cimport PyDict_Next, PyDict_CheckExact
from cpython.unicode cimport PyUnicode_Check, PyUnicode_CheckExact
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_CheckExact
from cpython.unicode cimport PyUnicode_AsASCIIString
from cpython.exc cimport PyErr_Clear
from cpython.ref cimport Py_INCREF, Py_DECREF

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object u, Py_ssize_t* size)

# ------------------------------------------------------------------------------ encoding

cdef struct JOut:
    # the output buffer every encoder here writes into: ``n`` bytes used of ``cap`` at ``p``
    char* p
    Py_ssize_t n
    Py_ssize_t cap

cdef int jo_reserve(JOut* o, Py_ssize_t extra) except -1:
    cdef Py_ssize_t cap
    cdef char* q
    if o.n + extra <= o.cap:
        return 0
    cap = o.cap * 2
    if cap < o.n + extra:
        cap = o.n + extra + 256
    q = <char*>PyMem_Realloc(o.p, cap)
    if q == NULL:
        raise MemoryError()
    o.p = q
    o.cap = cap
    return 0


cdef int jo_raw(JOut* o, const char* s, Py_ssize_t n) except -1:
    jo_reserve(o, n)
    memcpy(o.p + o.n, s, n)
    o.n += n
    return 0


cdef int jo_lit(JOut* o, bytes lit) except -1:
    return jo_raw(o, PyBytes_AS_STRING(lit), PyBytes_GET_SIZE(lit))


cdef int jo_i64(JOut* o, int64_t x) except -1:
    """The decimal digits of ``x``."""
    cdef uint64_t u = (~<uint64_t>x) + 1 if x < 0 else <uint64_t>x  # (no signed overflow at INT64_MIN)
    cdef char tmp[24]
    cdef int k = 24
    while True:
        k -= 1
        tmp[k] = <char>(c'0' + u % 10)
        u //= 10
        if u == 0:
            break
    if x < 0:
        k -= 1
        tmp[k] = c'-'
    jo_raw(o, tmp + k, 24 - k)
    return 0


cdef int _jo_int(JOut* o, object v) except -1:
    """Decimal of an int (or int subclass such as an IntEnum); 1 = not handled."""
    cdef long long x
    if not PyLong_Check(v):
        return 1
    try:
        x = PyLong_AsLongLong(v)
    except OverflowError:
        return 1  # the reference writes big ints (then the client refuses them)
    return jo_i64(o, x)


cdef const char* _HEXL = b"0123456789abcdef"


cdef int jo_str(JOut* o, object s) except -1:
    """A JSON string as json.dumps(ensure_ascii=False) writes it, in UTF-8; 1 = not handled
    (not a str, or a lone surrogate that UTF-8 cannot carry)."""
    cdef Py_ssize_t n, i, run
    cdef const char* u
    cdef uint8_t c
    cdef char* w
    if not PyUnicode_Check(s):
        return 1
    u = PyUnicode_AsUTF8AndSize(s, &n)  # no copy for ASCII strs
    if u == NULL:
        PyErr_Clear()
        return 1
    jo_reserve(o, n * 6 + 2)  # worst case: every byte a \u00xx
    w = o.p + o.n
    w[0] = c'"'
    w += 1
    i = 0
    while i < n:
        c = <uint8_t>u[i]
        if c >= 0x20 and c != c'"' and c != c'\\':
            # copy the run of bytes that need no escape in one go
            run = i + 1
            while run < n and <uint8_t>u[run] >= 0x20 and <uint8_t>u[run] != c'"' and <uint8_t>u[run] != c'\\':
                run += 1
            memcpy(w, u + i, run - i)
            w += run - i
            i = run
            continue
        w[0] = c'\\'
        if c == c'"' or c == c'\\':
            w[1] = c
            w += 2
        elif c == c'\b':
            w[1] = c'b'
            w += 2
        elif c == c'\t':
            w[1] = c't'
            w += 2
        elif c == c'\n':
            w[1] = c'n'
            w += 2
        elif c == c'\f':
            w[1] = c'f'
            w += 2
        elif c == c'\r':
            w[1] = c'r'
            w += 2
        else:
            w[1] = c'u'
            w[2] = c'0'
            w[3] = c'0'
            w[4] = _HEXL[c >> 4]
            w[5] = _HEXL[c & 15]
            w += 6
        i += 1
    w[0] = c'"'
    w += 1
    o.n = w - o.p
    return 0


cdef int _jo_ext(JOut* o, object ext) except -1:
    """extFields with every value a string (True/False as true/false, None omitted)."""
    cdef Py_ssize_t pos = 0
    cdef PyObject* kp
    cdef PyObject* vp
    cdef object k, v
    cdef bint first = True
    if not PyDict_CheckExact(ext):
        return 1
    jo_lit(o, b"{")
    while PyDict_Next(ext, &pos, &kp, &vp):
        k = <object>kp
        v = <object>vp
        if v is None:
            continue
        if not PyUnicode_CheckExact(k):
            return 1  # (json.dumps converts int/float/bool keys; the reference does it)
        if not first:
            jo_lit(o, b",")
        first = False
        if jo_str(o, k):
            return 1
        jo_lit(o, b":")
        if v is True:
            jo_lit(o, b'"true"')
        elif v is False:
            jo_lit(o, b'"false"')
        elif PyUnicode_CheckExact(v):
            if jo_str(o, v):
                return 1
        else:
            try:
                v = str(v)  # as the reference does for ints, floats, enums ...
            except Exception:
                return 1  # the reference raises it
            if jo_str(o, v):
                return 1
    jo_lit(o, b"}")
    return 0


cdef int _jo_header(JOut* o, object code, object ext, object flag, object language,
                    object opaque, object remark, object version) except -1:
    # {"code":C,"extFields":{…},"flag":F,"language":"L","opaque":O[,"remark":"R"],
    #  "serializeTypeCurrentRPC":"JSON","version":V}      (fastjson's sorted key order)
    jo_lit(o, b'{"code":')
    if _jo_int(o, code):
        return 1
    jo_lit(o, b',"extFields":')
    if not ext:
        jo_lit(o, b"{}")
    elif _jo_ext(o, ext):
        return 1
    jo_lit(o, b',"flag":')
    if _jo_int(o, flag):
        return 1
    jo_lit(o, b',"language":')
    if not PyUnicode_CheckExact(language) or jo_str(o, language):
        return 1
    jo_lit(o, b',"opaque":')
    if _jo_int(o, opaque):
        return 1
    if remark is not None:
        jo_lit(o, b',"remark":')
        if not PyUnicode_CheckExact(remark) or jo_str(o, remark):
            return 1
    jo_lit(o, b',"serializeTypeCurrentRPC":"JSON","version":')
    if _jo_int(o, version):
        return 1
    jo_lit(o, b"}")
    return 0


def json_header_encode(code, ext, flag, language, opaque, remark, version, Py_ssize_t body_len=-1):
    """The JSON header of a command, byte for byte as rmq/remoting/codec.py's reference
    encoder writes it, or None when an argument is outside what this fast path handles
    (the caller then runs the reference, which encodes it or raises).

    With ``body_len >= 0`` the frame's two leading words come first (length =
    4 + header length + body_len, then ser_type 0 and the header length)."""
    cdef JOut o
    cdef Py_ssize_t off = 8 if body_len >= 0 else 0, hlen
    o.cap = 512
    o.n = off
    o.p = <char*>PyMem_Malloc(o.cap)
    if o.p == NULL:
        raise MemoryError()
    try:
        if _jo_header(&o, code, ext, flag, language, opaque, remark, version):
            return None
        hlen = o.n - off
        if hlen > 0xFFFFFF or (off and 4 + hlen + body_len > 0x7FFFFFFF):
            return None  # the reference raises for these
        if off:
            wr32(<uint8_t*>o.p, 4 + hlen + body_len)
            wr32(<uint8_t*>o.p + 4, hlen)
        return PyBytes_FromStringAndSize(o.p, o.n)
    finally:
        PyMem_Free(o.p)


# ------------------------------------------------------------------------------ typed headers
#
# HeaderReader is the fast twin of the from_ext_fields functions that rmq/protocol/headers/
# generates: it fills a header's slots straight from the extFields dict for the values clients
# really send (the exact type, or a decimal string for an int, "true"/"false" for a bool, null
# or absent for an optional field) and hands any other input -- a missing required field, a
# value needing the lenient rules, an error -- to the generated reader, which is the reference.
# It also checks what the reference checks, so that nothing else runs after it on the common
# path: an int outside its declared range (Java's Integer / Long, or narrower) and text with a
# lone surrogate (not UTF-8) go to the reference, which raises the RemotingCommandError.

cdef extern from "Python.h":
    object PyLong_FromUnicodeObject(object u, int base)
    PyObject* PyDict_GetItemWithError(object d, object key) except? NULL
    long long PyLong_AsLongLongAndOverflow(object o, int* overflow) except? -1
    bint PyUnicode_IS_ASCII(object o)
    int PyUnicode_KIND(object o)
    void* PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)


cdef bint has_surrogate(object s) except -1:
    """True when ``s`` (an exact str) holds a surrogate code point: in a Python str any
    surrogate is a lone one, which UTF-8 cannot carry."""
    cdef int kind
    cdef Py_ssize_t i, n
    cdef uint32_t c
    cdef void* data
    if PyUnicode_IS_ASCII(s):
        return False
    kind = PyUnicode_KIND(s)
    if kind == 1:
        return False
    data = PyUnicode_DATA(s)
    n = PyUnicode_GET_LENGTH(s)
    if kind == 2:
        for i in range(n):
            c = (<uint16_t*>data)[i]
            if 0xD800 <= c <= 0xDFFF:
                return True
    else:
        for i in range(n):
            c = (<uint32_t*>data)[i]
            if 0xD800 <= c <= 0xDFFF:
                return True
    return False

cdef bint str_decimal(object s, long long* out) noexcept:
    """True with ``out`` set when the exact str ``s`` is ``-?[0-9]{1,18}`` (int(s) gives the
    same value; 18 digits cannot overflow int64); False for anything else (left to int())."""
    if not PyUnicode_IS_ASCII(s):
        return False
    return ascii_decimal(<const uint8_t*>PyUnicode_DATA(s), PyUnicode_GET_LENGTH(s), out)


from sys import intern as _sys_intern
_object_new = object.__new__



cdef class HeaderReader:
    """``reader(cls, ext)`` → a ``cls`` instance, like the generated ``from_ext_fields``.

    Args:
        fields: ``[(attribute, wire name, kind, required, default, lo, hi)]`` with kind 0 str,
            1 int, 2 bool; ``lo``/``hi`` the inclusive range of an int (within int64).
        fallback: the reference reader ``fallback(cls, ext)``, called for anything else
            (including a value it refuses, so the error is worded in one place).
    """
    cdef tuple attrs, wires, defaults
    cdef bytes kinds, required
    cdef readonly object fallback
    cdef Py_ssize_t n
    cdef int64_t* lo
    cdef int64_t* hi
    checks_ranges = True  # headers.py refuses a build without the checks (an older extension)

    def __cinit__(self):
        self.lo = NULL
        self.hi = NULL

    def __dealloc__(self):
        PyMem_Free(self.lo)
        PyMem_Free(self.hi)

    def __init__(self, fields, fallback):
        cdef Py_ssize_t i
        fields = list(fields)
        self.n = len(fields)
        PyMem_Free(self.lo)
        PyMem_Free(self.hi)
        self.lo = <int64_t*>PyMem_Malloc(max(self.n, 1) * sizeof(int64_t))
        self.hi = <int64_t*>PyMem_Malloc(max(self.n, 1) * sizeof(int64_t))
        if self.lo == NULL or self.hi == NULL:
            raise MemoryError()
        for i in range(self.n):
            self.lo[i] = fields[i][5]  # OverflowError for a range past int64
            self.hi[i] = fields[i][6]
        self.attrs = tuple(_sys_intern(f[0]) for f in fields)
        self.wires = tuple(_sys_intern(f[1]) for f in fields)
        self.kinds = bytes(int(f[2]) for f in fields)
        self.required = bytes(1 if f[3] else 0 for f in fields)
        self.defaults = tuple(f[4] for f in fields)
        self.fallback = fallback

    def __call__(self, cls, ext):
        cdef Py_ssize_t i
        cdef PyObject* vp
        cdef object v, o
        cdef uint8_t kind
        cdef int overflow
        cdef long long x
        if not PyDict_CheckExact(ext):
            return self.fallback(cls, ext)
        o = _object_new(cls)
        for i in range(self.n):
            vp = PyDict_GetItemWithError(ext, self.wires[i])
            kind = self.kinds[i]
            if vp == NULL or <object>vp is None:
                if self.required[i]:
                    return self.fallback(cls, ext)  # it names the missing field
                v = self.defaults[i]
            else:
                v = <object>vp
                if kind == H_STR:
                    if not PyUnicode_CheckExact(v) or has_surrogate(v):
                        return self.fallback(cls, ext)
                elif kind == H_INT:
                    if not PyLong_CheckExact(v):
                        if not PyUnicode_CheckExact(v):
                            return self.fallback(cls, ext)
                        if str_decimal(v, &x):
                            # the common shape, "-?[0-9]{1,18}", read without an int() call
                            if x < self.lo[i] or x > self.hi[i]:
                                return self.fallback(cls, ext)  # it words the range error
                            setattr(o, self.attrs[i], x)
                            continue
                        try:
                            v = PyLong_FromUnicodeObject(v, 10)  # = int(v), what the reference does
                        except ValueError:
                            return self.fallback(cls, ext)
                    x = PyLong_AsLongLongAndOverflow(v, &overflow)
                    if overflow or x < self.lo[i] or x > self.hi[i]:
                        return self.fallback(cls, ext)  # it words the range error
                else:
                    if v is not True and v is not False:
                        if PyUnicode_CheckExact(v) and v == "false":
                            v = False
                        elif PyUnicode_CheckExact(v) and v == "true":
                            v = True
                        else:
                            return self.fallback(cls, ext)
            setattr(o, self.attrs[i], v)
        return o



# ------------------------------------------------------------------------------ ROCKETMQ binary
#
# The ROCKETMQ binary header (Java RocketMQSerializable): code int16, language int8, version
# int16, opaque int32, flag int32, remark (int32 length + UTF-8), extFields (int32 length, then
# entries of int16 key length + key + int32 value length + value). A zero length is null.
#
# binary_header_decode and binary_header_encode are the fast twins of the pure-Python
# reference in rmq/remoting/codec.py (decode_binary_header / _encode_binary_header). Like the
# JSON encoder above they return None for anything they do not take -- a length that points
# outside the header, text that is not UTF-8, a value out of range -- so that the reference
# runs and raises (or writes) what it does: one wording of every error, and a differential
# test keeps the two equal.

cdef extern from "Python.h":
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)

_EMPTY_STR = ""


cdef inline object _utf8(const uint8_t* p, Py_ssize_t n):
    """``p[:n]`` decoded as strict UTF-8 (UnicodeDecodeError otherwise)."""
    return PyUnicode_DecodeUTF8(<const char*>p, n, NULL)


def binary_header_decode(buf, Py_ssize_t start, Py_ssize_t header_len, cmd_cls, tuple lang_names):
    """A ROCKETMQ binary header ``buf[start:start+header_len]`` as a new ``cmd_cls`` (slots
    set as rmq/remoting/codec.py's reference sets them, ``serialize_type`` 1, ``body`` None),
    or None when the header is malformed or the span lies outside ``buf`` (the reference then
    raises its error). ``lang_names[b]`` names the language byte ``b`` (0..255)."""
    cdef Py_buffer view
    PyObject_GetBuffer(buf, &view, PyBUF_SIMPLE)
    try:
        return _binary_header_decode(<const uint8_t*>view.buf, view.len, start, header_len, cmd_cls, lang_names)
    finally:
        PyBuffer_Release(&view)


cdef object _binary_header_decode(const uint8_t* bptr, Py_ssize_t bsize, Py_ssize_t start, Py_ssize_t header_len,
                                  cmd_cls, tuple lang_names):
    cdef const uint8_t* p
    cdef Py_ssize_t pos, end, ext_end
    cdef int32_t remark_len, ext_len
    cdef Py_ssize_t klen, vlen
    cdef const uint8_t* kp
    cdef const uint8_t* vp
    cdef object remark, key, val, cmd
    cdef dict ext
    if start < 0 or header_len < 21 or start > bsize or header_len > bsize - start:
        return None
    if len(lang_names) != 256:
        raise ValueError("lang_names must have 256 entries")
    p = bptr + start
    end = header_len
    remark_len = rd32(p + 13)
    pos = 17
    if remark_len < 0 or remark_len > end - pos:
        return None
    remark = None
    try:
        if remark_len > 0:
            remark = _utf8(p + pos, remark_len)
        pos += remark_len
        if end - pos < 4:
            return None
        ext_len = rd32(p + pos)
        pos += 4
        if ext_len < 0 or ext_len > end - pos:
            return None
        ext = {}
        ext_end = pos + ext_len
        while pos < ext_end:
            if not map_entry(p, &pos, ext_end, &kp, &klen, &vp, &vlen):
                return None
            key = _utf8(kp, klen) if klen > 0 else None
            # Java reads a zero-length value as null; an empty string is the useful reading.
            val = _utf8(vp, vlen) if vlen > 0 else _EMPTY_STR
            if key is not None:
                ext[key] = val
    except UnicodeDecodeError:
        return None
    cmd = _object_new(cmd_cls)
    cmd.code = rd16(p)
    cmd.language = lang_names[p[2]]
    cmd.version = rd16(p + 3)
    cmd.opaque = rd32(p + 5)
    cmd.flag = rd32(p + 9)
    cmd.remark = remark
    cmd.ext_fields = ext
    cmd.body = None
    cmd.serialize_type = 1
    return cmd


cdef int bo_utf8(JOut* o, object s, Py_ssize_t len_bytes) except -1:
    """Append ``s`` (an exact str) as its length (int16 or int32 by ``len_bytes``) and UTF-8
    bytes; 1 = not handled (a lone surrogate, or too long for an int16 key length)."""
    cdef Py_ssize_t n
    cdef const char* u = PyUnicode_AsUTF8AndSize(s, &n)
    if u == NULL:
        PyErr_Clear()
        return 1
    if len_bytes == 2 and n > 32767:
        return 1
    jo_reserve(o, n + len_bytes)
    if len_bytes == 2:
        wr16(<uint8_t*>o.p + o.n, <int>n)
    else:
        wr32(<uint8_t*>o.p + o.n, n)
    o.n += len_bytes
    memcpy(o.p + o.n, u, n)
    o.n += n
    return 0


cdef int _bo_int(object v, int64_t lo, int64_t hi, int64_t* out) except -1:
    """``v`` as an int within ``lo..hi``; 1 = not handled (not an int, or out of range)."""
    cdef int overflow = 0
    cdef long long x
    if not PyLong_Check(v):
        return 1
    x = PyLong_AsLongLongAndOverflow(v, &overflow)
    if overflow or x < lo or x > hi:
        return 1
    out[0] = x
    return 0


def binary_header_encode(code, ext, flag, int language, opaque, remark, version,
                         Py_ssize_t body_len=-1):
    """The ROCKETMQ binary header of a command, byte for byte as the reference encoder in
    rmq/remoting/codec.py writes it (extFields in dict order, every value a string: True/False
    as true/false, None left out, anything else through ``str``), or None when an argument is
    outside what this path takes (the reference then encodes it or raises).

    ``language`` is the language byte. With ``body_len >= 0`` the frame's two leading words
    come first (length = 4 + header length + body_len, then serialize type 1 and the header
    length)."""
    cdef JOut o
    cdef Py_ssize_t off = 8 if body_len >= 0 else 0, hlen, ext_at, pos = 0
    cdef int64_t c16, ver, opq, flg
    cdef PyObject* kp
    cdef PyObject* vp
    cdef object k, v
    if _bo_int(code, -32768, 32767, &c16) or _bo_int(version, -32768, 32767, &ver) \
            or _bo_int(opaque, -2147483648, 2147483647, &opq) or _bo_int(flag, -2147483648, 2147483647, &flg):
        return None
    if language < -128 or language > 127:
        return None
    if remark is not None and not PyUnicode_CheckExact(remark):
        return None
    if ext is not None and not PyDict_CheckExact(ext):
        return None
    o.cap = 256
    o.n = off
    o.p = <char*>PyMem_Malloc(o.cap)
    if o.p == NULL:
        raise MemoryError()
    try:
        jo_reserve(&o, 17)
        wr16(<uint8_t*>o.p + o.n, <int>c16)
        o.p[o.n + 2] = <char>language
        wr16(<uint8_t*>o.p + o.n + 3, <int>ver)
        wr32(<uint8_t*>o.p + o.n + 5, opq)
        wr32(<uint8_t*>o.p + o.n + 9, flg)
        o.n += 13
        if remark:  # (an empty remark is written as null, as the reference does)
            if bo_utf8(&o, remark, 4):
                return None
        else:
            jo_raw(&o, b"\0\0\0\0", 4)
        ext_at = o.n
        jo_raw(&o, b"\0\0\0\0", 4)
        if ext:
            while PyDict_Next(ext, &pos, &kp, &vp):
                k = <object>kp
                v = <object>vp
                if v is None:
                    continue
                if not PyUnicode_CheckExact(k):
                    return None
                if v is True:
                    v = "true"
                elif v is False:
                    v = "false"
                elif not PyUnicode_CheckExact(v):
                    try:
                        v = str(v)
                    except Exception:
                        return None  # the reference raises it
                    if not PyUnicode_CheckExact(v):
                        return None
                if bo_utf8(&o, k, 2) or bo_utf8(&o, v, 4):
                    return None
        wr32(<uint8_t*>o.p + ext_at, o.n - ext_at - 4)
        hlen = o.n - off
        if hlen > 0xFFFFFF or (off and 4 + hlen + body_len > 0x7FFFFFFF):
            return None  # the reference raises for these
        if off:
            wr32(<uint8_t*>o.p, 4 + hlen + body_len)
            wr32(<uint8_t*>o.p + 4, (1 << 24) | hlen)
        return PyBytes_FromStringAndSize(o.p, o.n)
    finally:
        PyMem_Free(o.p)


# ------------------------------------------------------------------------------ SEND reply
#
# The reply to a stored SEND (Java SendMessageProcessor: SendMessageResponseHeader msgId,
# queueId, queueOffset, then the TRACE_ON and MSG_REGION fields the Java broker adds, in the
# order its binary replies carry them) written straight into one frame, in the request's
# serialization, without the extFields dict, the response command or the generic encoder. The
# bytes are those the generic encoder writes for the same command (a differential test).

cdef int bo_dec(JOut* o, int64_t x) except -1:
    """A decimal string value of the binary form: int32 length, then the digits."""
    cdef Py_ssize_t at
    jo_reserve(o, 4)
    at = o.n
    o.n += 4
    jo_i64(o, x)
    wr32(<uint8_t*>o.p + at, o.n - at - 4)
    return 0


cdef int bo_key(JOut* o, bytes key) except -1:
    jo_reserve(o, 2)
    wr16(<uint8_t*>o.p + o.n, <int>PyBytes_GET_SIZE(key))
    o.n += 2
    jo_lit(o, key)
    return 0


# Most of a SEND reply's bytes are the same for every reply of a broker: all but the msgId, the
# queueId, the queueOffset and the opaque (and, in the binary form, the lengths in front of
# them). Those constant pieces are written once per (serialize type, code, trace switch,
# region) into a template and kept in a handful of slots; a reply is then one bytes object
# allocated at its final size, filled by copying the pieces and writing the four values:
#
#   JSON      | len | hl | HEAD | msgId | QID | queueId | QOFF | queueOffset | TAIL | opaque | END |
#     HEAD  {"code":C,"extFields":{"msgId":"                          (per code)
#     QID   ","queueId":"
#     QOFF  ","queueOffset":"
#     TAIL  ","TRACE_ON":"true","MSG_REGION":"R"},"flag":1,"language":"JAVA","opaque":
#           (per trace switch and region: "false" when off, R escaped as jo_str escapes it)
#     END   ,"serializeTypeCurrentRPC":"JSON","version":409}
#
#   ROCKETMQ  | len | 1<<24|hl | HEAD | mlen i32 | msgId | QID | qlen i32 | queueId
#             | QOFF | olen i32 | queueOffset | TAIL |
#     HEAD  code i16 | lang 0 (JAVA) | version 409 i16 | opaque i32 | flag 1 i32 | remark 0 i32
#           | E i32 | 00 05 "msgId"                 (28 bytes per code; opaque and E, the
#                                                    extFields map's length, per reply)
#     QID   00 07 "queueId"
#     QOFF  00 0b "queueOffset"
#     TAIL  00 08 "TRACE_ON" | 00 00 00 04 "true" (or 5 "false") | 00 0a "MSG_REGION"
#           | rlen i32 | region (UTF-8)              (per trace switch and region)

cdef struct ReplyTpl:
    # one template: HEAD and TAIL of the drawing above, in one PyMem block at ``head``
    int ser
    int code
    int trace
    PyObject* region      # an owned reference, compared by identity first; NULL: a free slot
    char* head
    Py_ssize_t hlen
    char* tail
    Py_ssize_t tlen

cdef enum:
    _TPL_SLOTS = 8        # (a broker uses one or two: its region, JSON and binary, SUCCESS)

cdef ReplyTpl _tpl[_TPL_SLOTS]
cdef int _tpl_next = 0

# the pieces every template shares, copied with their lengths known when compiled (in line)
cdef const char* _SR_QID = b'","queueId":"'
cdef const char* _SR_QOFF = b'","queueOffset":"'
cdef const char* _SR_END = b',"serializeTypeCurrentRPC":"JSON","version":409}'
cdef enum:
    _SR_QID_LEN = 13
    _SR_QOFF_LEN = 17
    _SR_END_LEN = 48
cdef const char* _SR_BQID = b"\0\7queueId"
cdef const char* _SR_BQOFF = b"\0\x0bqueueOffset"

# two decimal digits of 0..99 at [2 * x]
cdef const char* _DIG2 = (b"0001020304050607080910111213141516171819202122232425262728293031323334353637383940414243444546474849"
                          b"5051525354555657585960616263646566676869707172737475767778798081828384858687888990919293949596979899")


cdef inline Py_ssize_t _dec(char* end, int64_t x) noexcept nogil:
    """The decimal digits of ``x`` written to the bytes before ``end`` (at most 20); their count."""
    cdef uint64_t u = (~<uint64_t>x) + 1 if x < 0 else <uint64_t>x  # (no signed overflow at INT64_MIN)
    cdef uint64_t r
    cdef char* q = end
    while u >= 100:
        r = u % 100
        u //= 100
        q -= 2
        memcpy(q, _DIG2 + 2 * r, 2)
    if u >= 10:
        q -= 2
        memcpy(q, _DIG2 + 2 * u, 2)
    else:
        q -= 1
        q[0] = <char>(c'0' + u)
    if x < 0:
        q -= 1
        q[0] = c'-'
    return end - q


cdef int _reply_tpl(int ser, int code, bint trace, object region) except -2:
    """The slot of the template for these settings, written into a slot (the oldest one's,
    round robin) when none holds it yet; -1 when the region is not a str UTF-8 can carry."""
    global _tpl_next
    cdef int k
    cdef ReplyTpl* t
    cdef JOut o
    cdef Py_ssize_t hlen
    for k in range(_TPL_SLOTS):
        t = &_tpl[k]
        if t.region == <PyObject*>region and t.ser == ser and t.code == code and t.trace == trace:
            return k
    for k in range(_TPL_SLOTS):  # an equal region in another str object (str == runs no user code)
        t = &_tpl[k]
        if t.region != NULL and t.ser == ser and t.code == code and t.trace == trace \
                and <object>t.region == region:
            return k
    o.cap = 128
    o.n = 0
    o.p = <char*>PyMem_Malloc(o.cap)
    if o.p == NULL:
        raise MemoryError()
    try:
        if ser == 1:
            jo_reserve(&o, 21)
            wr16(<uint8_t*>o.p, code)
            o.p[2] = 0                       # LanguageCode.JAVA
            wr16(<uint8_t*>o.p + 3, 409)     # version V4_9_8
            wr32(<uint8_t*>o.p + 5, 0)       # opaque (per reply)
            wr32(<uint8_t*>o.p + 9, 1)       # flag: response
            wr32(<uint8_t*>o.p + 13, 0)      # remark: null
            wr32(<uint8_t*>o.p + 17, 0)      # the map's length (per reply)
            o.n = 21
            bo_key(&o, b"msgId")
            hlen = o.n
            bo_key(&o, b"TRACE_ON")
            if trace:
                jo_raw(&o, b"\0\0\0\4true", 8)
            else:
                jo_raw(&o, b"\0\0\0\5false", 9)
            bo_key(&o, b"MSG_REGION")
            if bo_utf8(&o, region, 4):
                PyMem_Free(o.p)
                return -1
        else:
            jo_lit(&o, b'{"code":')
            jo_i64(&o, code)
            jo_lit(&o, b',"extFields":{"msgId":"')
            hlen = o.n
            jo_lit(&o, b'","TRACE_ON":"true","MSG_REGION":' if trace else b'","TRACE_ON":"false","MSG_REGION":')
            if jo_str(&o, region):
                PyMem_Free(o.p)
                return -1
            jo_lit(&o, b'},"flag":1,"language":"JAVA","opaque":')
    except BaseException:
        PyMem_Free(o.p)
        raise
    k = _tpl_next
    _tpl_next = (k + 1) % _TPL_SLOTS
    t = &_tpl[k]
    if t.region != NULL:
        PyMem_Free(t.head)
        Py_DECREF(<object>t.region)
    Py_INCREF(region)
    t.region = <PyObject*>region
    t.ser = ser
    t.code = code
    t.trace = trace
    t.head = o.p
    t.hlen = hlen
    t.tail = o.p + hlen
    t.tlen = o.n - hlen
    return k


cdef object send_reply(int serialize_type, int code, int32_t opaque, object msg_id, const char* mid,
                       Py_ssize_t mlen, int64_t queue_id, int64_t queue_offset, object region,
                       bint trace_on):
    """The one SEND reply writer (``send_reply_frame`` for Python, the broker's fast path by
    cimport), from the kept template of its settings (above). The msgId is ``msg_id`` (a str,
    escaped as any text) or, when ``msg_id`` is None, the ``mlen`` bytes at ``mid``: ASCII that
    needs no escape (the fast path's hex offsetMsgId, written without making a str). None when
    ``serialize_type`` is not 0/1, ``code`` not an int16, or a text not a str that UTF-8 can
    carry."""
    cdef char qd[24]
    cdef char od[24]
    cdef char pd[24]
    cdef Py_ssize_t ql, ol, pl, total
    cdef int k
    cdef ReplyTpl* t
    cdef JOut esc
    cdef char* w
    cdef object frame
    if (serialize_type != 0 and serialize_type != 1) or code < -32768 or code > 32767 \
            or not PyUnicode_CheckExact(region):
        return None
    if msg_id is not None and not PyUnicode_CheckExact(msg_id):
        return None
    k = _reply_tpl(serialize_type, code, trace_on, region)
    if k < 0:
        return None
    t = &_tpl[k]
    esc.p = NULL
    if msg_id is not None:
        if serialize_type == 1:
            mid = PyUnicode_AsUTF8AndSize(msg_id, &mlen)  # (no copy)
            if mid == NULL:
                PyErr_Clear()
                return None
        else:
            esc.cap = 64
            esc.n = 0
            esc.p = <char*>PyMem_Malloc(esc.cap)
            if esc.p == NULL:
                raise MemoryError()
    try:
        if esc.p != NULL:
            if jo_str(&esc, msg_id):
                return None
            mid = esc.p + 1                  # (without jo_str's quotes: HEAD and QID have them)
            mlen = esc.n - 2
        ql = _dec(qd + 24, queue_id)
        ol = _dec(od + 24, queue_offset)
        if serialize_type == 1:
            total = 8 + t.hlen + 4 + mlen + 9 + 4 + ql + 13 + 4 + ol + t.tlen
            frame = PyBytes_FromStringAndSize(NULL, total)
            w = PyBytes_AS_STRING(frame)
            wr32(<uint8_t*>w, total - 4)
            wr32(<uint8_t*>w + 4, (1 << 24) | (total - 8))
            memcpy(w + 8, t.head, t.hlen)
            wr32(<uint8_t*>w + 13, opaque)
            wr32(<uint8_t*>w + 25, total - 29)   # the map: everything after its length word
            w += 8 + t.hlen
            wr32(<uint8_t*>w, mlen)
            memcpy(w + 4, mid, mlen)
            w += 4 + mlen
            memcpy(w, _SR_BQID, 9)
            wr32(<uint8_t*>w + 9, ql)
            memcpy(w + 13, qd + 24 - ql, ql)
            w += 13 + ql
            memcpy(w, _SR_BQOFF, 13)
            wr32(<uint8_t*>w + 13, ol)
            memcpy(w + 17, od + 24 - ol, ol)
            w += 17 + ol
            memcpy(w, t.tail, t.tlen)
        else:
            pl = _dec(pd + 24, opaque)
            total = 8 + t.hlen + mlen + _SR_QID_LEN + ql + _SR_QOFF_LEN + ol + t.tlen + pl + _SR_END_LEN
            frame = PyBytes_FromStringAndSize(NULL, total)
            w = PyBytes_AS_STRING(frame)
            wr32(<uint8_t*>w, total - 4)
            wr32(<uint8_t*>w + 4, total - 8)
            w += 8
            memcpy(w, t.head, t.hlen)
            w += t.hlen
            memcpy(w, mid, mlen)
            w += mlen
            memcpy(w, _SR_QID, _SR_QID_LEN)
            w += _SR_QID_LEN
            memcpy(w, qd + 24 - ql, ql)
            w += ql
            memcpy(w, _SR_QOFF, _SR_QOFF_LEN)
            w += _SR_QOFF_LEN
            memcpy(w, od + 24 - ol, ol)
            w += ol
            memcpy(w, t.tail, t.tlen)
            w += t.tlen
            memcpy(w, pd + 24 - pl, pl)
            w += pl
            memcpy(w, _SR_END, _SR_END_LEN)
        return frame
    finally:
        if esc.p != NULL:
            PyMem_Free(esc.p)


def send_reply_frame(int serialize_type, int code, int32_t opaque, msg_id, int64_t queue_id,
                     int64_t queue_offset, region, bint trace_on):
    """The frame (length words and header, no body) of a SEND reply with code ``code``
    (SUCCESS or a flush/slave status), flag 1, language JAVA, version 409 and extFields
    ``{"msgId", "queueId", "queueOffset", "TRACE_ON", "MSG_REGION"}``, every value a string;
    ``serialize_type`` 0 JSON, 1 ROCKETMQ. None when a text is not a str that UTF-8 can carry
    (the caller then builds the reply the general way). Python's door to ``send_reply``."""
    if not PyUnicode_CheckExact(msg_id):
        return None
    return send_reply(serialize_type, code, opaque, msg_id, NULL, 0, queue_id, queue_offset, region, trace_on)



# ------------------------------------------------------------------------------ PULL reply
#
# The reply to a pull (Java PullMessageProcessor: PullMessageResponseHeader nextBeginOffset,
# minOffset, maxOffset, suggestWhichBrokerId, in the order rmq.broker.processors.pull puts them
# in its dict; the remark the GetMessageStatus name) and its body (the records) written into one
# frame, in the request's serialization. The bytes are those the generic encoder writes for the
# same command, body appended (tests/remoting/test_pull_reply.py):
#
#   ROCKETMQ: | len | 1<<24|hl | code i16 | lang 0 | ver 409 i16 | opaque | flag 1 | R | remark |
#             | E | ("nextBeginOffset", dec) ("minOffset", dec) ("maxOffset", dec)
#             |   ("suggestWhichBrokerId", dec) | body |
#   JSON:     | len | hl | {"code":C,"extFields":{"nextBeginOffset":"N","minOffset":"N",
#             "maxOffset":"N","suggestWhichBrokerId":"N"},"flag":1,"language":"JAVA",
#             "opaque":O,"remark":"STATUS","serializeTypeCurrentRPC":"JSON","version":409} | body |

cdef object pull_reply(int serialize_type, int code, int32_t opaque, const char* remark, Py_ssize_t rlen,
                       int64_t next_begin, int64_t min_offset, int64_t max_offset, int64_t suggest,
                       const char* body, Py_ssize_t blen):
    """The one PULL reply writer (``pull_reply_frame`` for Python, the broker's native pull path
    by cimport). ``remark`` is ``rlen`` bytes of ASCII that needs no JSON escape (a status
    name), or NULL for none; ``body`` ``blen`` bytes (0: none), or, when ``body`` is NULL and
    ``blen`` > 0, not copied: the header frame alone is returned, its length word counting the
    ``blen`` bytes the caller writes after it. None when
    ``serialize_type`` is not 0/1 or ``code`` not an int16."""
    cdef JOut o
    cdef Py_ssize_t ext_at
    cdef object frame
    if (serialize_type != 0 and serialize_type != 1) or code < -32768 or code > 32767 or blen < 0:
        return None
    o.cap = 256 + rlen
    o.n = 8
    o.p = <char*>PyMem_Malloc(o.cap)
    if o.p == NULL:
        raise MemoryError()
    try:
        if serialize_type == 1:
            jo_reserve(&o, 21 + rlen)
            wr16(<uint8_t*>o.p + 8, code)
            o.p[10] = 0                      # LanguageCode.JAVA
            wr16(<uint8_t*>o.p + 11, 409)    # version V4_9_8
            wr32(<uint8_t*>o.p + 13, opaque)
            wr32(<uint8_t*>o.p + 17, 1)      # flag: response
            o.n = 21
            if remark != NULL and rlen > 0:  # (an empty remark is written as null)
                wr32(<uint8_t*>o.p + 21, rlen)
                o.n = 25
                jo_raw(&o, remark, rlen)
            else:
                wr32(<uint8_t*>o.p + 21, 0)
                o.n = 25
            ext_at = o.n
            jo_raw(&o, b"\0\0\0\0", 4)
            bo_key(&o, b"nextBeginOffset")
            bo_dec(&o, next_begin)
            bo_key(&o, b"minOffset")
            bo_dec(&o, min_offset)
            bo_key(&o, b"maxOffset")
            bo_dec(&o, max_offset)
            bo_key(&o, b"suggestWhichBrokerId")
            bo_dec(&o, suggest)
            wr32(<uint8_t*>o.p + ext_at, o.n - ext_at - 4)
        else:
            jo_lit(&o, b'{"code":')
            jo_i64(&o, code)
            jo_lit(&o, b',"extFields":{"nextBeginOffset":"')
            jo_i64(&o, next_begin)
            jo_lit(&o, b'","minOffset":"')
            jo_i64(&o, min_offset)
            jo_lit(&o, b'","maxOffset":"')
            jo_i64(&o, max_offset)
            jo_lit(&o, b'","suggestWhichBrokerId":"')
            jo_i64(&o, suggest)
            jo_lit(&o, b'"},"flag":1,"language":"JAVA","opaque":')
            jo_i64(&o, opaque)
            if remark != NULL and rlen > 0:
                jo_lit(&o, b',"remark":"')
                jo_raw(&o, remark, rlen)
                jo_lit(&o, b'","serializeTypeCurrentRPC":"JSON","version":409}')
            else:
                jo_lit(&o, b',"serializeTypeCurrentRPC":"JSON","version":409}')
        wr32(<uint8_t*>o.p, o.n - 4 + blen)
        wr32(<uint8_t*>o.p + 4, (serialize_type << 24) | (o.n - 8))
        if body == NULL:                     # the header frame alone, its body sent after it
            return PyBytes_FromStringAndSize(o.p, o.n)
        # the header and the records in one bytes: one buffer for the transport's write
        frame = PyBytes_FromStringAndSize(NULL, o.n + blen)
        memcpy(PyBytes_AS_STRING(frame), o.p, o.n)
        memcpy(PyBytes_AS_STRING(frame) + o.n, body, blen)
        return frame
    finally:
        PyMem_Free(o.p)


def pull_reply_frame(int serialize_type, int code, int32_t opaque, remark, int64_t next_begin,
                     int64_t min_offset, int64_t max_offset, int64_t suggest, body=None):
    """The whole frame of a PULL reply: code ``code``, flag 1, language JAVA, version 409,
    remark ``remark`` (an ASCII str needing no JSON escape, e.g. a GetMessageStatus name, or
    None), extFields ``{"nextBeginOffset", "minOffset", "maxOffset", "suggestWhichBrokerId"}``
    (decimal strings) and ``body`` (bytes or None, default None) after the header;
    ``serialize_type`` 0 JSON, 1 ROCKETMQ. None when the remark is not such a str (the caller
    then builds the reply the general way). Python's door to ``pull_reply``."""
    cdef bytes r = None
    cdef Py_ssize_t i
    cdef const char* rp
    if remark is not None:
        if not PyUnicode_CheckExact(remark) or not PyUnicode_IS_ASCII(remark):
            return None
        r = PyUnicode_AsASCIIString(remark)
        rp = PyBytes_AS_STRING(r)
        for i in range(PyBytes_GET_SIZE(r)):
            if rp[i] < 0x20 or rp[i] == c'"' or rp[i] == c'\\':
                return None
    if body is not None and not PyBytes_CheckExact(body):
        return None
    return pull_reply(serialize_type, code, opaque, NULL if r is None else PyBytes_AS_STRING(r),
                      0 if r is None else PyBytes_GET_SIZE(r), next_begin, min_offset, max_offset, suggest,
                      NULL if body is None else PyBytes_AS_STRING(body),
                      0 if body is None else PyBytes_GET_SIZE(body))


# ------------------------------------------------------------------------------ JSON header scan
#
# json_header_scan reads a JSON request header straight from its bytes into C values and its
# extFields into a ROCKETMQ-form map (keyLen i16 | key | valLen i32 | value)*, which the
# binary header's readers take as they are (the SEND fast path's _read_map): no dict, no str
# per field. It takes only the shape the Java, C++ and ali-ons clients write (fastjson:
#
#   {"code":310,"extFields":{"a":"...",...},"flag":0,"language":"JAVA","opaque":7,
#    "serializeTypeCurrentRPC":"JSON","version":395}
#
# in any key order, with JSON whitespace): the eight RemotingCommand fields at most once each,
# integers for code/flag/opaque/version (at most 18 digits, no fraction or exponent), strings
# for language, strings or null for remark and serializeTypeCurrentRPC, an object of string
# values for extFields; strings of ASCII with JSON's escapes (\uXXXX below U+0080 only), no
# raw control character. Anything else -- a byte >= 0x80, a number or null in extFields, an
# unknown key, malformed JSON, text after the object -- returns -1, and the caller hands the
# header to the general decoder (msgspec, then the reference), which accepts or refuses it as
# it always did: what this scan takes, msgspec decodes to the same values (a hypothesis test
# compares them, tests/remoting/test_json_header_scan.py).

# A JSON string read in one pass (rmq_js_string): its plain bytes (0x20..0x7F but '"' and
# '\\') 16 at a time with SSE2 (every x86-64 CPU has it), each block stored to ``out`` as it is
# checked (the bytes past the run are overwritten by what follows it), byte by byte for the
# rest and on other CPUs; an escape is decoded where it stands and the run goes on after it, so
# the properties' separators (\u0001, \u0002) cost no second pass over the string. The header
# scan spent half of its instructions in its strings (bench/README.md, "Instruction counts").
cdef extern from *:
    """
    #include <stddef.h>
    #include <stdint.h>
    #include <string.h>
    #if defined(__SSE2__)
    #include <emmintrin.h>
    #endif

    #define RMQ_JS_PLAIN(c) ((c) >= 0x20 && (c) < 0x80 && (c) != 0x22 && (c) != 0x5C)

    static inline int rmq_js_hex(uint8_t c)
    {
        if (c >= '0' && c <= '9') return c - '0';
        if (c >= 'a' && c <= 'f') return c - 'a' + 10;
        if (c >= 'A' && c <= 'F') return c - 'A' + 10;
        return -1;
    }

    /* The JSON string at p[i] (its opening quote) unescaped into out[0:room] (out NULL: only
       checked): the index after its closing quote, its length in *olen; -1 when it is not an
       ASCII string of the accepted shape (JSON's escapes, \\uXXXX below U+0080 only, no raw
       control character or byte >= 0x80), is not closed, or does not fit in room. Always
       in line: a SEND header holds about fifteen strings, most of them a few bytes, and the
       call's register saving and restoring cost about as much as reading one. */
    static inline __attribute__((always_inline)) Py_ssize_t rmq_js_string(const uint8_t *p, Py_ssize_t n, Py_ssize_t i,
                                           uint8_t *out, Py_ssize_t room, Py_ssize_t *olen)
    {
        Py_ssize_t o = 0;
        uint8_t c;
        int hi, lo;
        if (i >= n || p[i] != 0x22)
            return -1;
        i++;
        for (;;) {
    #if defined(__SSE2__)
            const __m128i sp = _mm_set1_epi8(0x20), qu = _mm_set1_epi8(0x22), bs = _mm_set1_epi8(0x5C);
            while (i + 16 <= n) {
                __m128i v = _mm_loadu_si128((const __m128i *)(p + i));
                /* signed: bytes >= 0x80 are negative, so "< 0x20" catches them too */
                __m128i bad = _mm_or_si128(_mm_cmplt_epi8(v, sp),
                                           _mm_or_si128(_mm_cmpeq_epi8(v, qu), _mm_cmpeq_epi8(v, bs)));
                unsigned m = (unsigned)_mm_movemask_epi8(bad);
                if (out != NULL) {
                    if (o + 16 <= room) {
                        _mm_storeu_si128((__m128i *)(out + o), v);
                    } else {
                        Py_ssize_t k = m ? (Py_ssize_t)__builtin_ctz(m) : 16;
                        if (o + k > room)
                            return -1;
                        memcpy(out + o, p + i, (size_t)k);
                    }
                }
                if (m) {
                    Py_ssize_t k = (Py_ssize_t)__builtin_ctz(m);
                    i += k;
                    o += k;
                    goto stop;
                }
                i += 16;
                o += 16;
            }
    #endif
            while (i < n && RMQ_JS_PLAIN(p[i])) {
                if (out != NULL) {
                    if (o >= room)
                        return -1;
                    out[o] = p[i];
                }
                i++;
                o++;
            }
    #if defined(__SSE2__)
        stop:
    #endif
            if (i + 1 >= n)                /* (a string is followed by at least one byte) */
                return -1;
            c = p[i];
            if (c == 0x22) {
                *olen = o;
                return i + 1;
            }
            if (c != 0x5C)                 /* a control character or a byte >= 0x80 */
                return -1;
            switch (p[i + 1]) {
            case 0x22: case 0x5C: case 0x2F: c = p[i + 1]; break;
            case 'b': c = 8; break;
            case 'f': c = 12; break;
            case 'n': c = 10; break;
            case 'r': c = 13; break;
            case 't': c = 9; break;
            case 'u':
                /* \\u00XX (the properties' separators among them): anything from U+0080 up is
                   refused, so the first two hex digits must be zeros */
                if (i + 6 > n || p[i + 2] != '0' || p[i + 3] != '0')
                    return -1;
                hi = rmq_js_hex(p[i + 4]);
                lo = rmq_js_hex(p[i + 5]);
                if (hi < 0 || hi > 7 || lo < 0)
                    return -1;
                c = (uint8_t)(hi * 16 + lo);
                i += 4;
                break;
            default:
                return -1;
            }
            i += 2;
            if (out != NULL) {
                if (o >= room)
                    return -1;
                out[o] = c;
            }
            o++;
        }
    }
    """
    bint RMQ_JS_PLAIN(uint8_t c) noexcept nogil
    Py_ssize_t rmq_js_string(const uint8_t* p, Py_ssize_t n, Py_ssize_t i, uint8_t* out, Py_ssize_t room,
                             Py_ssize_t* olen) noexcept nogil


cdef inline Py_ssize_t _js_ws(const uint8_t* p, Py_ssize_t n, Py_ssize_t i) noexcept nogil:
    # (fastjson writes no whitespace: one comparison tells the common byte apart)
    while i < n and p[i] <= c' ' and (p[i] == c' ' or p[i] == c'\t' or p[i] == c'\n' or p[i] == c'\r'):
        i += 1
    return i


cdef Py_ssize_t _js_int(const uint8_t* p, Py_ssize_t n, Py_ssize_t i, int64_t* val) noexcept nogil:
    """The JSON integer at ``p[i]`` (``-?(0|[1-9][0-9]{0,17})``, not followed by a fraction or
    an exponent): the index after it, or -1."""
    cdef bint neg = False
    cdef uint64_t x = 0
    cdef uint8_t d
    cdef Py_ssize_t start
    if i < n and p[i] == c'-':
        neg = True
        i += 1
    if i >= n or p[i] < c'0' or p[i] > c'9':
        return -1
    if p[i] == c'0':
        i += 1
    else:
        # one unsigned compare per digit; more than 18 digits (x may have wrapped) is refused
        start = i
        while i < n:
            d = <uint8_t>(p[i] - c'0')
            if d > 9:
                break
            x = x * 10 + d
            i += 1
        if i - start > 18:
            return -1
    if i < n and (p[i] == c'.' or p[i] == c'e' or p[i] == c'E' or c'0' <= p[i] <= c'9'):
        return -1
    val[0] = -<int64_t>x if neg else <int64_t>x
    return i


cdef enum:
    _JK_CODE = 1
    _JK_LANGUAGE = 2
    _JK_VERSION = 4
    _JK_OPAQUE = 8
    _JK_FLAG = 16
    _JK_REMARK = 32
    _JK_EXT = 64
    _JK_SER = 128


# The eight names by bit, for a name read as any string (spaced or escaped: not fastjson's
# form, which _js_known_key below matches with these names' quoted forms in line).
cdef const char* _JK_NAMES[8]
_JK_NAMES[:] = [b"code", b"language", b"version", b"opaque", b"flag", b"remark", b"extFields",
                b"serializeTypeCurrentRPC"]


cdef int _js_name_bit(const uint8_t* key, Py_ssize_t klen) noexcept nogil:
    """The bit of the name ``key[0:klen]`` (``_JK_NAMES[k]`` has bit ``1 << k``), or 0."""
    cdef int k
    for k in range(8):
        if strlen(_JK_NAMES[k]) == <size_t>klen and memcmp(key, _JK_NAMES[k], klen) == 0:
            return 1 << k
    return 0


cdef inline Py_ssize_t _js_name(const uint8_t* p, Py_ssize_t n, Py_ssize_t i, const char* lit, Py_ssize_t k,
                                int name_bit, int* bit) noexcept nogil:
    """``lit`` (``k`` bytes) at ``i``: the index after it, with ``bit`` set to ``name_bit``; or -1."""
    if i + k <= n and memcmp(p + i, lit, k) == 0:
        bit[0] = name_bit
        return i + k
    return -1


cdef inline Py_ssize_t _js_known_key(const uint8_t* p, Py_ssize_t n, Py_ssize_t i, int* bit) noexcept nogil:
    """One of the eight names as fastjson writes it, quotes and colon included (``"code":``),
    told by its first letter and matched by one compare: the index after the colon and the
    name's bit, or -1 (then the name is read as any string). Each call passes its literal and
    length as constants into the inlined compare, so gcc turns each memcmp into a few loads and
    compares, where a table of (literal, length) made them libc calls (+220 instructions per
    SEND)."""
    cdef uint8_t c
    if i + 1 >= n or p[i] != c'"':
        return -1
    c = p[i + 1]
    if c == c'c':
        return _js_name(p, n, i, b'"code":', 7, _JK_CODE, bit)
    if c == c'e':
        return _js_name(p, n, i, b'"extFields":', 12, _JK_EXT, bit)
    if c == c'f':
        return _js_name(p, n, i, b'"flag":', 7, _JK_FLAG, bit)
    if c == c'l':
        return _js_name(p, n, i, b'"language":', 11, _JK_LANGUAGE, bit)
    if c == c'o':
        return _js_name(p, n, i, b'"opaque":', 9, _JK_OPAQUE, bit)
    if c == c'r':
        return _js_name(p, n, i, b'"remark":', 9, _JK_REMARK, bit)
    if c == c's':
        return _js_name(p, n, i, b'"serializeTypeCurrentRPC":', 26, _JK_SER, bit)
    if c == c'v':
        return _js_name(p, n, i, b'"version":', 10, _JK_VERSION, bit)
    return -1


cdef Py_ssize_t json_header_scan(const uint8_t* p, Py_ssize_t n, JsonHead* h, uint8_t* ext,
                                 Py_ssize_t cap) noexcept nogil:
    cdef uint8_t key[32]
    cdef Py_ssize_t i, j, klen, e = 0, at, vlen
    cdef int seen = 0, bit
    cdef int64_t v
    h.code = 0
    h.flag = 0
    h.opaque = 0
    h.version = 0
    i = _js_ws(p, n, 0)
    if i >= n or p[i] != c'{':
        return -1
    i = _js_ws(p, n, i + 1)
    if i < n and p[i] == c'}':
        return -1                                  # (no code)
    while True:
        # the name: as fastjson writes it (one compare), else read as any string and told apart
        # by its length (the names are the same: the decoder unescapes them too)
        bit = 0
        j = _js_known_key(p, n, i, &bit)
        if j >= 0:
            i = j
        else:
            i = rmq_js_string(p, n, i, key, 32, &klen)
            if i < 0:
                return -1
            i = _js_ws(p, n, i)
            if i >= n or p[i] != c':':
                return -1
            i += 1
            bit = _js_name_bit(key, klen)
            if bit == 0:
                return -1
        if seen & bit:
            return -1
        seen |= bit
        if i >= n:
            return -1
        if p[i] <= c' ':                                # (fastjson: no whitespace)
            i = _js_ws(p, n, i)
            if i >= n:
                return -1
        if bit == _JK_CODE or bit == _JK_FLAG or bit == _JK_OPAQUE or bit == _JK_VERSION:
            i = _js_int(p, n, i, &v)
            if i < 0:
                return -1
            if bit == _JK_CODE:
                h.code = v
            elif bit == _JK_FLAG:
                h.flag = v
            elif bit == _JK_OPAQUE:
                h.opaque = v
            else:
                h.version = v
        elif bit == _JK_EXT:
            if p[i] != c'{':
                return -1
            i = _js_ws(p, n, i + 1)
            if i < n and p[i] == c'}':
                i += 1
            else:
                while True:
                    # one entry: | keyLen i16 | key | valLen i32 | value |
                    if i + 4 <= n and p[i] == c'"' and p[i + 2] == c'"' and p[i + 3] == c':' \
                            and RMQ_JS_PLAIN(p[i + 1]):
                        # a one-letter name followed by its colon (SEND_MESSAGE_V2's a..n)
                        if cap - e < 3:
                            return -1
                        ext[e] = 0
                        ext[e + 1] = 1
                        ext[e + 2] = p[i + 1]
                        e += 3
                        i += 4
                    else:
                        if cap - e < 2:
                            return -1
                        at = e
                        i = rmq_js_string(p, n, i, ext + e + 2, cap - e - 2, &klen)
                        if i < 0 or klen > 0x7FFF:
                            return -1
                        wr16(ext + at, <int16_t>klen)
                        e += 2 + klen
                        i = _js_ws(p, n, i)
                        if i >= n or p[i] != c':':
                            return -1
                        i += 1
                    if i < n and p[i] <= c' ':        # (fastjson: none; the value's quote)
                        i = _js_ws(p, n, i)
                    if cap - e < 4:
                        return -1
                    at = e
                    i = rmq_js_string(p, n, i, ext + e + 4, cap - e - 4, &vlen)
                    if i < 0:
                        return -1
                    wr32(ext + at, <int32_t>vlen)
                    e += 4 + vlen
                    # (rmq_js_string leaves at least one byte after the string)
                    if p[i] == c',':
                        i += 1
                        if i < n and p[i] <= c' ':    # (fastjson: none; the next name's quote)
                            i = _js_ws(p, n, i)
                        continue
                    if p[i] == c'}':
                        i += 1
                        break
                    i = _js_ws(p, n, i)
                    if i >= n:
                        return -1
                    if p[i] == c',':
                        i = _js_ws(p, n, i + 1)
                        continue
                    if p[i] != c'}':
                        return -1
                    i += 1
                    break
        else:                                       # language, remark, serializeTypeCurrentRPC
            if bit != _JK_LANGUAGE and i + 4 <= n and memcmp(p + i, b"null", 4) == 0:
                i += 4
            else:
                i = rmq_js_string(p, n, i, NULL, 0, &vlen)
                if i < 0:
                    return -1
        if i >= n:
            return -1
        if p[i] <= c' ':
            i = _js_ws(p, n, i)
            if i >= n:
                return -1
        if p[i] == c',':
            i += 1
            if i < n and p[i] <= c' ':
                i = _js_ws(p, n, i)
            continue
        if p[i] != c'}':
            return -1
        break
    if not (seen & _JK_CODE) or _js_ws(p, n, i + 1) != n:
        return -1
    return e


def json_header_scan_py(header):
    """``json_header_scan`` for tests: ``(code, flag, opaque, version, {key: value})`` of the
    JSON header bytes (the map's entries in order, the last of a repeated key kept), or None
    when the scan does not take it."""
    cdef bytes b = bytes(header)
    cdef JsonHead h
    cdef Py_ssize_t n = len(b), e, pos = 0, kl, vl
    cdef uint8_t* ext = <uint8_t*>PyMem_Malloc(n + 1)
    cdef const uint8_t* q
    if ext == NULL:
        raise MemoryError()
    try:
        e = json_header_scan(<const uint8_t*>PyBytes_AS_STRING(b), n, &h, ext, n)
        if e < 0:
            return None
        fields = {}
        q = ext
        while pos < e:
            kl = rd16(q + pos)
            key = (<char*>q)[pos + 2:pos + 2 + kl].decode("ascii")
            pos += 2 + kl
            vl = rd32(q + pos)
            fields[key] = (<char*>q)[pos + 4:pos + 4 + vl].decode("ascii")
            pos += 4 + vl
        return h.code, h.flag, h.opaque, h.version, fields
    finally:
        PyMem_Free(ext)


# ------------------------------------------------------------------ REGISTER_BROKER topic lines

cdef extern from "Python.h":
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)


def register_topic_lines(bytes raw not None, Py_ssize_t pos, Py_ssize_t count, entry):
    """The ``count`` topic lines of an inflated compressed RegisterBrokerBody from ``raw[pos:]``
    (Java ``RegisterBrokerBody.decode(data, true)``: an int32 length, then ``TopicConfig.encode()``,
    ``name read write perm filterType``) as ``{name: entry(read, write, perm)}``, or None for
    anything outside the usual shape: a length outside 1..256 or past the end, a line without
    exactly five space-separated fields, a queue count or perm that is not 1 to 9 ASCII digits.
    The pure-Python reference (rmq/protocol/body/register.py) then decodes it or names what is
    wrong. Names are decoded as UTF-8 with replacement, as the reference does; a later line of a
    repeated name wins, as in the reference's dict."""
    cdef const uint8_t* p = <const uint8_t*>PyBytes_AS_STRING(raw)
    cdef Py_ssize_t end = PyBytes_GET_SIZE(raw)
    cdef Py_ssize_t i, k, j, n, line_end, start
    cdef long long v
    cdef long long nums[3]
    cdef dict out = {}
    if pos < 0 or pos > end or count < 0:
        return None
    for i in range(count):
        if end - pos < 4:
            return None
        n = rd32(p + pos)
        pos += 4
        if n <= 0 or n > 256 or n > end - pos:
            return None
        line_end = pos + n
        j = pos
        while j < line_end and p[j] != 32:
            j += 1
        if j == pos or j == line_end:
            return None
        name = PyUnicode_DecodeUTF8(<const char*>p + pos, j - pos, "replace")
        for k in range(3):
            j += 1  # past the space
            start = j
            v = 0
            while j < line_end and j - start < 9 and 48 <= p[j] <= 57:
                v = v * 10 + (p[j] - 48)
                j += 1
            if j == start or j >= line_end or p[j] != 32:
                return None
            nums[k] = v
        j += 1
        while j < line_end:  # the filter type: the fifth field, may be empty
            if p[j] == 32:
                return None
            j += 1
        out[name] = entry(nums[0], nums[1], nums[2])
        pos = line_end
    return out
