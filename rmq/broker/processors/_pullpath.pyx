# cython: language_level=3, cdivision=True
"""rmq.broker.processors._pullpath: the plain PULL_MESSAGE answered straight from its frame
bytes (built by pull_fast.py; the Python processor is rmq/broker/processors/pull.py)."""
# ---------------------------------------------------------------------------------------------
# The common pull (Java PullMessageProcessor.processRequest for a consumer reading messages that
# are there) before any RemotingCommand exists, as the SEND frame hook does for the plain SEND
# (_sendpath.pyx): the header's values are read from the frame's bytes into C values, the
# broker's checks read its tables, the store's one reader (MessageStore.get_message) scans the
# ConsumeQueue and copies the records into one bytes, and the reply header and the records are
# written into one frame by the protocol layer's one PULL reply writer (_codec.pull_reply).
# The statistics go to the processor's PullCounters, the consumer offset the pull carries is
# committed as the Python path commits it.
#
# PullFastPath.pull_frame returns None, before changing anything the Python path would see,
# for every pull it does not answer; the frame is then decoded and dispatched to
# PullMessageProcessor, which words every refusal and keeps every special case:
#   - a frame that is a response or oneway, a ROCKETMQ remark, a JSON header outside
#     json_header_scan's shape, a map entry or value that is not ASCII, a header value not in
#     its plain shape (a number that is not -?[0-9]{1,18} or outside its declared range, a
#     missing required field);
#   - the broker not ready or not readable, a subscription group not in the table (auto-
#     creation) or not consuming, a topic not in the table or not readable, a queue id out of
#     range, a pending offset reset of the broker;
#   - a subscription that is not a TAG expression (SQL92 and class filters), one whose filter
#     is not parsed yet, or (from the heartbeats) a group or topic the heartbeats do not know, a
#     broadcast group that may not consume so, a subVersion newer than the heartbeats';
#   - whatever the store answers other than FOUND with records copied into one bytes (an empty
#     queue, a long poll, an offset to correct, records sent as views of big messages). The
#     store was read with count=False then: nothing counted, so the Python path's own read
#     counts the pull once.
#
# The frame (the length words are checked by FrameDecoder before this runs):
#
#   data[hstart-8]                   hstart                      hend
#   +--------+-----------------------+---------------------------+
#   | length | ser_type | header_len | header (JSON or ROCKETMQ) |   (a pull has no body)
#   +--------+-----------------------+---------------------------+
#
# ROCKETMQ (Java RocketMQSerializable.rocketMQProtocolDecode), offsets from hstart:
#
#   0      2     3        5       9      13          17           17+R      21+R
#   +------+-----+--------+-------+------+-----------+------------+---------+----------------+
#   | code | lang| version| opaque| flag | remarkLen | remark (R) | extLen  | ext map (E)    |
#   | i16  | i8  | i16    | i32   | i32  | i32 = R   | UTF-8      | i32 = E |                |
#   +------+-----+--------+-------+------+-----------+------------+---------+----------------+
#   ext map = ( keyLen i16 | key | valLen i32 | value )*  over exactly E bytes, every value a
#   string; later entries replace earlier ones; names not of the pull header are skipped.
#
# JSON: json_header_scan (_codec.pyx) reads the numbers into C values and extFields into a
# map of the same ROCKETMQ form, read by _read_map as the binary header's.
# ---------------------------------------------------------------------------------------------

from cpython.bytes cimport PyBytes_CheckExact, PyBytes_AS_STRING, PyBytes_GET_SIZE, PyBytes_FromStringAndSize
from cpython.mem cimport PyMem_Malloc, PyMem_Free
from cpython.object cimport PyObject
from libc.stdint cimport int32_t, int64_t, uint8_t
from libc.string cimport memcmp
from rmq._store cimport RecordBuf, frame_bytes
from rmq.common._bytes cimport ascii_decimal, rd16, rd32
from rmq.protocol._codec cimport H_STR, H_INT, JsonHead, json_header_scan, map_entry, pull_reply
from rmq.broker.processors._sendpath cimport PullCounters

cdef extern from "time.h" nogil:
    ctypedef long time_t
    cdef struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(int clk_id, timespec* tp)
    int CLOCK_MONOTONIC

