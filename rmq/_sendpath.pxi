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
# producer address that is not IPv4. What it does take gives the same record and the same
# reply frame as the Python path (a differential test).
# ---------------------------------------------------------------------------------------------

from cpython.bytes cimport PyBytes_CheckExact

cdef extern from "time.h" nogil:
    ctypedef long time_t
    cdef struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(int clk_id, timespec* tp)
    int CLOCK_REALTIME
    int CLOCK_MONOTONIC

cdef extern from "Python.h":
    const Py_ssize_t PY_SSIZE_T_MAX
    PyObject* PyDict_GetItem(object d, object key)
    int PyDict_SetItem(object d, object key, object value) except -1
    Py_ssize_t PyUnicode_Tailmatch(object s, object sub, Py_ssize_t start, Py_ssize_t end,
                                   int direction) except -1
    Py_ssize_t PyUnicode_Find(object s, object sub, Py_ssize_t start, Py_ssize_t end,
                              int direction) except -2

cdef enum:
    _SF_MAX_FIELDS = 32
    _FLAG_ONEWAY = 2
    _PERM_WRITE_BIT = 2
    _TRAN_MASK = 0xC                 # MessageSysFlag TRANSACTION_PREPARED | ROLLBACK bits


cdef inline int64_t _now_ms() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


cdef inline int64_t _mono_ns() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_MONOTONIC, &ts)
    return <int64_t>ts.tv_sec * 1000000000 + ts.tv_nsec


cdef const char* _HEXU = b"0123456789ABCDEF"


