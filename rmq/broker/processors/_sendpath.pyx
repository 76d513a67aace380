# cython: language_level=3, cdivision=True
"""rmq.broker.processors._sendpath: the plain SEND in one call (built by send_fast.py; the
C declarations in _sendpath.pxd)."""
# ---------------------------------------------------------------------------------------------
# The common SEND in one call (Java SendMessageProcessor.sendMessage for a plain message on an
# ASYNC_FLUSH master): the typed header read from the extFields dict into C values, Java's
# msgCheck, the CommitLog record written into the mapped file, the store's and the broker's
# bookkeeping and the reply frame -- without the header object, MessageInner,
# PutMessageResult, AppendMessageResult or the msgId string.
#
# SendFastPath.send returns None, before touching anything, for every SEND it does not take
# (the caller then runs the Python path, which words every refusal): a batch, a header value
# not in its plain shape (text that is not ASCII, a number that is not -?[0-9]{1,18}, a
# missing required field), a topic that is not in the topic table or not writable, a queue
# id out of range or negative, a %RETRY% topic, DELAY or TRAN_MSG properties, a transaction
# flag, a queue without a queue offset yet, a record that does not fit the current file (the
# roll), a store that refuses writes, a SYNC_FLUSH store, a SYNC_MASTER or SLAVE broker, a
# producer address that is not IPv4, a broker or topic config that is not of the class the
# SendGate bound or holds a field of an unexpected type (read at slot offsets, see _put).
# What it does take gives the same record and the same
# reply frame as the Python path (a differential test).
#
# SendFastPath.send_frame does the same from the frame's bytes, before any RemotingCommand
# exists: the broker sets a SendFrameHook per producer connection as the FrameDecoder's
# frame_hook (rmq/remoting/codec.py), which offers it every whole frame, and the connection's
# frame loop hands it the runs of whole frames of a read (SendFrameHook.take_frames: the SENDs
# stored in one call, up to the first frame it does not store). Besides the above it
# declines a frame with the response flag (the connection's response table takes it), a
# ROCKETMQ header with a remark or with text that is not ASCII, a JSON header that
# does not open with its code, a flag or opaque outside int32, a frame without a body, and
# every frame while the broker is not ready or the SEND pool is full (the dispatcher answers
# SYSTEM_BUSY). The broker sets no hook with ACL on (the check needs the command) or with
# sendFastPath=false. A declined frame is decoded and dispatched as any other.
# ---------------------------------------------------------------------------------------------

from cpython.bytes cimport PyBytes_CheckExact, PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize
from cpython.dict cimport PyDict_CheckExact
from cpython.long cimport PyLong_CheckExact
from cpython.object cimport PyObject
from cpython.unicode cimport PyUnicode_CheckExact
from libc.stdint cimport int32_t, int64_t, uint8_t, uint64_t
from libc.string cimport memcpy, memcmp, memset
from rmq._store cimport Appender, RecordBuf, frame_bytes, RecordHead, HOST_V4_LEN
from rmq.common._bytes cimport ascii_decimal, rd16, rd32
from rmq.common.slots cimport rmq_slot_offset, rmq_slot, rmq_slot_i64, rmq_slot_bool
from rmq.protocol._codec cimport H_STR, H_INT, H_BOOL, has_surrogate, send_reply, str_decimal, JsonHead, \
    json_header_scan, map_entry
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from sys import intern as _sys_intern

cdef extern from "time.h" nogil:
    ctypedef long time_t
    cdef struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(int clk_id, timespec* tp)
    int CLOCK_MONOTONIC


cdef extern from "Python.h":
    const Py_ssize_t PY_SSIZE_T_MAX
    PyObject* PyDict_GetItem(object d, object key)
    PyObject* PyDict_GetItemWithError(object d, object key) except? NULL
    Py_ssize_t PyUnicode_Tailmatch(object s, object sub, Py_ssize_t start, Py_ssize_t end,
                                   int direction) except -1
    object PyUnicode_DecodeASCII(const char* s, Py_ssize_t size, const char* errors)
    long long PyLong_AsLongLongAndOverflow(object o, int* overflow) except? -1
    bint PyUnicode_IS_ASCII(object o)
    void* PyUnicode_DATA(object o)
    Py_ssize_t PyUnicode_GET_LENGTH(object o)

cdef extern from "string.h" nogil:
    void* memchr(const void* s, int c, size_t n)

cdef enum:
    _SCAN_STACK = 1024               # JSON headers up to this size are scanned into a stack buffer
    _FLAG_RESPONSE = 1
    _FLAG_ONEWAY = 2
    _PERM_WRITE_BIT = 2
    _TRAN_MASK = 0xC                 # MessageSysFlag TRANSACTION_PREPARED | ROLLBACK bits


cdef inline int64_t _mono_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <int64_t>ts.tv_sec * 1000000000 + ts.tv_nsec


cdef const char* _HEXU = b"0123456789ABCDEF"