cdef extern from "Python.h":
    PyObject* PyDict_GetItem(object d, object key)
    object PyUnicode_DecodeASCII(const char* s, Py_ssize_t size, const char* errors)
    int PyObject_IsTrue(object o) except -1


cdef enum:
    _PF_MAX_FIELDS = 16
    _SCAN_STACK = 1024
    _FLAG_RESPONSE = 1
    _FLAG_ONEWAY = 2
    _PULL_MESSAGE = 11
    _SUCCESS = 0
    _PERM_READ = 4                      # PermName.PERM_READ
    _SYS_COMMIT_OFFSET = 1              # PullSysFlag
    _SYS_SUBSCRIPTION = 4
    _SYS_CLASS_FILTER = 8
    _BROADCASTING = 0                   # MessageModel.BROADCASTING


cdef inline int64_t _mono_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <int64_t>ts.tv_sec * 1000000000 + ts.tv_nsec


cdef inline bint _is_pull_header(const uint8_t* p, Py_ssize_t hl, int ser) noexcept:
    """Whether a header is a PULL_MESSAGE (11) request's: ROCKETMQ's first i16, or a JSON header
    that opens with its code (fastjson writes the keys sorted: ``code`` first)."""
    if ser == 1:
        return hl >= 2 and rd16(p) == _PULL_MESSAGE
    return ser == 0 and hl >= 11 and memcmp(p, b'{"code":11,', 11) == 0


cdef inline bint _is_tag_type(const uint8_t* p, Py_ssize_t n) noexcept:
    """rmq.broker.filter.is_tag_type of ASCII bytes: none, empty, or TAG in any case."""
    return p == NULL or n == 0 or (n == 3 and (p[0] | 0x20) == c't' and (p[1] | 0x20) == c'a'
                                   and (p[2] | 0x20) == c'g')


