# Included by rmq/_store.pyx: the JSON reply-header encoder and the typed-header reader of
# the remoting layer.
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

from cpython.object cimport PyObject
from cpython.long cimport PyLong_AsLongLong, PyLong_Check, PyLong_CheckExact
from cpython.dict cimport PyDict_Next, PyDict_CheckExact
from cpython.unicode cimport PyUnicode_Check, PyUnicode_CheckExact
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.exc cimport PyErr_Clear

cdef extern from "Python.h":
    const char* PyUnicode_AsUTF8AndSize(object u, Py_ssize_t* size)

# ------------------------------------------------------------------------------ encoding

cdef struct _JOut:
    char* p
    Py_ssize_t n
    Py_ssize_t cap


cdef int _jo_reserve(_JOut* o, Py_ssize_t extra) except -1:
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


cdef inline int _jo_raw(_JOut* o, const char* s, Py_ssize_t n) except -1:
    _jo_reserve(o, n)
    memcpy(o.p + o.n, s, n)
    o.n += n
    return 0


cdef inline int _jo_lit(_JOut* o, bytes lit) except -1:
    return _jo_raw(o, PyBytes_AS_STRING(lit), PyBytes_GET_SIZE(lit))


cdef int _jo_int(_JOut* o, object v) except -1:
    """Decimal of an int (or int subclass such as an IntEnum); 1 = not handled."""
    cdef long long x
    cdef unsigned long long u
    cdef char tmp[24]
    cdef int k = 24
    if not PyLong_Check(v):
        return 1
    try:
        x = PyLong_AsLongLong(v)
    except OverflowError:
        return 1  # the reference writes big ints (then the client refuses them)
    u = (~<unsigned long long>x) + 1 if x < 0 else <unsigned long long>x  # (no signed overflow at INT64_MIN)
    while True:
        k -= 1
        tmp[k] = <char>(c'0' + u % 10)
        u //= 10
        if u == 0:
            break
    if x < 0:
        k -= 1
        tmp[k] = c'-'
    _jo_raw(o, tmp + k, 24 - k)
    return 0


cdef const char* _HEXL = b"0123456789abcdef"


cdef int _jo_str(_JOut* o, object s) except -1:
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
    _jo_reserve(o, n * 6 + 2)  # worst case: every byte a \u00xx
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


cdef int _jo_ext(_JOut* o, object ext) except -1:
    """extFields with every value a string (True/False as true/false, None omitted)."""
    cdef Py_ssize_t pos = 0
    cdef PyObject* kp
    cdef PyObject* vp
    cdef object k, v
    cdef bint first = True
    if not PyDict_CheckExact(ext):
        return 1
    _jo_lit(o, b"{")
    while PyDict_Next(ext, &pos, &kp, &vp):
        k = <object>kp
        v = <object>vp
        if v is None:
            continue
        if not PyUnicode_CheckExact(k):
            return 1  # (json.dumps converts int/float/bool keys; the reference does it)
        if not first:
            _jo_lit(o, b",")
        first = False
        if _jo_str(o, k):
            return 1
        _jo_lit(o, b":")
        if v is True:
            _jo_lit(o, b'"true"')
        elif v is False:
            _jo_lit(o, b'"false"')
        elif PyUnicode_CheckExact(v):
            if _jo_str(o, v):
                return 1
        else:
            try:
                v = str(v)  # as the reference does for ints, floats, enums ...
            except Exception:
                return 1  # the reference raises it
            if _jo_str(o, v):
                return 1
    _jo_lit(o, b"}")
    return 0


cdef int _jo_header(_JOut* o, object code, object ext, object flag, object language,
                    object opaque, object remark, object version) except -1:
    # {"code":C,"extFields":{…},"flag":F,"language":"L","opaque":O[,"remark":"R"],
    #  "serializeTypeCurrentRPC":"JSON","version":V}      (fastjson's sorted key order)
    _jo_lit(o, b'{"code":')
    if _jo_int(o, code):
        return 1
    _jo_lit(o, b',"extFields":')
    if not ext:
        _jo_lit(o, b"{}")
    elif _jo_ext(o, ext):
        return 1
    _jo_lit(o, b',"flag":')
    if _jo_int(o, flag):
        return 1
    _jo_lit(o, b',"language":')
    if not PyUnicode_CheckExact(language) or _jo_str(o, language):
        return 1
    _jo_lit(o, b',"opaque":')
    if _jo_int(o, opaque):
        return 1
    if remark is not None:
        _jo_lit(o, b',"remark":')
        if not PyUnicode_CheckExact(remark) or _jo_str(o, remark):
            return 1
    _jo_lit(o, b',"serializeTypeCurrentRPC":"JSON","version":')
    if _jo_int(o, version):
        return 1
    _jo_lit(o, b"}")
    return 0


def json_header_encode(code, ext, flag, language, opaque, remark, version, Py_ssize_t body_len=-1):
    """The JSON header of a command, byte for byte as rmq/remoting/codec.py's reference
    encoder writes it, or None when an argument is outside what this fast path handles
    (the caller then runs the reference, which encodes it or raises).

    With ``body_len >= 0`` the frame's two leading words come first (length =
    4 + header length + body_len, then ser_type 0 and the header length)."""
    cdef _JOut o
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
# HeaderReader is the fast twin of the from_ext_fields functions that rmq/remoting/headers.py
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


cdef bint _has_surrogate(object s):
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

from sys import intern as _sys_intern
_object_new = object.__new__

cdef enum:
    _H_STR = 0
    _H_INT = 1
    _H_BOOL = 2


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
                if kind == _H_STR:
                    if not PyUnicode_CheckExact(v) or _has_surrogate(v):
                        return self.fallback(cls, ext)
                elif kind == _H_INT:
                    if not PyLong_CheckExact(v):
                        if not PyUnicode_CheckExact(v):
                            return self.fallback(cls, ext)
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