cdef class SendFastPath:
    """``SendFastPath(fields, gate, not_allowed, retry_prefix, marks, json_decode=None)``: the
    plain SEND in one call.

    Args:
        fields: the SEND header's fields ``[(attribute, V1 wire name, V2 wire name, kind,
            required, lo, hi)]`` (kind 0 str, 1 int, 2 bool; ``lo``/``hi`` an int's range).
        gate: a ``SendGate``, what is read of the broker (topic table, permission, statistics)
            and the running store's ``Appender`` (the record, queue offset and bookkeeping).
        not_allowed: the topics no producer may send to (Java NOT_ALLOWED_SEND_TOPIC_SET).
        retry_prefix: ``%RETRY%`` (such SENDs go through the retry/DLQ rules).
        marks: property markers that need the Python path (``DELAY\\x01``, ``TRAN_MSG\\x01``).
        json_decode: ``decode(header_bytes)`` → an object with ``code``, ``flag``, ``opaque``
            and ``extFields`` (the remoting layer's JSON header decoder; it raises for what
            it does not take); None (default) declines JSON frames in :meth:`send_frame`.

    Attributes:
        taken: SENDs stored by the fast path so far.
        declined: SENDs handed back to the Python path (by :meth:`send`).
        frames: SENDs stored straight from their frame (:meth:`send_frame`, also in taken).
        scanned: JSON SENDs among ``frames`` whose header was read by the scan, without a
            dict (``json_header_scan``; the others went through ``json_decode``).
        batched: SENDs among ``frames`` taken in a run of frames by one call
            (``SendFrameHook.take_frames``, the connection's frame loop).
    """

    def __init__(self, fields, SendGate gate not None, not_allowed, str retry_prefix, tuple marks,
                 json_decode=None):
        cdef Py_ssize_t i
        cdef bytes w
        fields = list(fields)
        if len(fields) > _SF_MAX_FIELDS:
            raise ValueError("too many header fields")
        self.n = len(fields)
        self.attrs = tuple(f[0] for f in fields)
        self.w1 = tuple(_sys_intern(f[1]) for f in fields)
        self.w2 = tuple(_sys_intern(f[2]) for f in fields)
        for i in range(self.n):
            self.kinds[i] = int(fields[i][3])
            self.required[i] = 1 if fields[i][4] else 0
            self.lo[i] = fields[i][5]
            self.hi[i] = fields[i][6]
        idx = {a: i for i, a in enumerate(self.attrs)}
        self.i_topic = idx["topic"]
        self.i_queue = idx["queue_id"]
        self.i_sys = idx["sys_flag"]
        self.i_born = idx["born_timestamp"]
        self.i_flag = idx["flag"]
        self.i_props = idx["properties"]
        self.i_recon = idx["reconsume_times"]
        self.i_batch = idx["batch"]
        self.gate = gate
        self.not_allowed = frozenset(not_allowed)
        self.retry_prefix = retry_prefix
        self.marks = tuple(m.encode("ascii") for m in marks)
        self.mark_bloom = 0
        for w in self.marks:
            # each a property name and its \x01: found where a \x01 ends it (_has_mark)
            if len(w) < 2 or w[len(w) - 1] != 1 or 1 in w[:len(w) - 1] or 2 in w:
                raise ValueError("a mark must be a property name followed by \\x01")
            if len(w) < 3:
                self.mark_bloom = ~(<uint64_t>0)        # a one-letter name: every \x01 is compared
            else:
                self.mark_bloom |= (<uint64_t>1) << _mark_hash(w[len(w) - 3], w[len(w) - 2])
        self.allowed_topic = None
        self.taken = 0
        self.declined = 0
        self.frames = 0
        self.scanned = 0
        self.batched = 0
        self.json_decode = json_decode
        self.last_topic_b = None
        self.last_topic = None
        self.w1b = tuple(f.encode("ascii") for f in self.w1)
        for i in range(256):
            self.v2_of[i] = -1
        for i in range(self.n):
            w = self.w1b[i]
            if len(w) < 2:
                raise ValueError("a V1 wire name must be longer than one letter")
            self.w1_ptr[i] = PyBytes_AS_STRING(w)
            self.w1_len[i] = len(w)
            w = self.w2[i].encode("ascii")
            if len(w) != 1:
                raise ValueError("a V2 wire name must be one letter")
            self.v2_of[w[0]] = <int>i

    cdef int _read(self, object ext, bint v2, int64_t* vals, PyObject** texts) except -1:
        """1 with the header's values read (ints in ``vals``, texts in ``texts``) under V2's
        names when ``v2`` (code 310) else V1's (code 10), 0 when something is not in its plain
        shape."""
        cdef Py_ssize_t i
        cdef PyObject* vp
        cdef object v
        cdef tuple wires
        cdef uint8_t kind
        cdef long long x
        cdef int overflow
        # by the request code only, as rmq.protocol.headers.message.read_send_header and the ACL check
        # read it (Java parseRequestHeader): the names present never choose
        wires = self.w2 if v2 else self.w1
        for i in range(self.n):
            vp = PyDict_GetItem(ext, wires[i])
            kind = self.kinds[i]
            vals[i] = 0
            texts[i] = NULL
            if vp == NULL or <object>vp is None:
                if self.required[i]:
                    return 0
                continue                                      # (every default used here is 0)
            v = <object>vp
            if kind == H_STR:
                if not PyUnicode_CheckExact(v) or not PyUnicode_IS_ASCII(v):
                    return 0
                texts[i] = vp
            elif kind == H_INT:
                if PyUnicode_CheckExact(v):
                    if not str_decimal(v, &x):
                        return 0
                elif PyLong_CheckExact(v):
                    x = PyLong_AsLongLongAndOverflow(v, &overflow)
                    if overflow:
                        return 0
                else:
                    return 0
                if x < self.lo[i] or x > self.hi[i]:
                    return 0
                vals[i] = x
            else:
                # what the header reader takes as a boolean in its exact forms: true/false,
                # "true"/"false", "1"/"0" (the C++ client's batch and unitMode), "", 1/0
                if v is True or (PyUnicode_CheckExact(v) and (v == "true" or v == "1")) \
                        or (PyLong_CheckExact(v) and v == 1):
                    vals[i] = 1
                elif not (v is False or (PyUnicode_CheckExact(v) and (v == "false" or v == "0" or v == ""))
                          or (PyLong_CheckExact(v) and v == 0)):
                    return 0
        return 1

    def send(self, cmd, born):
        """Store the SEND ``cmd`` from a producer at ``born`` (8 bytes: IPv4 + port); returns
        the reply frame, ``b""`` when stored without a reply (oneway), or None when the
        Python path must handle it (nothing was changed)."""
        cdef int64_t vals[_SF_MAX_FIELDS]
        cdef PyObject* texts[_SF_MAX_FIELDS]    # borrowed from ext
        cdef object ext, body, props, opaque_o
        cdef int64_t t0 = _mono_ns()
        cdef int serialize_type
        cdef int32_t flag, opaque
        if not PyBytes_CheckExact(born) or PyBytes_GET_SIZE(born) != HOST_V4_LEN:
            self.declined += 1
            return None
        code = cmd.code
        ext = cmd.ext_fields
        body = cmd.body
        if (code != 10 and code != 310) or not PyDict_CheckExact(ext) or not PyBytes_CheckExact(body):
            self.declined += 1
            return None
        if not self._read(ext, code == 310, vals, texts):
            self.declined += 1
            return None
        props = <object>texts[self.i_props] if texts[self.i_props] != NULL else ""
        serialize_type = cmd.serialize_type
        # a JSON flag or opaque outside int32 (the Python path answers it in its way)
        if not _int32_of(cmd.flag, &flag) or not _int32_of(cmd.opaque, &opaque):
            self.declined += 1
            return None
        r = self._put(<object>texts[self.i_topic], <const uint8_t*>PyUnicode_DATA(props),
                      PyUnicode_GET_LENGTH(props), <const uint8_t*>PyBytes_AS_STRING(body),
                      PyBytes_GET_SIZE(body), vals, serialize_type, flag, opaque, born, t0)
        if r is None:
            self.declined += 1
        return r

    # -------------------------------------------------------------------------- from the frame
    #
    # A SEND straight from the frame's bytes (Java NettyDecoder → RemotingCommand.decode →
    # SendMessageProcessor.sendMessage, with neither the command nor its extFields map): the
    # header's values are read into C values, the body is written into the CommitLog from the
    # read's buffer. The frame (the length words are checked by FrameDecoder before this runs):
    #
    #   data[hstart-8]                   hstart                      hend              end
    #   +--------+-----------------------+---------------------------+-----------------+
    #   | length | ser_type | header_len | header (JSON or ROCKETMQ) | body (the msg)  |
    #   +--------+-----------------------+---------------------------+-----------------+
    #
    # ROCKETMQ (Java RocketMQSerializable.rocketMQProtocolDecode), offsets from hstart:
    #
    #   0      2     3       5       9      13          17           17+R      21+R
    #   +------+-----+-------+-------+------+-----------+------------+---------+----------------+
    #   | code | lang| version| opaque| flag | remarkLen | remark (R) | extLen  | ext map (E)    |
    #   | i16  | i8  | i16   | i32   | i32  | i32 = R   | UTF-8      | i32 = E |                |
    #   +------+-----+-------+-------+------+-----------+------------+---------+----------------+
    #   ext map = ( keyLen i16 | key | valLen i32 | value )*  over exactly E bytes, every value
    #   a string (a number in decimal, a bool as true/false), a zero-length value the empty
    #   string, a zero-length key an entry that is skipped. Later entries replace earlier ones.
    #
    # Only R = 0 is taken here, and only maps whose keys and values are all ASCII (the reference
    # decodes UTF-8 and may refuse it: anything else goes there, which words the errors).
    #
    # JSON: the header is decoded by the remoting layer's msgspec decoder (the one FrameDecoder
    # uses, handed in as ``json_decode``) and the extFields dict read like ``send``'s; only
    # headers that open with ``{"code":10,`` or ``{"code":310,`` (fastjson's sorted keys) are
    # tried, so that other requests cost one memcmp.

    cdef int _read_map(self, const uint8_t* p, Py_ssize_t pos, Py_ssize_t ext_end, bint v2, bint ascii,
                       int64_t* vals, const uint8_t** tp, Py_ssize_t* tl) except -1:
        """1 with the ROCKETMQ map ``p[pos:ext_end]`` read as ``_read`` reads a dict (V2's names
        when ``v2``; ints in ``vals``, texts as pointer/length in ``tp``/``tl``), 0 when it is
        not plain. ``ascii``: its keys and values are known to be ASCII (``json_header_scan``
        writes nothing else), so they are not looked at again."""
        cdef const uint8_t* wp[_SF_MAX_FIELDS]
        cdef Py_ssize_t wl[_SF_MAX_FIELDS]
        cdef Py_ssize_t i, n = self.n, klen, vlen
        cdef const uint8_t* kp
        cdef const uint8_t* vp
        cdef int f
        cdef uint8_t kind
        cdef long long x
        memset(wp, 0, n * sizeof(const uint8_t*))
        # the naming of the request code (code 310: SendMessageRequestHeaderV2), never the
        # names present: V2's names are one letter, V1's longer (checked in __init__), so an
        # entry of the other naming is passed over by its length (every entry is still checked
        # for its shape and, unless ``ascii``, its bytes)
        while pos < ext_end:
            if not map_entry(p, &pos, ext_end, &kp, &klen, &vp, &vlen):
                return 0
            if not ascii and not (_ascii(kp, klen) and _ascii(vp, vlen)):
                return 0
            if v2:
                if klen == 1:
                    f = self.v2_of[kp[0]]
                    if f >= 0:
                        wp[f] = vp
                        wl[f] = vlen
                continue
            if klen == 1:
                continue
            for i in range(n):
                if self.w1_len[i] == klen and memcmp(self.w1_ptr[i], kp, klen) == 0:
                    wp[i] = vp
                    wl[i] = vlen
                    break
        for i in range(n):
            vals[i] = 0
            tp[i] = wp[i]
            tl[i] = wl[i] if wp[i] != NULL else 0
            if wp[i] == NULL:
                if self.required[i]:
                    return 0
                continue
            kind = self.kinds[i]
            if kind == H_INT:
                if not ascii_decimal(wp[i], wl[i], &x) or x < self.lo[i] or x > self.hi[i]:
                    return 0
                vals[i] = x
            elif kind == H_BOOL:                             # (as _read takes a str)
                if (wl[i] == 4 and memcmp(wp[i], b"true", 4) == 0) or (wl[i] == 1 and wp[i][0] == c'1'):
                    vals[i] = 1
                elif not ((wl[i] == 5 and memcmp(wp[i], b"false", 5) == 0) or (wl[i] == 1 and wp[i][0] == c'0')
                          or wl[i] == 0):
                    return 0
        return 1

    cdef object _topic_str(self, const uint8_t* p, Py_ssize_t n):
        """The topic as a str (ASCII already checked), the last one reused."""
        cdef object last = self.last_topic_b
        if last is not None and PyBytes_GET_SIZE(last) == n and memcmp(PyBytes_AS_STRING(last), p, n) == 0:
            return self.last_topic
        topic = PyUnicode_DecodeASCII(<const char*>p, n, NULL)
        self.last_topic_b = PyBytes_FromStringAndSize(<const char*>p, n)
        self.last_topic = topic
        return topic

    def send_frame(self, data, Py_ssize_t hstart, Py_ssize_t hend, Py_ssize_t end, int ser, bytes born):
        """Store the SEND whose frame is ``data[hstart-8:end]`` (header ``data[hstart:hend]``,
        serialization ``ser``) from a producer at ``born``; returns what :meth:`send` returns.
        The caller has checked the frame's length words and that it is whole."""
        return self.store_frame(data, hstart, hend, end, ser, born)

    cdef object store_frame(self, object data, Py_ssize_t hstart, Py_ssize_t hend, Py_ssize_t end, int ser,
                            bytes born):
        cdef RecordBuf b = None
        cdef const uint8_t* p
        cdef Py_ssize_t size
        b = frame_bytes(data, &p, &size)      # (b holds a bytearray's buffer until we return)
        return self.store_at(data, p, size, hstart, hend, end, ser, born)

    cdef object store_at(self, object data, const uint8_t* p, Py_ssize_t size, Py_ssize_t hstart,
                         Py_ssize_t hend, Py_ssize_t end, int ser, bytes born):
        """``store_frame`` with ``data``'s bytes at ``p[:size]`` (held by the caller)."""
        cdef int64_t vals[_SF_MAX_FIELDS]
        cdef const uint8_t* tp[_SF_MAX_FIELDS]
        cdef Py_ssize_t tl[_SF_MAX_FIELDS]
        cdef PyObject* texts[_SF_MAX_FIELDS]
        cdef int64_t t0 = _mono_ns()
        cdef Py_ssize_t hl = hend - hstart, ext_len, blen = end - hend
        cdef int32_t opaque, flag32
        cdef int flag, code
        cdef object h, ext, props, topic, r
        cdef JsonHead jh
        cdef uint8_t stack[_SCAN_STACK]
        cdef uint8_t* scratch
        if hstart < 0 or hl < 0 or blen <= 0 or end > size or PyBytes_GET_SIZE(born) != HOST_V4_LEN:
            return None                    # (no body: the command's body is None, see send)
        p = p + hstart
        if not _is_send_header(p, hl, ser):
            return None
        if ser == 1:
            if hl < 21:
                return None
            opaque = rd32(p + 5)
            flag = rd32(p + 9)
            if flag & _FLAG_RESPONSE or rd32(p + 13) != 0:     # a response; a remark
                return None
            ext_len = rd32(p + 17)
            if ext_len < 0 or ext_len > hl - 21 \
                    or not self._read_map(p, 21, 21 + ext_len, rd16(p) == 310, False, vals, tp, tl):
                return None
            return self._put(self._topic_str(tp[self.i_topic], tl[self.i_topic]),
                             tp[self.i_props] if tp[self.i_props] != NULL else <const uint8_t*>b"",
                             tl[self.i_props], p + hl, blen, vals, 1, flag, opaque, born, t0)
        # JSON: the common shape read from the bytes (json_header_scan: numbers into C values,
        # extFields into a ROCKETMQ-form map read by _read_map as the binary header's), anything
        # else through the general decoder below
        if hl <= _SCAN_STACK:
            scratch = stack
        else:
            scratch = <uint8_t*>PyMem_Malloc(hl)
            if scratch == NULL:
                raise MemoryError()
        try:
            ext_len = json_header_scan(p, hl, &jh, scratch, hl)
            if ext_len >= 0 and (jh.code == 10 or jh.code == 310) \
                    and -2147483648 <= jh.flag <= 2147483647 and -2147483648 <= jh.opaque <= 2147483647 \
                    and not (jh.flag & _FLAG_RESPONSE) \
                    and self._read_map(scratch, 0, ext_len, jh.code == 310, True, vals, tp, tl):
                r = self._put(self._topic_str(tp[self.i_topic], tl[self.i_topic]),
                              tp[self.i_props] if tp[self.i_props] != NULL else <const uint8_t*>b"",
                              tl[self.i_props], p + hl, blen, vals, 0, <int>jh.flag, <int32_t>jh.opaque,
                              born, t0)
                if r is not None:
                    self.scanned += 1
                return r                            # (declined: the decoder's values are the same)
        finally:
            if scratch != stack:
                PyMem_Free(scratch)
        if self.json_decode is None:
            return None
        try:
            h = self.json_decode(data[hstart:hend])
        except Exception:                  # the reference decoder words what is wrong
            return None
        code_o = h.code
        ext = h.extFields
        if not PyLong_CheckExact(code_o) or (code_o != 10 and code_o != 310) or not PyDict_CheckExact(ext) \
                or not _int32_of(h.flag, &flag32) or not _int32_of(h.opaque, &opaque):
            return None
        flag = flag32
        if flag & _FLAG_RESPONSE:        # the connection's response table takes it
            return None
        if not self._read(ext, code_o == 310, vals, texts):
            return None
        props = <object>texts[self.i_props] if texts[self.i_props] != NULL else ""
        topic = <object>texts[self.i_topic]
        return self._put(topic, <const uint8_t*>PyUnicode_DATA(props), PyUnicode_GET_LENGTH(props),
                         p + hl, blen, vals, 0, flag, opaque, born, t0)

    def frame_hook(self, born, pool):
        """The per-connection hook ``hook(data, hstart, hend, end, ser) -> bytes | None`` for
        ``FrameDecoder.frame_hook`` (a producer at ``born``), or None when ``born`` is not an
        IPv4 address. No store bound to the gate (the broker is not ready) or ``pool.full``
        declines every frame (the
        dispatcher then answers SYSTEM_BUSY as for any request)."""
        if not PyBytes_CheckExact(born) or PyBytes_GET_SIZE(born) != HOST_V4_LEN:
            return None
        return SendFrameHook(self, born, pool)

    cdef bint _has_mark(self, const uint8_t* p, Py_ssize_t n) noexcept:
        """Whether one of ``marks`` (names followed by \x01) occurs in ``p[:n]``, as ``memmem``
        would find it (and as send_back.before_store's ``m in props_str`` does): one pass over
        the \x01 bytes; at each, the two bytes before it are looked up in ``mark_bloom`` (the
        marks' last two name bytes, hashed into 64 bits), and only a hit compares the marks.
        The common names (UNIQ_KEY, WAIT, TAGS, KEYS) miss, so a plain message costs one
        ``memchr`` per pair and no ``memcmp``."""
        cdef const uint8_t* q = p
        cdef const uint8_t* end = p + n
        cdef const uint8_t* hit
        cdef Py_ssize_t at, ml
        cdef bytes m
        while q < end:
            hit = <const uint8_t*>memchr(q, 1, end - q)
            if hit == NULL:
                return False
            at = hit - p + 1                        # the mark would end here, \x01 included
            if at < 3 or (self.mark_bloom >> _mark_hash(hit[-2], hit[-1])) & 1:
                for m in self.marks:
                    ml = PyBytes_GET_SIZE(m)
                    if ml <= at and memcmp(p + at - ml, PyBytes_AS_STRING(m), ml) == 0:
                        return True
            q = hit + 1
        return False

    cdef bint _topic_allowed(self, object topic) except -1:
        """Whether a producer may send to ``topic`` here (not one of Java's
        NOT_ALLOWED_SEND_TOPIC_SET, not a ``%RETRY%`` topic: those take the retry/DLQ rules of
        the Python path). Both depend on the name only and are fixed: the last topic that passed
        is remembered by identity (``_topic_str`` hands the same str for the same bytes)."""
        if topic is self.allowed_topic:
            return True
        if topic in self.not_allowed or PyUnicode_Tailmatch(topic, self.retry_prefix, 0, PY_SSIZE_T_MAX, -1):
            return False
        self.allowed_topic = topic
        return True

    cdef object _put(self, object topic, const uint8_t* pp, Py_ssize_t plen, const uint8_t* body,
                     Py_ssize_t blen, int64_t* vals, int serialize_type, int flag, int32_t opaque,
                     object born, int64_t t0):
        """Java msgCheck, then the store's ``Appender.put_plain``, for a header already read:
        the reply frame, ``b""`` or None (declined, nothing changed). ``pp``/``body`` stay
        valid for the call; ``pp`` is ASCII (its UTF-8 is its data).

        The broker config's and the topic config's fields are read in their ``__slots__`` at
        the offsets ``SendGate`` bound (rmq/common/slots.pxd), every SEND (they change at run
        time: UPDATE_BROKER_CONFIG sets them on the same object, a topic update puts a new
        TopicConfig in the table); an object of another class or a slot holding anything but
        the exact type declines to the Python path, which reads them as attributes."""
        cdef SendGate gate = self.gate
        cdef Appender appender = gate.appender
        cdef object tc, bc, region, prefix, r
        cdef PyObject* p
        cdef int64_t queue_id, sys_flag, phy, broker_perm, perm, write_nums, read_nums, tcode
        cdef int trace_on, check
        cdef int64_t out[3]
        cdef Py_ssize_t i
        cdef RecordHead h
        cdef char mid[32]
        cdef const uint8_t* pref
        if appender is None:                               # no store running
            return None
        queue_id = vals[self.i_queue]
        sys_flag = vals[self.i_sys]
        if vals[self.i_batch] or queue_id < 0 or sys_flag & _TRAN_MASK:
            return None
        if (serialize_type != 0 and serialize_type != 1) or self._has_mark(pp, plen) \
                or not self._topic_allowed(topic):
            return None
        # the broker config (BrokerConfig): the region (MSG_REGION of the reply, written as
        # UTF-8: a lone surrogate cannot be), the broker's permission (Java msgCheck:
        # PermName.isWriteable(getBrokerPermission())), the trace switch (TRACE_ON)
        bc = gate.broker_config
        if type(bc) is not gate.broker_config_type:
            return None
        p = rmq_slot(bc, gate.o_region)
        if p == NULL or not PyUnicode_CheckExact(<object>p):
            return None
        region = <object>p
        if not PyUnicode_IS_ASCII(region) and has_surrogate(region):
            return None
        if not rmq_slot_i64(bc, gate.o_broker_perm, &broker_perm) or not (broker_perm & _PERM_WRITE_BIT):
            return None
        trace_on = rmq_slot_bool(bc, gate.o_trace)
        if trace_on < 0:
            return None
        # Java msgCheck: the topic's config, writable, the queue id in range
        p = PyDict_GetItemWithError(gate.topics, topic)  # (no error to keep aside, as GetItem does)
        if p == NULL:
            return None
        tc = <object>p
        if type(tc) is not gate.topic_config_type or not rmq_slot_i64(tc, gate.o_perm, &perm) \
                or not rmq_slot_i64(tc, gate.o_write_nums, &write_nums) \
                or not rmq_slot_i64(tc, gate.o_read_nums, &read_nums) \
                or not rmq_slot_i64(tc, gate.o_type_code, &tcode):
            return None
        if not (perm & _PERM_WRITE_BIT) or queue_id >= (write_nums if write_nums > read_nums else read_nums):
            return None
        # typed topics (Java 5 ProducerProcessor's message-type check): one byte per topic,
        # the properties scanned only when the topic is typed; a mismatch goes to the Python
        # path, which words the refusal (send.type_refusal)
        if tcode:
            check = rmq_slot_bool(bc, gate.o_type_check)
            if check < 0 or tcode < 0 or tcode > 6 or (check and not _type_ok(<int>tcode, pp, plen)):
                return None
        h.flag = <int32_t>vals[self.i_flag]
        h.sys_flag = <int32_t>sys_flag
        h.born_timestamp = vals[self.i_born]
        h.born_host = PyBytes_AS_STRING(born)
        h.reconsume_times = <int32_t>vals[self.i_recon]
        if not appender.put_plain(topic, <int32_t>queue_id, &h, body, blen, pp, plen, out):
            return None
        # -- stored -----------------------------------------------------------------------------
        phy = out[0]
        self.taken += 1
        # the statistics into the C counter block, folded into the broker's by stats.fold()
        gate.counters.put(topic, blen, _mono_ns() - t0)
        if flag & _FLAG_ONEWAY:
            return b""                                    # (Java sendOneway: nobody waits)
        # the reply: msgId = offsetMsgId (store host hex + %016X of the offset)
        prefix = appender.id_prefix
        pref = <const uint8_t*>PyUnicode_DATA(prefix)
        memcpy(mid, pref, 16)
        for i in range(16):
            mid[16 + i] = _HEXU[(phy >> (60 - 4 * i)) & 0xF]
        r = send_reply(serialize_type, 0, opaque, None, mid, 32, queue_id, out[1], region, trace_on)
        if r is None:  # (the region was checked above, before anything was stored)
            raise ValueError("region cannot be written as UTF-8")
        return r