cdef class PullFastPath:
    """``PullFastPath(fields, controller, processor)``: the plain pull answered from its frame.

    Args:
        fields: the PULL header's fields ``[(attribute, wire name, kind, required, lo, hi)]``
            (kind 0 str, 1 int; ``lo``/``hi`` an int's range), from its declaration
            (``pull_fast.header_spec``).
        controller: the broker (its tables, config, role, offsets, pending resets).
        processor: the ``PullMessageProcessor`` whose filter cache and ``PullCounters`` are
            shared (one parse per expression, one set of statistics).

    Attributes:
        store: the running store (``MessageStore``), bound once the broker is ready; None
            declines every pull.
        taken: pulls answered here.
        declined: pulls of code 11 handed to the Python path.
    """
    cdef tuple attrs, wires
    cdef bytes kinds, required
    cdef int64_t lo[_PF_MAX_FIELDS]
    cdef int64_t hi[_PF_MAX_FIELDS]
    cdef const char* w_ptr[_PF_MAX_FIELDS]
    cdef Py_ssize_t w_len[_PF_MAX_FIELDS]
    cdef Py_ssize_t n
    cdef Py_ssize_t i_group, i_topic, i_queue, i_offset, i_max, i_sys, i_commit, i_sub, i_subver, i_expr
    cdef object controller, broker_config, filters, last_group_b, last_group, last_topic_b, last_topic
    cdef object last_sub_b, last_sub
    cdef PullCounters counters
    cdef public object store
    cdef object store_counts
    cdef public Py_ssize_t taken, declined

    def __init__(self, fields, controller, processor):
        cdef Py_ssize_t i
        cdef bytes w
        fields = list(fields)
        if len(fields) > _PF_MAX_FIELDS:
            raise ValueError("too many header fields")
        self.n = len(fields)
        self.attrs = tuple(f[0] for f in fields)
        self.wires = tuple(f[1].encode("ascii") for f in fields)
        self.kinds = bytes(int(f[2]) for f in fields)
        self.required = bytes(1 if f[3] else 0 for f in fields)
        for i in range(self.n):
            w = self.wires[i]
            self.w_ptr[i] = PyBytes_AS_STRING(w)
            self.w_len[i] = len(w)
            self.lo[i] = fields[i][4]
            self.hi[i] = fields[i][5]
        idx = {a: i for i, a in enumerate(self.attrs)}
        self.i_group = idx["consumer_group"]
        self.i_topic = idx["topic"]
        self.i_queue = idx["queue_id"]
        self.i_offset = idx["queue_offset"]
        self.i_max = idx["max_msg_nums"]
        self.i_sys = idx["sys_flag"]
        self.i_commit = idx["commit_offset"]
        self.i_sub = idx["subscription"]
        self.i_subver = idx["sub_version"]
        self.i_expr = idx["expression_type"]
        self.controller = controller
        self.broker_config = controller.broker_config
        self.filters = processor.filters
        self.counters = processor.counters
        self.store = None
        self.store_counts = None
        self.taken = 0
        self.declined = 0

    def bind(self, store):
        """Answer pulls from ``store`` (the running ``MessageStore``), or decline every pull
        (None: the broker is not ready)."""
        self.store = store
        self.store_counts = None if store is None else store.get_counts

    cdef int _read_map(self, const uint8_t* p, Py_ssize_t pos, Py_ssize_t ext_end, int64_t* vals,
                       const uint8_t** tp, Py_ssize_t* tl) except -1:
        """1 with the ROCKETMQ-form map ``p[pos:ext_end]`` read (ints into ``vals``, texts as
        pointer/length into ``tp``/``tl``, NULL when absent), 0 when it is not plain."""
        cdef Py_ssize_t i, k, n = self.n, klen, vlen
        cdef const uint8_t* kp
        cdef const uint8_t* vp
        cdef long long x
        for i in range(n):
            tp[i] = NULL
            tl[i] = 0
            vals[i] = 0
        while pos < ext_end:
            if not map_entry(p, &pos, ext_end, &kp, &klen, &vp, &vlen):
                return 0
            # (any byte above ASCII: the reference decodes UTF-8 and words what it refuses)
            for k in range(klen):
                if kp[k] >= 0x80:
                    return 0
            for k in range(vlen):
                if vp[k] >= 0x80:
                    return 0
            if klen == 0:
                continue
            for i in range(n):
                if self.w_len[i] == klen and self.w_ptr[i][0] == kp[0] and memcmp(self.w_ptr[i], kp, klen) == 0:
                    tp[i] = vp
                    tl[i] = vlen
                    break
        for i in range(n):
            if tp[i] == NULL:
                if self.required[i]:
                    return 0
                continue                                      # (every default used here is 0/None)
            if self.kinds[i] == H_INT:
                if not ascii_decimal(tp[i], tl[i], &x) or x < self.lo[i] or x > self.hi[i]:
                    return 0
                vals[i] = x
            elif self.kinds[i] != H_STR:
                return 0
        return 1

    cdef object _text(self, const uint8_t* p, Py_ssize_t n, int which):
        """A text value as a str (ASCII already checked), the connection's last one reused
        (a consumer pulls one group and topic over and over)."""
        cdef object last_b, s
        if which == 0:
            last_b = self.last_group_b
        elif which == 1:
            last_b = self.last_topic_b
        else:
            last_b = self.last_sub_b
        if last_b is not None and PyBytes_GET_SIZE(last_b) == n \
                and memcmp(PyBytes_AS_STRING(last_b), p, n) == 0:
            return self.last_group if which == 0 else (self.last_topic if which == 1 else self.last_sub)
        s = PyUnicode_DecodeASCII(<const char*>p, n, NULL)
        last_b = PyBytes_FromStringAndSize(<const char*>p, n)
        if which == 0:
            self.last_group_b = last_b
            self.last_group = s
        elif which == 1:
            self.last_topic_b = last_b
            self.last_topic = s
        else:
            self.last_sub_b = last_b
            self.last_sub = s
        return s

    def pull_frame(self, data, Py_ssize_t hstart, Py_ssize_t hend, Py_ssize_t end, int ser, str remote_addr):
        """Answer the pull whose frame is ``data[hstart-8:end]`` (header ``data[hstart:hend]``,
        serialization ``ser``) from the consumer at ``remote_addr``: its reply as ``(header
        frame, records)`` (one frame in two buffers), or None when the Python path must handle
        it (see the module's comment)."""
        return self.answer_frame(data, hstart, hend, end, ser, remote_addr)

    cdef object answer_frame(self, object data, Py_ssize_t hstart, Py_ssize_t hend, Py_ssize_t end, int ser,
                            str remote_addr):
        cdef int64_t vals[_PF_MAX_FIELDS]
        cdef const uint8_t* tp[_PF_MAX_FIELDS]
        cdef Py_ssize_t tl[_PF_MAX_FIELDS]
        cdef RecordBuf b = None
        cdef const uint8_t* p
        cdef Py_ssize_t size, hl = hend - hstart, ext_len
        cdef int32_t opaque
        cdef int flag, ok
        cdef JsonHead jh
        cdef uint8_t stack[_SCAN_STACK]
        cdef uint8_t* scratch
        b = frame_bytes(data, &p, &size)      # (b holds a bytearray's buffer until we return)
        if hstart < 0 or hl < 0 or end != hend or end > size:
            return None                       # (a pull has no body)
        p = p + hstart
        if not _is_pull_header(p, hl, ser) or self.store is None:
            return None
        if ser == 1:
            if hl < 21:
                return None
            opaque = rd32(p + 5)
            flag = rd32(p + 9)
            if flag & (_FLAG_RESPONSE | _FLAG_ONEWAY) or rd32(p + 13) != 0:     # a response, oneway; a remark
                return None
            ext_len = rd32(p + 17)
            if ext_len < 0 or ext_len > hl - 21 or not self._read_map(p, 21, 21 + ext_len, vals, tp, tl):
                return None
            return self._answer(vals, tp, tl, 1, opaque, remote_addr)
        if hl <= _SCAN_STACK:
            scratch = stack
        else:
            scratch = <uint8_t*>PyMem_Malloc(hl)
            if scratch == NULL:
                raise MemoryError()
        try:
            ext_len = json_header_scan(p, hl, &jh, scratch, hl)
            if ext_len < 0 or jh.code != _PULL_MESSAGE or not (-2147483648 <= jh.flag <= 2147483647) \
                    or not (-2147483648 <= jh.opaque <= 2147483647) or jh.flag & (_FLAG_RESPONSE | _FLAG_ONEWAY):
                return None
            ok = self._read_map(scratch, 0, ext_len, vals, tp, tl)
            if not ok:
                return None
            return self._answer(vals, tp, tl, 0, <int32_t>jh.opaque, remote_addr)
        finally:
            if scratch != stack:
                PyMem_Free(scratch)

    cdef object _answer(self, int64_t* vals, const uint8_t** tp, Py_ssize_t* tl, int ser, int32_t opaque,
                        str remote_addr):
        """The checks of PullMessageProcessor.process for the plain case, the store's read and
        the reply frame; None (nothing changed) for anything else."""
        cdef object c = self.controller, bc = self.broker_config, group, topic, sgc, tc, cgi, sub, f
        cdef object expr_key, result, buffers, frame, body
        cdef PyObject* fp
        cdef int64_t sys_flag = vals[self.i_sys], queue_id = vals[self.i_queue], t0, get_ns
        cdef int64_t count, total, suggest
        cdef const uint8_t* sp
        cdef Py_ssize_t sl
        # 1. broker readable (PermName.isReadable)
        if not (<int64_t>bc.broker_permission & _PERM_READ):
            return None
        # 2. the subscription group, consuming (not created here: find_subscription_group_config
        # auto-creates it on the Python path)
        group = self._text(tp[self.i_group], tl[self.i_group], 0)
        sgc = c.subscription_group_manager.subscription_group_table.get(group)
        if sgc is None or not sgc.consume_enable:
            return None
        if sys_flag & _SYS_CLASS_FILTER:
            return None
        # 4. topic readable; 5. queue id in range
        topic = self._text(tp[self.i_topic], tl[self.i_topic], 1)
        tc = c.topic_config_manager.topic_config_table.get(topic)
        if tc is None or not (<int64_t>tc.perm & _PERM_READ) or queue_id < 0 or queue_id >= <int64_t>tc.read_queue_nums:
            return None
        # 6. the subscription: a TAG expression, from the pull or the heartbeats, already parsed
        if sys_flag & _SYS_SUBSCRIPTION:
            if not _is_tag_type(tp[self.i_expr], tl[self.i_expr]):
                return None
            sp = tp[self.i_sub]
            sl = tl[self.i_sub]
            expr_key = "*" if sp == NULL or sl == 0 else self._text(sp, sl, 2)
        else:
            cgi = c.consumer_manager.consumer_table.get(group)
            if cgi is None or (not sgc.consume_broadcast_enable and <int>cgi.message_model == _BROADCASTING):
                return None
            sub = cgi.subscriptions.get(topic)
            if sub is None or <int64_t>sub.sub_version < vals[self.i_subver]:
                return None
            e = sub.expression_type
            if e and e.upper() != "TAG":
                return None
            expr_key = sub.sub_string or "*"
        fp = PyDict_GetItem(self.filters, expr_key)
        if fp == NULL:
            return None
        f = <object>fp
        if PyObject_IsTrue(c.pending_resets):
            return None
        # the store's read, not counted yet (count=False): a declined pull is read and counted
        # once by the Python path
        t0 = _mono_ns()
        try:
            result = self.store.get_message(group, topic, queue_id, vals[self.i_offset], vals[self.i_max], f,
                                            count=False)
        except Exception:                      # (a stopped store: the Python path words it)
            return None
        get_ns = _mono_ns() - t0
        count = result.message_count
        if count <= 0 or result.status_name != "FOUND" or result.holds_files:
            result.release()
            return None
        buffers = result.buffers
        if len(buffers) != 1 or not PyBytes_CheckExact(buffers[0]):
            result.release()
            return None
        body = buffers[0]
        # Suggest the slave to a consumer reading from disk only when slaves serve reads
        # (the Python path's rule, PullMessageProcessor.processRequest)
        if bc.slave_read_enable:
            suggest = sgc.which_broker_when_consume_slowly if result.suggest_pulling_from_slave else sgc.broker_id
        else:
            suggest = 0
        # the header frame; the records follow it as their own buffer (one frame, not copied again)
        frame = pull_reply(ser, _SUCCESS, opaque, b"FOUND", 5, result.next_begin_offset, result.min_offset,
                           result.max_offset, suggest, NULL, PyBytes_GET_SIZE(body))
        if frame is None:
            return None
        # answered: what MessageStore.get_message counts (getMessageTimesTotal, ...Found)
        counts = self.store_counts
        counts["get_total"] += 1
        counts["get_found"] += count
        total = result.buffer_total_size
        self.counters.found(group, topic, count, total, get_ns)
        # the offset the pull carried (commitOffset bit, master only)
        if sys_flag & _SYS_COMMIT_OFFSET and not c.is_slave:
            c.consumer_offset_manager.commit_offset(remote_addr, group, topic, queue_id, vals[self.i_commit])
        self.taken += 1
        return (frame, body)

    def frame_hook(self, str remote_addr, next_hook=None):
        """The per-connection hook ``hook(data, hstart, hend, end, ser) -> reply | None`` for
        ``FrameDecoder.frame_hook``: pulls from the consumer at ``remote_addr`` are answered
        here, every other frame goes to ``next_hook`` (the SEND frame hook, or None)."""
        return PullFrameHook(self, remote_addr, next_hook)


