# Included by rmq/_store.pyx: the JSON header codec of the remoting layer (issue 7).
#
# A RemotingCommand's JSON header, as clients send it (ser_type 0 in the length word)::
#
#     {"code":310,"extFields":{"a":"group","b":"Topic","e":"3","i":"UNIQ_KEY\u0001C0A8…"},
#      "flag":0,"language":"JAVA","opaque":42,"serializeTypeCurrentRPC":"JSON","version":409}
#
# a flat object (any key order, JSON whitespace allowed) whose values are numbers, strings,
# booleans or null, except ``extFields``: a flat object of the same scalars.
#
# json_header_decode parses exactly that shape and returns None for anything else -- nested
# values, floats, numbers over 18 digits, bad UTF-8, raw control characters, unknown escapes,
# a field of the wrong type, trailing bytes. The caller then runs the pure-Python reference
# decoder (rmq/remoting/codec.py), which either accepts the input too or raises the
# reference error message. So the fast path never has an error message of its own, and
# for every input it accepts it must build what ``json.loads`` + the reference checks build:
# tests/remoting/test_remoting_codec_fast.py checks that differentially.
#
# json_header_encode writes a reply header byte for byte as the reference does (fastjson's
# key order; strings escaped like ``json.dumps(ensure_ascii=False)``: ``"`` ``\`` and
# U+0000..U+001F only, short forms \b \t \n \f \r, else \u00xx in lower case hex), or
# returns None for anything it does not handle (non-str keys, non-int code, a str that does
# not encode to UTF-8 ...) so that the reference runs and raises what it raises.

from cpython.object cimport PyObject
from cpython.long cimport PyLong_FromLongLong, PyLong_AsLongLong, PyLong_Check, PyLong_CheckExact
from cpython.dict cimport PyDict_SetItem, PyDict_Next, PyDict_CheckExact
from cpython.unicode cimport PyUnicode_Check, PyUnicode_CheckExact
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING, PyBytes_GET_SIZE
from cpython.exc cimport PyErr_Clear

cdef extern from "Python.h":
    object PyUnicode_DecodeUTF8(const char* s, Py_ssize_t size, const char* errors)
    object PyUnicode_FromKindAndData(int kind, const void* buffer, Py_ssize_t size)
    const char* PyUnicode_AsUTF8AndSize(object u, Py_ssize_t* size)
    int PyUnicode_4BYTE_KIND

ctypedef uint32_t UCS4

# ------------------------------------------------------------------------------ decoding

cdef inline Py_ssize_t _j_ws(const uint8_t* p, Py_ssize_t i, Py_ssize_t n) noexcept nogil:
    # JSON whitespace (what json.loads skips): space, tab, LF, CR
    while i < n and (p[i] == 32 or p[i] == 9 or p[i] == 10 or p[i] == 13):
        i += 1
    return i


cdef inline int _j_hex(uint8_t c) noexcept nogil:
    if 48 <= c <= 57:
        return c - 48
    if 97 <= c <= 102:
        return c - 87
    if 65 <= c <= 70:
        return c - 55
    return -1


cdef inline int _j_hex4(const uint8_t* p) noexcept nogil:
    cdef int a = _j_hex(p[0]), b = _j_hex(p[1]), c = _j_hex(p[2]), d = _j_hex(p[3])
    if a < 0 or b < 0 or c < 0 or d < 0:
        return -1
    return (a << 12) | (b << 8) | (c << 4) | d