cdef class SendGate:
    """``SendGate(topics, broker_config, stats, broker_config_type, topic_config_type)``: what
    the SEND fast path reads of the broker.

    Args:
        topics: the topic table, ``{topic: config}`` with ``perm``, ``write_queue_nums``,
            ``read_queue_nums`` and ``type_code`` (the live dict: topics created or changed
            are seen).
        broker_config: read per SEND for ``broker_permission``, ``region_id``, ``trace_on``
            and ``enable_topic_message_type_check`` (all may be updated at run time).
        stats: the broker's statistics; the fast path counts into ``counters`` instead,
            which the broker registers with ``stats.add_fold`` (send_fast.make_fast_path).
        broker_config_type, topic_config_type: the classes (``BrokerConfig``,
            ``TopicConfig``) whose ``__slots__`` hold those fields, read at their offsets
            (rmq/common/slots.pxd); TypeError when one is not such a slot. A broker config
            or topic config of any other class (a subclass too), or a slot holding anything
            but an exact int, bool or str, declines the SEND to the Python path.

    Attributes:
        counters: the :class:`PutCounters` of the SENDs stored here.
        appender: the running store's ``Appender`` (``MessageStore.appender``), set by the
            broker once it is ready and cleared when it stops; None declines every SEND (a
            frame then goes to the dispatcher, which answers SYSTEM_BUSY).
    """

    def __init__(self, dict topics not None, broker_config, stats, type broker_config_type not None,
                 type topic_config_type not None):
        self.topics = topics
        self.broker_config = broker_config
        self.stats = stats
        self.appender = None
        self.counters = PutCounters()
        self.o_region = rmq_slot_offset(broker_config_type, "region_id")
        self.o_broker_perm = rmq_slot_offset(broker_config_type, "broker_permission")
        self.o_type_check = rmq_slot_offset(broker_config_type, "enable_topic_message_type_check")
        self.o_trace = rmq_slot_offset(broker_config_type, "trace_on")
        self.o_perm = rmq_slot_offset(topic_config_type, "perm")
        self.o_write_nums = rmq_slot_offset(topic_config_type, "write_queue_nums")
        self.o_read_nums = rmq_slot_offset(topic_config_type, "read_queue_nums")
        self.o_type_code = rmq_slot_offset(topic_config_type, "type_code")
        self.broker_config_type = broker_config_type
        self.topic_config_type = topic_config_type