cdef class PullFrameHook:
    """One connection's frame hook (``PullFastPath.frame_hook``): a PULL_MESSAGE frame to the
    native pull path, any other to the next hook (SEND's).

    Attributes:
        taken: pulls of this connection answered here.
    """
    cdef PullFastPath fast
    cdef str remote_addr
    cdef object next_hook
    cdef public Py_ssize_t taken

    def __init__(self, PullFastPath fast, str remote_addr, next_hook=None):
        self.fast = fast
        self.remote_addr = remote_addr
        self.next_hook = next_hook
        self.taken = 0

    @property
    def take_frames(self):
        """The next hook's ``take_frames`` (``SendFrameHook``: runs of SEND frames in one call,
        asked by the connection's frame loop), or None; pulls go frame by frame here."""
        return getattr(self.next_hook, "take_frames", None)

    def __call__(self, data, Py_ssize_t hstart, Py_ssize_t hend, Py_ssize_t end, int ser):
        cdef object r
        cdef RecordBuf b
        cdef const uint8_t* p
        cdef Py_ssize_t size
        cdef bint pull
        # one look at the code: most frames of a producer's connection are SENDs (the next hook)
        b = frame_bytes(data, &p, &size)
        pull = 0 <= hstart <= hend <= size and _is_pull_header(p + hstart, hend - hstart, ser)
        if not pull:
            if self.next_hook is None:
                return None
            return self.next_hook(data, hstart, hend, end, ser)
        r = self.fast.answer_frame(data, hstart, hend, end, ser, self.remote_addr)
        if r is not None:
            self.taken += 1
        else:
            self.fast.declined += 1
        return r