cdef Py_ssize_t _j_unescape(const uint8_t* p, Py_ssize_t i, Py_ssize_t end, UCS4* out) noexcept nogil:
    """Decode the string body p[i:end] (escapes and strict UTF-8) into out; the number of
    code points, or -1 when json.loads would refuse it (the reference then says why)."""
    cdef Py_ssize_t k = 0
    cdef uint8_t c, c1, c2, c3
    cdef int u, u2
    while i < end:
        c = p[i]
        if c == 92:  # backslash
            if i + 1 >= end:
                return -1
            c = p[i + 1]
            i += 2
            if c == 34 or c == 92 or c == 47:   # \" \\ \/
                out[k] = c
            elif c == 98:
                out[k] = 8
            elif c == 102:
                out[k] = 12
            elif c == 110:
                out[k] = 10
            elif c == 114:
                out[k] = 13
            elif c == 116:
                out[k] = 9
            elif c == 117:  # \uXXXX; a high surrogate followed by \u<low> is one code point
                if i + 4 > end:
                    return -1
                u = _j_hex4(p + i)
                if u < 0:
                    return -1
                i += 4
                if 0xD800 <= u <= 0xDBFF and i + 6 <= end and p[i] == 92 and p[i + 1] == 117:
                    u2 = _j_hex4(p + i + 2)
                    if u2 < 0:
                        return -1  # json.loads raises on bad hex after a high surrogate
                    if 0xDC00 <= u2 <= 0xDFFF:
                        u = 0x10000 + ((u - 0xD800) << 10) + (u2 - 0xDC00)
                        i += 6
                out[k] = <UCS4>u  # lone surrogates stay, as json.loads keeps them
            else:
                return -1
            k += 1
        elif c < 0x80:
            if c < 32:
                return -1  # raw control character: json.loads (strict) refuses
            out[k] = c
            k += 1
            i += 1
        else:
            # strict UTF-8, as bytes.decode("utf-8"): no overlongs, no surrogates, <= U+10FFFF
            if 0xC2 <= c <= 0xDF:
                if i + 1 >= end:
                    return -1
                c1 = p[i + 1]
                if c1 & 0xC0 != 0x80:
                    return -1
                out[k] = ((c & 0x1F) << 6) | (c1 & 0x3F)
                i += 2
            elif 0xE0 <= c <= 0xEF:
                if i + 2 >= end:
                    return -1
                c1 = p[i + 1]
                c2 = p[i + 2]
                if c1 & 0xC0 != 0x80 or c2 & 0xC0 != 0x80:
                    return -1
                if (c == 0xE0 and c1 < 0xA0) or (c == 0xED and c1 > 0x9F):
                    return -1
                out[k] = ((c & 0x0F) << 12) | ((c1 & 0x3F) << 6) | (c2 & 0x3F)
                i += 3
            elif 0xF0 <= c <= 0xF4:
                if i + 3 >= end:
                    return -1
                c1 = p[i + 1]
                c2 = p[i + 2]
                c3 = p[i + 3]
                if c1 & 0xC0 != 0x80 or c2 & 0xC0 != 0x80 or c3 & 0xC0 != 0x80:
                    return -1
                if (c == 0xF0 and c1 < 0x90) or (c == 0xF4 and c1 > 0x8F):
                    return -1
                out[k] = ((c & 0x07) << 18) | ((c1 & 0x3F) << 12) | ((c2 & 0x3F) << 6) | (c3 & 0x3F)
                i += 4
            else:
                return -1
            k += 1
    return k


cdef object _j_string(const uint8_t* p, Py_ssize_t* ip, Py_ssize_t n):
    """p[*ip] is the opening quote. Returns the str and moves *ip past the closing quote, or
    returns None (fallback)."""
    cdef Py_ssize_t i = ip[0] + 1, start = i, cnt
    cdef bint esc = False, wide = False
    cdef uint8_t c
    cdef UCS4 small[128]
    cdef UCS4* out
    while i < n:
        c = p[i]
        if c == 34:
            break
        if c == 92:
            esc = True
            i += 2
            continue
        if c < 32:
            return None
        if c >= 0x80:
            wide = True
        i += 1
    if i >= n:
        return None
    ip[0] = i + 1
    if not esc:
        # the common case: one C call (ASCII fast path inside, strict UTF-8 otherwise)
        try:
            return PyUnicode_DecodeUTF8(<const char*>p + start, i - start, NULL)
        except UnicodeDecodeError:
            return None
    if i - start <= 128:
        out = &small[0]
    else:
        out = <UCS4*>PyMem_Malloc((i - start) * sizeof(UCS4))
        if out == NULL:
            raise MemoryError()
    try:
        cnt = _j_unescape(p, start, i, out)
        if cnt < 0:
            return None
        return PyUnicode_FromKindAndData(PyUnicode_4BYTE_KIND, out, cnt)  # narrows to the smallest kind
    finally:
        if out != &small[0]:
            PyMem_Free(out)