cdef class SendFastPath:
    """``SendFastPath(fields, controller, not_allowed, retry_prefix, marks)``: the plain SEND
    in one call.

    Args:
        fields: the SEND header's fields ``[(attribute, V1 wire name, V2 wire name, kind,
            required, lo, hi)]`` (kind 0 str, 1 int, 2 bool; ``lo``/``hi`` an int's range).
        controller: the broker (``broker_config``, ``topic_config_manager``,
            ``message_store``, ``stats`` are read per call: they may be replaced).
        not_allowed: the topics no producer may send to (Java NOT_ALLOWED_SEND_TOPIC_SET).
        retry_prefix: ``%RETRY%`` (such SENDs go through the retry/DLQ rules).
        marks: property markers that need the Python path (``DELAY\\x01``, ``TRAN_MSG\\x01``).
        warm_chunk: the store's warm-ahead chunk (``WarmAheadService.kick`` is called only
            when the writer is within half of it of the warmed end, the test kick makes).

    Attributes:
        taken: SENDs stored by the fast path so far.
        declined: SENDs handed back to the Python path.
    """
    cdef tuple w1, w2, attrs
    cdef bytes kinds, required
    cdef int64_t lo[_SF_MAX_FIELDS]
    cdef int64_t hi[_SF_MAX_FIELDS]
    cdef Py_ssize_t n
    cdef Py_ssize_t i_topic, i_queue, i_sys, i_born, i_flag, i_props, i_recon, i_batch
    cdef object controller, not_allowed, retry_prefix, v2_key
    cdef int64_t warm_half
    cdef tuple marks
    cdef public Py_ssize_t taken, declined

    def __init__(self, fields, controller, not_allowed, str retry_prefix, tuple marks, int64_t warm_chunk):
        cdef Py_ssize_t i
        fields = list(fields)
        if len(fields) > _SF_MAX_FIELDS:
            raise ValueError("too many header fields")
        self.n = len(fields)
        self.attrs = tuple(f[0] for f in fields)
        self.w1 = tuple(_sys_intern(f[1]) for f in fields)
        self.w2 = tuple(_sys_intern(f[2]) for f in fields)
        self.kinds = bytes(int(f[3]) for f in fields)
        self.required = bytes(1 if f[4] else 0 for f in fields)
        for i in range(self.n):
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
        self.v2_key = self.w2[self.i_topic]
        self.controller = controller
        self.not_allowed = not_allowed
        self.retry_prefix = retry_prefix
        self.marks = marks
        self.warm_half = warm_chunk // 2
        self.taken = 0
        self.declined = 0

    cdef int _read(self, object ext, int64_t* vals, PyObject** texts) except -1:
        """1 with the header's values read (ints in ``vals``, texts in ``texts``), 0 when
        something is not in its plain shape."""
        cdef Py_ssize_t i
        cdef PyObject* vp
        cdef object v
        cdef tuple wires
        cdef uint8_t kind
        cdef long long x
        cdef int overflow
        wires = self.w2 if PyDict_GetItem(ext, self.v2_key) != NULL else self.w1
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
            if kind == _H_STR:
                if not PyUnicode_CheckExact(v) or not PyUnicode_IS_ASCII(v):
                    return 0
                texts[i] = vp
            elif kind == _H_INT:
                if PyUnicode_CheckExact(v):
                    if not _ascii_decimal(v, &x):
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
                if v is True or (PyUnicode_CheckExact(v) and v == "true"):
                    vals[i] = 1
                elif not (v is False or (PyUnicode_CheckExact(v) and v == "false")):
                    return 0
        return 1

    def send(self, cmd, born):
        """Store the SEND ``cmd`` from a producer at ``born`` (8 bytes: IPv4 + port); returns
        the reply frame, ``b""`` when stored without a reply (oneway), or None when the
        Python path must handle it (nothing was changed)."""
        cdef int64_t vals[_SF_MAX_FIELDS]
        cdef PyObject* texts[_SF_MAX_FIELDS]    # borrowed from ext
        cdef object ext, topic, props, tc, store, scfg, cl, mf, key, qo, topic_b, bc, body, region, files
        cdef object mark
        cdef PyObject* p
        cdef int64_t queue_id, sys_flag, max_size, pos, fsize, phy, now, queue_offset, t0, size, put_ns
        cdef Py_ssize_t blen, tlen, plen, i
        cdef int serialize_type, flag
        cdef int32_t opaque
        cdef _Buf d
        cdef _RecordHead h
        cdef const uint8_t* pp
        cdef char mid[32]
        cdef object prefix
        cdef const uint8_t* pref
        t0 = _mono_ns()
        if not PyBytes_CheckExact(born) or PyBytes_GET_SIZE(born) != HOST_V4_LEN:
            self.declined += 1
            return None
        code = cmd.code
        ext = cmd.ext_fields
        body = cmd.body
        if (code != 10 and code != 310) or not PyDict_CheckExact(ext) or not PyBytes_CheckExact(body):
            self.declined += 1
            return None
        if not self._read(ext, vals, texts):
            self.declined += 1
            return None
        topic = <object>texts[self.i_topic]
        queue_id = vals[self.i_queue]
        sys_flag = vals[self.i_sys]
        if vals[self.i_batch] or queue_id < 0 or sys_flag & _TRAN_MASK:
            self.declined += 1
            return None
        props = <object>texts[self.i_props] if texts[self.i_props] != NULL else ""
        for mark in self.marks:
            if PyUnicode_Find(props, mark, 0, PY_SSIZE_T_MAX, 1) >= 0:
                self.declined += 1
                return None
        if topic in self.not_allowed or PyUnicode_Tailmatch(topic, self.retry_prefix, 0, PY_SSIZE_T_MAX, -1):
            self.declined += 1
            return None
        serialize_type = cmd.serialize_type
        flag = cmd.flag
        opaque = cmd.opaque
        bc = self.controller.broker_config
        region = bc.region_id
        if (serialize_type != 0 and serialize_type != 1) or not PyUnicode_CheckExact(region) \
                or _has_surrogate(region) or not (bc.broker_permission & _PERM_WRITE_BIT):
            self.declined += 1
            return None
        # Java msgCheck: the topic's config, writable, the queue id in range
        tc = self.controller.topic_config_manager.topic_config_table.get(topic)
        if tc is None or not (tc.perm & _PERM_WRITE_BIT) \
                or queue_id >= max(<int64_t>tc.write_queue_nums, <int64_t>tc.read_queue_nums):
            self.declined += 1
            return None
        # the store: running, writable, an ASYNC_FLUSH master (SYNC_FLUSH and SYNC_MASTER
        # replies wait, which is the Python path's business)
        store = self.controller.message_store
        scfg = store.config
        if not store.running or scfg.broker_role != "ASYNC_MASTER" or scfg.flush_disk_type != "ASYNC_FLUSH" \
                or store.clean_commit_log.disk_full or store.flush_commit_log.last_error is not None:
            self.declined += 1
            return None
        cl = store.commit_log
        p = PyDict_GetItem(cl._topic_cache, topic)       # cached: checked legal, <= 127 bytes
        if p == NULL:
            self.declined += 1
            return None
        topic_b = <object>p
        blen = PyBytes_GET_SIZE(body)
        tlen = PyBytes_GET_SIZE(topic_b)
        plen = PyUnicode_GET_LENGTH(props)                # ASCII: its UTF-8 is its data
        max_size = scfg.max_message_size
        size = FIXED + blen + tlen + plen
        if plen > MAX_PROPERTIES_LEN or blen > max_size or size > max_size or size > cl.config.max_message_size:
            self.declined += 1
            return None
        key = (topic, queue_id)
        qo = cl.topic_queue_table.get(key)
        if qo is None:                                    # a new queue: the store admits it
            self.declined += 1
            return None
        queue_offset = qo
        files = cl.mfq.files
        if not files:
            self.declined += 1
            return None
        mf = files[-1]
        pos = mf.wrote_position
        fsize = mf.file_size
        if pos + size + END_FILE_MIN_BLANK_LENGTH > fsize or not mf.allocated:
            self.declined += 1                            # the roll to the next file
            return None
        prefix = cl._id_prefix
        if not PyUnicode_CheckExact(prefix) or not PyUnicode_IS_ASCII(prefix) or PyUnicode_GET_LENGTH(prefix) != 16:
            self.declined += 1
            return None
        d = _buf(mf.mm, True)
        if pos + size > d.size:
            self.declined += 1
            return None
        # -- from here on the message is stored ------------------------------------------------
        phy = <int64_t>mf.file_from_offset + pos
        now = _now_ms()
        pp = <const uint8_t*>PyUnicode_DATA(props)
        h.body_crc = _crc(<const uint8_t*>PyBytes_AS_STRING(body), blen)
        h.queue_id = <int32_t>queue_id
        h.flag = <int32_t>vals[self.i_flag]
        h.queue_offset = queue_offset
        h.phy_offset = phy
        h.sys_flag = <int32_t>sys_flag
        h.born_timestamp = vals[self.i_born]
        h.born_host = PyBytes_AS_STRING(born)
        h.store_timestamp = now
        h.store_host = PyBytes_AS_STRING(cl.store_host_bytes)
        h.reconsume_times = <int32_t>vals[self.i_recon]
        h.prepared_transaction_offset = 0
        _write_record(d.wptr + pos, &h, <const uint8_t*>PyBytes_AS_STRING(body), blen,
                      PyBytes_AS_STRING(topic_b), tlen, pp, plen, NULL, 0, False)
        d = None
        mf.wrote_position = pos + size
        PyDict_SetItem(cl.topic_queue_table, key, queue_offset + 1)
        self.taken += 1
        # MessageStore._after_append's bookkeeping: totals, warm-ahead, dispatch
        st = store._stats
        st["put_total"] += 1
        st["put_bytes"] += size
        warm = store.warm
        if warm.idle:
            wt = mf.warmed_to
            if wt < fsize and wt - (pos + size) <= self.warm_half:
                warm.kick()
        store.reput.wakeup()
        stats = self.controller.stats
        put_ns = _mono_ns() - t0
        stats.store.record_put_time(put_ns // 1000000)
        stats.send_latency.observe_ns(put_ns)              # rocketmq_rpc_latency (rmq.broker.metrics)
        stats.on_put(topic, 1, blen)
        if flag & _FLAG_ONEWAY:
            return b""                                    # (Java sendOneway: nobody waits)
        # the reply: msgId = offsetMsgId (store host hex + %016X of the offset)
        pref = <const uint8_t*>PyUnicode_DATA(prefix)
        memcpy(mid, pref, 16)
        for i in range(16):
            mid[16 + i] = _HEXU[(phy >> (60 - 4 * i)) & 0xF]
        return _send_reply(serialize_type, opaque, mid, 32, queue_id, queue_offset, region, bc.trace_on)


cdef object _send_reply(int serialize_type, int32_t opaque, const char* mid, Py_ssize_t mlen,
                        int64_t queue_id, int64_t queue_offset, object region, bint trace_on):
    """send_reply_frame's SUCCESS frame for an ASCII hex msgId (nothing in it to escape)."""
    cdef _JOut o
    cdef Py_ssize_t ext_at
    o.cap = 256
    o.n = 8
    o.p = <char*>PyMem_Malloc(o.cap)
    if o.p == NULL:
        raise MemoryError()
    try:
        if serialize_type == 1:
            _jo_reserve(&o, 21)
            wr16(<uint8_t*>o.p + 8, 0)
            o.p[10] = 0                      # LanguageCode.JAVA
            wr16(<uint8_t*>o.p + 11, 409)    # version V4_9_8
            wr32(<uint8_t*>o.p + 13, opaque)
            wr32(<uint8_t*>o.p + 17, 1)      # flag: response
            wr32(<uint8_t*>o.p + 21, 0)      # remark: null
            o.n = 25
            ext_at = o.n
            _jo_raw(&o, b"\0\0\0\0", 4)
            _bo_key(&o, b"msgId")
            _jo_reserve(&o, 4)
            wr32(<uint8_t*>o.p + o.n, mlen)
            o.n += 4
            _jo_raw(&o, mid, mlen)
            _bo_key(&o, b"queueId")
            _bo_dec(&o, queue_id)
            _bo_key(&o, b"queueOffset")
            _bo_dec(&o, queue_offset)
            _bo_key(&o, b"TRACE_ON")
            if trace_on:
                _jo_raw(&o, b"\0\0\0\4true", 8)
            else:
                _jo_raw(&o, b"\0\0\0\5false", 9)
            _bo_key(&o, b"MSG_REGION")
            if _bo_utf8(&o, region, 4):
                raise ValueError("region cannot be written as UTF-8")
            wr32(<uint8_t*>o.p + ext_at, o.n - ext_at - 4)
        else:
            _jo_lit(&o, b'{"code":0,"extFields":{"msgId":"')
            _jo_raw(&o, mid, mlen)
            _jo_lit(&o, b'","queueId":"')
            _jo_i64(&o, queue_id)
            _jo_lit(&o, b'","queueOffset":"')
            _jo_i64(&o, queue_offset)
            _jo_lit(&o, b'","TRACE_ON":"true","MSG_REGION":' if trace_on else b'","TRACE_ON":"false","MSG_REGION":')
            if _jo_str(&o, region):
                raise ValueError("region cannot be written as JSON text")
            _jo_lit(&o, b'},"flag":1,"language":"JAVA","opaque":')
            _jo_i64(&o, opaque)
            _jo_lit(&o, b',"serializeTypeCurrentRPC":"JSON","version":409}')
        wr32(<uint8_t*>o.p, o.n - 4)
        wr32(<uint8_t*>o.p + 4, (serialize_type << 24) | (o.n - 8))
        return PyBytes_FromStringAndSize(o.p, o.n)
    finally:
        PyMem_Free(o.p)