cdef class PullCounters:
    """The PULL path's statistics as C counters (Java incGroupGetNums, incGroupGetSize,
    incBrokerGetNums, StoreStatsService's getMessageTimesTotalFound/Miss and get time, RocketMQ
    5's RPC latency): one call per pull instead of three Python calls; ``take()`` hands what
    was counted to ``BrokerStatsManager.fold`` as :class:`PutCounters` does (durations by whole
    milliseconds, ``ceil`` for the RPC buckets; 64 ms or more kept as nanoseconds).

    Attributes:
        pending: pulls counted since the last take.
    """

    def __init__(self):
        self.topics = {}
        self.slow = []
        self.pending = 0
        self.misses = 0
        self.max_ms = 0
        self.rpc_total_ns = 0
        cdef int i
        for i in range(_PC_MS):
            self.ceil_ms[i] = 0

    cdef inline void _time(self, int64_t get_ns) except *:
        cdef int64_t fl
        self.pending += 1
        if get_ns < 0:
            get_ns = 0
        fl = get_ns // 1000000
        if fl > self.max_ms:
            self.max_ms = fl
        if fl >= _PC_MS - 1:
            self.slow.append(get_ns)
            return
        self.ceil_ms[fl + (1 if get_ns % 1000000 else 0)] += 1
        self.rpc_total_ns += get_ns

    cpdef void found(self, str group, str topic, int64_t nums, int64_t size, int64_t get_ns) except *:
        """A pull of ``group`` answered with ``nums`` messages of ``size`` bytes from ``topic``,
        its store read taking ``get_ns``."""
        cdef PyObject* p = PyDict_GetItem(self.topics, topic)
        cdef dict groups
        cdef _TopicCount c
        if p == NULL:
            groups = {}
            self.topics[topic] = groups
        else:
            groups = <dict>p
        p = PyDict_GetItem(groups, group)
        if p == NULL:
            c = _TopicCount()
            groups[group] = c
        else:
            c = <_TopicCount>p
        c.nums += nums
        c.size += size
        c.times += 1
        self._time(get_ns)

    cpdef void missed(self, int64_t get_ns) except *:
        """A pull that found no message, its store read taking ``get_ns``."""
        self.misses += 1
        self._time(get_ns)

    def take(self):
        """``(found, misses, max_ms, ceil_ms, rpc_total_ns, slow_ns)`` counted since the last
        take (``found``: ``[(group, topic, nums, size, times)]``), or None when nothing was
        counted; the counters restart."""
        cdef int i
        cdef _TopicCount c
        if self.pending == 0:
            return None
        found = [(g, t, c.nums, c.size, c.times) for t, groups in self.topics.items() for g, c in groups.items()]
        ceil_ms = [(i, self.ceil_ms[i]) for i in range(_PC_MS) if self.ceil_ms[i]]
        out = (found, self.misses, self.max_ms, ceil_ms, self.rpc_total_ns, self.slow)
        self.topics = {}
        self.slow = []
        self.pending = 0
        self.misses = 0
        self.max_ms = 0
        self.rpc_total_ns = 0
        for i in range(_PC_MS):
            self.ceil_ms[i] = 0
        return out