# sentinel: "not a value this fast path takes"
cdef object _J_FALLBACK = object()


cdef object _j_scalar(const uint8_t* p, Py_ssize_t* ip, Py_ssize_t n):
    """A string, integer (<= 18 digits), true, false or null at p[*ip]; _J_FALLBACK otherwise."""
    cdef Py_ssize_t i = ip[0], d0
    cdef uint8_t c = p[i]
    cdef int64_t v = 0
    cdef bint neg = False
    cdef object s
    if c == 34:
        s = _j_string(p, ip, n)
        return _J_FALLBACK if s is None else s
    if c == 45 or 48 <= c <= 57:
        # -?(0|[1-9][0-9]*) ; fractions, exponents and long numbers go to json.loads
        if c == 45:
            neg = True
            i += 1
        d0 = i
        while i < n and 48 <= p[i] <= 57:
            v = v * 10 + (p[i] - 48)
            i += 1
            if i - d0 > 18:
                return _J_FALLBACK
        if i == d0 or (p[d0] == 48 and i - d0 > 1):
            return _J_FALLBACK
        if i < n and (p[i] == 46 or p[i] == 101 or p[i] == 69):
            return _J_FALLBACK
        ip[0] = i
        return PyLong_FromLongLong(-v if neg else v)
    if c == 116 and i + 4 <= n and memcmp(p + i, b"true", 4) == 0:
        ip[0] = i + 4
        return True
    if c == 102 and i + 5 <= n and memcmp(p + i, b"false", 5) == 0:
        ip[0] = i + 5
        return False
    if c == 110 and i + 4 <= n and memcmp(p + i, b"null", 4) == 0:
        ip[0] = i + 4
        return None
    return _J_FALLBACK


cdef object _j_ext_object(const uint8_t* p, Py_ssize_t* ip, Py_ssize_t n):
    """p[*ip] is '{': a flat object of scalars -> dict, or None (fallback)."""
    cdef Py_ssize_t i = _j_ws(p, ip[0] + 1, n)
    cdef dict d = {}
    cdef object k, v
    if i < n and p[i] == 125:
        ip[0] = i + 1
        return d
    while True:
        if i >= n or p[i] != 34:
            return None
        k = _j_string(p, &i, n)
        if k is None:
            return None
        i = _j_ws(p, i, n)
        if i >= n or p[i] != 58:
            return None
        i = _j_ws(p, i + 1, n)
        if i >= n:
            return None
        v = _j_scalar(p, &i, n)
        if v is _J_FALLBACK:
            return None
        PyDict_SetItem(d, k, v)  # a repeated key keeps its first position, last value (json.loads)
        i = _j_ws(p, i, n)
        if i >= n:
            return None
        if p[i] == 44:
            i = _j_ws(p, i + 1, n)
            continue
        if p[i] == 125:
            ip[0] = i + 1
            return d
        return None


# top-level keys we read; others (serializeTypeCurrentRPC, anything new) are parsed and ignored
cdef enum:
    _K_OTHER = 0
    _K_CODE = 1
    _K_LANGUAGE = 2
    _K_VERSION = 3
    _K_OPAQUE = 4
    _K_FLAG = 5
    _K_REMARK = 6
    _K_EXT = 7


cdef dict _J_KEYS = {"code": _K_CODE, "language": _K_LANGUAGE, "version": _K_VERSION, "opaque": _K_OPAQUE,
                     "flag": _K_FLAG, "remark": _K_REMARK, "extFields": _K_EXT}


cdef inline int _j_key(const uint8_t* p, Py_ssize_t a, Py_ssize_t b) noexcept nogil:
    cdef Py_ssize_t L = b - a
    if L == 4:
        if memcmp(p + a, b"code", 4) == 0:
            return _K_CODE
        if memcmp(p + a, b"flag", 4) == 0:
            return _K_FLAG
    elif L == 6:
        if memcmp(p + a, b"opaque", 6) == 0:
            return _K_OPAQUE
        if memcmp(p + a, b"remark", 6) == 0:
            return _K_REMARK
    elif L == 7:
        if memcmp(p + a, b"version", 7) == 0:
            return _K_VERSION
    elif L == 8:
        if memcmp(p + a, b"language", 8) == 0:
            return _K_LANGUAGE
    elif L == 9:
        if memcmp(p + a, b"extFields", 9) == 0:
            return _K_EXT
    return _K_OTHER


cdef object _j_header(const uint8_t* p, Py_ssize_t n, object cmd_cls):
    cdef Py_ssize_t i = _j_ws(p, 0, n), ka, kb
    cdef int key
    cdef object v
    cdef object code = None, language = None, version = None, opaque = None
    cdef object flag = None, remark = None, ext = None
    if i >= n or p[i] != 123:
        return None
    i = _j_ws(p, i + 1, n)
    if i >= n or p[i] == 125:
        return None  # {} has no code: the reference says so
    while True:
        if i >= n or p[i] != 34:
            return None
        ka = i + 1
        kb = ka
        while kb < n and p[kb] != 34 and p[kb] != 92 and 32 <= p[kb] < 0x80:
            kb += 1
        if kb >= n:
            return None
        if p[kb] == 34:
            key = _j_key(p, ka, kb)
            i = _j_ws(p, kb + 1, n)
        else:
            # an escaped or non-ASCII key (no real client writes one): decode, then look up
            v = _j_string(p, &i, n)
            if v is None:
                return None
            key = _J_KEYS.get(v, _K_OTHER)
            i = _j_ws(p, i, n)
        if i >= n or p[i] != 58:
            return None
        i = _j_ws(p, i + 1, n)
        if i >= n:
            return None
        if p[i] == 123:
            if key != _K_EXT:
                return None
            v = _j_ext_object(p, &i, n)
            if v is None:
                return None
        else:
            v = _j_scalar(p, &i, n)
            if v is _J_FALLBACK:
                return None
        if key == _K_CODE:
            code = v
        elif key == _K_LANGUAGE:
            language = v
        elif key == _K_VERSION:
            version = v
        elif key == _K_OPAQUE:
            opaque = v
        elif key == _K_FLAG:
            flag = v
        elif key == _K_REMARK:
            remark = v
        elif key == _K_EXT:
            ext = v
        i = _j_ws(p, i, n)
        if i >= n:
            return None
        if p[i] == 44:
            i = _j_ws(p, i + 1, n)
            continue
        if p[i] == 125:
            break
        return None
    if _j_ws(p, i + 1, n) != n:
        return None  # trailing data
    # The reference's field checks; any miss goes back to it for the error message.
    if not PyLong_CheckExact(code):
        return None
    if language is None:
        language = "JAVA"
    elif not PyUnicode_CheckExact(language):
        return None  # (an int language code is mapped by the reference)
    if version is None:
        version = 0
    elif not PyLong_CheckExact(version):
        return None
    if opaque is None:
        opaque = 0
    elif not PyLong_CheckExact(opaque):
        return None
    if flag is None:
        flag = 0
    elif not PyLong_CheckExact(flag):
        return None
    if remark is not None and not PyUnicode_CheckExact(remark):
        return None
    if ext is None:
        ext = {}
    elif not PyDict_CheckExact(ext):
        return None
    cmd = cmd_cls.__new__(cmd_cls)
    cmd.code = code
    cmd.language = language
    cmd.version = version
    cmd.opaque = opaque
    cmd.flag = flag
    cmd.remark = remark
    cmd.ext_fields = ext
    cmd.body = None
    cmd.serialize_type = 0
    return cmd