cdef class _TopicCount:
    """One key's counts since the last take (PutCounters, PullCounters)."""


cdef class PutCounters:
    """The SEND fast path's statistics as C counters (Java BrokerStatsManager.incTopicPutNums,
    incTopicPutSize, incBrokerPutNums and StoreStatsService's put time, RocketMQ 5's RPC
    latency): ``put`` costs a dict lookup and a few additions instead of three Python calls per
    SEND; ``take()`` hands what was counted since the last take to ``BrokerStatsManager.fold``
    (every tick and before any read of the statistics), which applies the Python rules (the
    buckets, the item bounds) to it.

    Durations are kept by whole milliseconds: the store's buckets by ``floor(ms)``
    (``record_put_time``'s argument), the RPC latency buckets (bounds that are whole ms) by
    ``ceil(ms)``, which lands in the same bucket as the exact duration; a put of 64 ms or more
    is kept as its nanoseconds.

    Attributes:
        pending: puts counted since the last take.
    """

    def __init__(self):
        self.topics = {}
        self.slow = []
        self.pending = 0
        self.rpc_total_ns = 0
        cdef int i
        for i in range(_PC_MS):
            self.floor_ms[i] = 0
            self.ceil_ms[i] = 0

    cdef void put(self, object topic, int64_t size, int64_t put_ns) except *:
        cdef PyObject* p
        cdef _TopicCount c
        cdef int64_t fl, ce
        if topic is self.last_topic:                   # (the fast path's topic str is reused)
            c = self.last_count
        else:
            p = PyDict_GetItem(self.topics, topic)
            if p == NULL:
                c = _TopicCount()
                self.topics[topic] = c
            else:
                c = <_TopicCount>p
            self.last_topic = topic
            self.last_count = c
        c.nums += 1
        c.size += size
        c.times += 1
        self.pending += 1
        if put_ns < 0:
            put_ns = 0
        fl = put_ns // 1000000
        if fl >= _PC_MS - 1:
            self.slow.append(put_ns)
            return
        ce = fl + (1 if put_ns % 1000000 else 0)
        self.floor_ms[fl] += 1
        self.ceil_ms[ce] += 1
        self.rpc_total_ns += put_ns

    def count(self, topic, int64_t size, int64_t put_ns):
        """``put`` for Python callers (tests)."""
        self.put(topic, size, put_ns)

    def take(self):
        """``(topics, floor_ms, ceil_ms, rpc_total_ns, slow_ns)`` counted since the last take
        (``topics``: ``[(topic, nums, size, times)]``; ``floor_ms``/``ceil_ms``: ``[(ms, n)]``
        of the fast puts; ``rpc_total_ns`` their nanoseconds; ``slow_ns`` the durations of
        the puts of 64 ms or more), or None when nothing was counted; the counters restart."""
        cdef int i
        cdef _TopicCount c
        if self.pending == 0:
            return None
        topics = [(t, c.nums, c.size, c.times) for t, c in self.topics.items()]
        floor_ms = [(i, self.floor_ms[i]) for i in range(_PC_MS) if self.floor_ms[i]]
        ceil_ms = [(i, self.ceil_ms[i]) for i in range(_PC_MS) if self.ceil_ms[i]]
        out = (topics, floor_ms, ceil_ms, self.rpc_total_ns, self.slow)
        self.topics = {}
        self.last_topic = None
        self.last_count = None
        self.slow = []
        self.pending = 0
        self.rpc_total_ns = 0
        for i in range(_PC_MS):
            self.floor_ms[i] = 0
            self.ceil_ms[i] = 0
        return out


cdef inline int _mark_hash(uint8_t a, uint8_t b) noexcept nogil:
    """The bit of ``SendFastPath.mark_bloom`` for a name ending in the bytes ``a``, ``b``."""
    return (a * 7 + b) & 63


cdef inline bint _ascii(const uint8_t* p, Py_ssize_t n) noexcept nogil:
    """Whether ``p[:n]`` is ASCII: eight bytes at a time (a header's values are a few to a few
    hundred bytes; byte by byte this was a third of ``_read_map``)."""
    cdef uint64_t acc = 0, w
    cdef Py_ssize_t i = 0
    while i + 8 <= n:
        memcpy(&w, p + i, 8)
        acc |= w
        i += 8
    while i < n:
        acc |= p[i]
        i += 1
    return (acc & 0x8080808080808080u) == 0


cdef inline bint _key_is(const uint8_t* k, Py_ssize_t n, const char* name, Py_ssize_t m) noexcept:
    return n == m and memcmp(k, name, m) == 0


cdef bint _type_ok(int declared, const uint8_t* p, Py_ssize_t n) noexcept:
    """Whether a message with properties ``p[:n]`` may go to a topic of type ``declared``
    (rmq.common.topic_attributes: 1 NORMAL, 2 FIFO, 3 DELAY, 4 TRANSACTION, 5 MIXED,
    6 UNSPECIFIED), as rmq.common.topic_attributes.message_type_of_properties and
    check_message_type decide it: pairs read as Java 5 string2messageProperties (an empty name
    or value is no pair), TRANSFER_FLAG not checked, TRAN_MSG=true TRANSACTION, a delay or
    timer property DELAY, __SHARDINGKEY FIFO, else NORMAL."""
    cdef Py_ssize_t i = 0, e, k, kl
    cdef bint tran = False, delay = False, fifo = False
    cdef int actual
    if declared == 5:
        return True
    while i < n:
        e = i
        while e < n and p[e] != 2:
            e += 1
        k = i
        while k < e and p[k] != 1:
            k += 1
        if k > i and k < e - 1:
            kl = k - i
            if _key_is(p + i, kl, b"TRANSFER_FLAG", 13):
                return True
            elif _key_is(p + i, kl, b"TRAN_MSG", 8):
                tran = e - k - 1 == 4 and memcmp(p + k + 1, b"true", 4) == 0
            elif _key_is(p + i, kl, b"DELAY", 5) or _key_is(p + i, kl, b"TIMER_DELIVER_MS", 16) \
                    or _key_is(p + i, kl, b"TIMER_DELAY_SEC", 15) or _key_is(p + i, kl, b"TIMER_DELAY_MS", 14) \
                    or _key_is(p + i, kl, b"__STARTDELIVERTIME", 18):
                delay = True
            elif _key_is(p + i, kl, b"__SHARDINGKEY", 13):
                fifo = True
        i = e + 1
    actual = 4 if tran else (3 if delay else (2 if fifo else 1))
    return actual == declared