def json_header_decode(buf, Py_ssize_t start, Py_ssize_t end, cmd_cls):
    """Decode the JSON header ``buf[start:end]`` into a new ``cmd_cls`` instance (a slotted
    RemotingCommand: code, language, version, opaque, flag, remark, ext_fields, body=None,
    serialize_type=0), or return None when the header is outside the common shape or is
    malformed (the caller then runs the reference decoder, which gives the error)."""
    cdef Py_buffer b
    PyObject_GetBuffer(buf, &b, PyBUF_SIMPLE)
    try:
        if start < 0 or end > b.len or start > end:
            raise ValueError(f"header span {start}:{end} outside a buffer of {b.len} bytes")
        return _j_header(<const uint8_t*>b.buf + start, end - start, cmd_cls)
    finally:
        PyBuffer_Release(&b)


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
        tmp[k] = <char>(48 + u % 10)
        u //= 10
        if u == 0:
            break
    if x < 0:
        k -= 1
        tmp[k] = 45
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
    w[0] = 34
    w += 1
    i = 0
    while i < n:
        c = <uint8_t>u[i]
        if c >= 32 and c != 34 and c != 92:
            # copy the run of bytes that need no escape in one go
            run = i + 1
            while run < n and <uint8_t>u[run] >= 32 and <uint8_t>u[run] != 34 and <uint8_t>u[run] != 92:
                run += 1
            memcpy(w, u + i, run - i)
            w += run - i
            i = run
            continue
        w[0] = 92
        if c == 34 or c == 92:
            w[1] = c
            w += 2
        elif c == 8:
            w[1] = 98
            w += 2
        elif c == 9:
            w[1] = 116
            w += 2
        elif c == 10:
            w[1] = 110
            w += 2
        elif c == 12:
            w[1] = 102
            w += 2
        elif c == 13:
            w[1] = 114
            w += 2
        else:
            w[1] = 117
            w[2] = 48
            w[3] = 48
            w[4] = _HEXL[c >> 4]
            w[5] = _HEXL[c & 15]
            w += 6
        i += 1
    w[0] = 34
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

cdef extern from "Python.h":
    object PyLong_FromUnicodeObject(object u, int base)
    PyObject* PyDict_GetItemWithError(object d, object key) except? NULL

from sys import intern as sys_intern
_object_new = object.__new__

cdef enum:
    _H_STR = 0
    _H_INT = 1
    _H_BOOL = 2


cdef class HeaderReader:
    """``reader(cls, ext)`` → a ``cls`` instance, like the generated ``from_ext_fields``.

    Args:
        fields: ``[(attribute, wire name, kind, required, default)]`` with kind 0 str,
            1 int, 2 bool.
        fallback: the reference reader ``fallback(cls, ext)``, called for anything else.
    """
    cdef tuple attrs, wires, defaults
    cdef bytes kinds, required
    cdef readonly object fallback
    cdef Py_ssize_t n

    def __init__(self, fields, fallback):
        fields = list(fields)
        self.n = len(fields)
        self.attrs = tuple(sys_intern(f[0]) for f in fields)
        self.wires = tuple(sys_intern(f[1]) for f in fields)
        self.kinds = bytes(int(f[2]) for f in fields)
        self.required = bytes(1 if f[3] else 0 for f in fields)
        self.defaults = tuple(f[4] for f in fields)
        self.fallback = fallback

    def __call__(self, cls, ext):
        cdef Py_ssize_t i
        cdef PyObject* vp
        cdef object v, o
        cdef uint8_t kind
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
                    if not PyUnicode_CheckExact(v):
                        return self.fallback(cls, ext)
                elif kind == _H_INT:
                    if not PyLong_CheckExact(v):
                        if not PyUnicode_CheckExact(v):
                            return self.fallback(cls, ext)
                        try:
                            v = PyLong_FromUnicodeObject(v, 10)  # = int(v), what the reference does
                        except ValueError:
                            return self.fallback(cls, ext)
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