cdef inline bint _int32_of(object o, int32_t* out) except -1:
    """True with ``out`` set when ``o`` is an exact int within int32."""
    cdef int overflow = 0
    cdef long long x
    if not PyLong_CheckExact(o):
        return False
    x = PyLong_AsLongLongAndOverflow(o, &overflow)
    if overflow or x < -2147483648 or x > 2147483647:
        return False
    out[0] = <int32_t>x
    return True


cdef inline bint _is_send_header(const uint8_t* p, Py_ssize_t hl, int ser) noexcept:
    """Whether a header (``hl`` bytes at ``p``) is a SEND_MESSAGE (10) or SEND_MESSAGE_V2 (310)
    request's: ROCKETMQ's first i16, or a JSON header that opens with its code (fastjson
    writes the keys sorted, so ``code`` comes first)."""
    cdef int code
    if ser == 1:
        if hl < 2:
            return False
        code = rd16(p)
        return code == 10 or code == 310
    if ser == 0:
        return hl >= 12 and (memcmp(p, b'{"code":10,', 11) == 0 or memcmp(p, b'{"code":310,', 12) == 0)
    return False


cdef class SendFrameHook:
    """One producer connection's SEND frame hook (see ``SendFastPath.frame_hook``).

    Attributes:
        taken: frames this connection's SENDs stored and answered here.
    """

    def __init__(self, SendFastPath fast, bytes born, pool):
        self.fast = fast
        self.born = born
        self.pool = pool
        self.taken = 0

    def __call__(self, data, Py_ssize_t hstart, Py_ssize_t hend, Py_ssize_t end, int ser):
        cdef object r
        # most frames on a consumer's connection are pulls and heartbeats: one look at the
        # code before anything else (the decoder's bytearray is looked at by store_frame)
        if PyBytes_CheckExact(data) and 0 <= hstart <= hend <= PyBytes_GET_SIZE(data) \
                and not _is_send_header(<const uint8_t*>PyBytes_AS_STRING(data) + hstart, hend - hstart, ser):
            return None
        # Java NettyRemotingAbstract.processRequestCommand: rejectRequest (the broker is not
        # ready) and a full executor answer SYSTEM_BUSY; the dispatcher does that.
        if self.fast.gate.appender is None or self.pool.full:
            return None
        r = self.fast.store_frame(data, hstart, hend, end, ser, self.born)
        if r is not None:
            self.taken += 1
            self.fast.frames += 1
        return r

    def take_frames(self, data, Py_ssize_t pos, Py_ssize_t max_frames, Py_ssize_t stop,
                    Py_ssize_t max_frame_length, list out not None, Py_ssize_t room):
        """The frame loop's SENDs in one call (the connection's frame loop, ``FrameHook.take_frames``): the whole
        frames at ``data[pos:]`` that this hook stores, one after another, their replies
        appended to ``out`` -- at most ``max_frames`` frames, none starting at or after
        ``stop``, none after the replies reach ``room`` bytes. Stops before any other frame:
        an incomplete one, one the decoder refuses (it raises for it), one that is not a SEND
        and one the fast path declines. Returns ``(pos, frames, reply_bytes, why)``: the
        position after the frames taken, their count, the bytes appended to ``out``, and why
        it stopped there: 0 a limit or a frame that is incomplete or refused, 1 the fast path
        declined the SEND at ``pos`` (the caller decodes it without asking this hook again),
        2 the frame at ``pos`` is not a SEND or the broker takes none now (a consumer's
        connection: the caller stops asking until the hook stores a frame again). Python's per-frame work (``FrameDecoder.next_item``, the
        hook call, ``send_response_frame``) was a quarter of a JSON SEND's instructions
        (bench/README.md, "Instruction counts")."""
        cdef RecordBuf b = None
        cdef const uint8_t* p
        cdef Py_ssize_t size, hstart, hend, end, n = 0, nb = 0
        cdef int32_t length, word
        cdef int ser
        cdef int why = 0
        cdef bint ready = False
        cdef SendFastPath fast = self.fast
        cdef object r
        b = frame_bytes(data, &p, &size)
        while n < max_frames and pos < stop and nb < room and 0 <= pos and size - pos >= 8:
            # the decoder's checks (FrameDecoder.next_item): what fails them is left to it
            length = rd32(p + pos)
            word = rd32(p + pos + 4)
            ser = (word >> 24) & 0xFF
            if length < 4 or length > max_frame_length or (word & 0xFFFFFF) > length - 4 or ser > 1:
                break
            end = pos + 4 + <Py_ssize_t>length
            if end > size:
                break
            hstart = pos + 8
            hend = hstart + (word & 0xFFFFFF)
            if not _is_send_header(p + hstart, hend - hstart, ser):
                why = 2
                break
            if not ready:
                # Java NettyRemotingAbstract.processRequestCommand: rejectRequest and a full
                # executor are the dispatcher's (SYSTEM_BUSY); neither changes while this
                # runs. Asked at the first SEND only: a consumer's connection sends none.
                if fast.gate.appender is None or self.pool.full:
                    why = 2
                    break
                ready = True
            r = fast.store_at(data, p, size, hstart, hend, end, ser, self.born)
            if r is None:
                why = 1
                break
            self.taken += 1
            fast.frames += 1
            fast.batched += 1
            n += 1
            pos = end
            if PyBytes_GET_SIZE(r):
                out.append(r)
                nb += PyBytes_GET_SIZE(r)
        return pos, n, nb, why

