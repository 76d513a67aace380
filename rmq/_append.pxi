# ---------------------------------------------------------------------------------------------
# The store's one writer (Java CommitLog.DefaultAppendMessageCallback together with the
# bookkeeping of CommitLog.putMessage / DefaultMessageStore.putMessage after it).
#
# Every append goes through an Appender: the Python puts (CommitLog.append, append_batch),
# a slave's replicated bytes (CommitLog.append_data) and, at C level, the broker's plain SEND
# (``put_plain``, declared in rmq/_store.pxd and cimported by the SEND fast path). It holds
# the queue-offset table, the topic cache (legal topic names as their UTF-8 bytes) and the
# store host, advances the last file's write position, and after each append does the
# bookkeeping once: the put totals, the warm-ahead kick when the writer is within half a chunk
# of the warmed end, the dispatch wakeup (``waker``, an ASYNC_FLUSH store's, called only while
# ``wake_pending`` is clear: once per loop turn, not once per put), the HA service's
# notify_append on a master (``notifier``, called only while ``notify_armed`` is set: a writer
# waits for data) and the hooks the store registered. The store registers plain callables, so
# this module imports nothing from the broker.
#
# The per-put state is read without Python attribute calls: a mapped file's positions are read
# and moved in MappedFile's slots at their offsets (``bind_file_type``: Python code keeps its
# specialised slot reads, which a C-level property would lose), whether the store refuses
# writes is the flag ``refusing`` (the store sets it where its running state, the disk-full
# state or the last flush error changes), the store's config object is taken when the store
# binds itself (``store = ...``) and its fields are read in StoreConfig's slots at their offsets
# (``bind_config_type``), and the queue offsets and topic names are one ``QueueTable``
# (rmq/_qtable.pxi: one dict lookup by the topic, the offset read and moved in a C array), so
# ``put_plain`` reads no Python attribute of the file, the store or its config, and makes no
# key tuple, int object or dict store per message.
# ---------------------------------------------------------------------------------------------

from cpython.object cimport PyObject
from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_GET_SIZE
from libc.stdint cimport INT64_MAX
from rmq.common.slots cimport rmq_slot_offset, rmq_slot, rmq_slot_i64, rmq_slot_set_i64, rmq_slot_ascii_eq

cdef extern from "time.h" nogil:
    ctypedef long time_t
    cdef struct timespec:
        time_t tv_sec
        long tv_nsec
    int clock_gettime(int clk_id, timespec* tp)
    int CLOCK_REALTIME
    int CLOCK_MONOTONIC


cdef extern from "Python.h":
    PyObject* Py_True
    PyObject* PyDict_GetItem(object d, object key)
    int PyObject_GetBuffer(object obj, Py_buffer* view, int flags) except -1
    void PyBuffer_Release(Py_buffer* view)


cdef inline int64_t _now_ms() noexcept nogil:
    cdef timespec ts
    clock_gettime(CLOCK_REALTIME, &ts)
    return <int64_t>ts.tv_sec * 1000 + ts.tv_nsec // 1000000


cdef class Appender:

    """``Appender(store_host_bytes, warm_chunk)``: the CommitLog's writer and its state.

    Args:
        store_host_bytes: the store host as a record writes it (8 bytes: IPv4 + int32 port).
        warm_chunk: the warm-ahead chunk (``warm.kick()`` runs only when the writer is within
            half of it of the last file's warmed end).

    Attributes:
        queues: the ``QueueTable`` (rmq/_qtable.pxi): ``{(topic, queue_id): next queue
            offset}`` and the topics' cached UTF-8 bytes (checked legal and <= 127 bytes).
        store_host_bytes, id_prefix: the store host and its upper-case hex (offsetMsgId's
            first 16 characters).
        mfq: the CommitLog's MappedFileQueue (its last file is the one written); None: none.
        store: the MessageStore whose state ``put_plain`` checks (running, ASYNC_MASTER,
            ASYNC_FLUSH, not full, no flush error); None (default): ``put_plain`` declines.
            Its ``config`` is taken when it is set (its fields are read at each put).
        refusing: the store refuses writes (not running, disk full, after a flush error; the
            store sets it where one of those changes, ``MessageStore.refresh_refusal``):
            ``put_plain`` declines (default False).
        warm: the warm-ahead service (``idle``, ``kick()``) or None (default).
        waker: the dispatch wakeup, called after an append of messages while ``wake_pending``
            is clear (None, the default: none).
        wake_pending: a wakeup is scheduled (the waker sets it, the dispatch clears it when it
            runs; default False): further appends before that do not call the waker.
        notifier: called after an append of messages while ``notify_armed`` is set (None, the
            default: none; a master's ``HAService.notify_append``).
        notify_armed: someone waits for the next append (the HA service sets it when a writer
            starts waiting and clears it when it is told; default False).
        hooks: callables run after every append of messages (default none).
        put_total, put_bytes: messages and bytes appended (Java putMessageTimesTotal /
            putMessageSizeTotal).
    """

    def __init__(self, bytes store_host_bytes not None, int64_t warm_chunk=0):
        if len(store_host_bytes) != HOST_V4_LEN:
            raise ValueError("store_host_bytes must be 8 bytes (IPv4 + int32 port)")
        self.store_host_bytes = store_host_bytes
        self.id_prefix = store_host_bytes.hex().upper()
        self.warm_half = warm_chunk // 2
        self.queues = QueueTable()
        self.mfq = None
        self.store = None
        self.warm = None
        self.waker = None
        self.wake_pending = False
        self.notifier = None
        self.notify_armed = False
        self.refusing = False
        self.hooks = ()
        self.put_total = 0
        self.put_bytes = 0

    def bind_file_type(self, cls):
        """``put_plain`` writes only into files of exactly this class (the store's
        ``MappedFile``), whose ``__slots__`` ``file_from_offset``, ``file_size``,
        ``wrote_position``, ``warmed_to``, ``allocated`` and ``mm`` it reads (and moves
        ``wrote_position``) at their offsets; TypeError when one is not such a slot."""
        self._o_from = rmq_slot_offset(cls, "file_from_offset")
        self._o_size = rmq_slot_offset(cls, "file_size")
        self._o_wrote = rmq_slot_offset(cls, "wrote_position")
        self._o_warmed = rmq_slot_offset(cls, "warmed_to")
        self._o_alloc = rmq_slot_offset(cls, "allocated")
        self._o_mm = rmq_slot_offset(cls, "mm")
        self._mf_type = cls

    def bind_config_type(self, cls):
        """``put_plain`` reads the store's config only when it is exactly this class (the
        ``StoreConfig`` dataclass with slots), at the offsets of its slots ``broker_role``,
        ``flush_disk_type`` and ``max_message_size``; TypeError when one is not such a slot."""
        self._o_role = rmq_slot_offset(cls, "broker_role")
        self._o_flush = rmq_slot_offset(cls, "flush_disk_type")
        self._o_max_size = rmq_slot_offset(cls, "max_message_size")
        self._cfg_type = cls

    @property
    def store(self):
        return self._bound

    @store.setter
    def store(self, store):
        self._bound = store
        self._scfg = None if store is None else store.config

    cdef int _after(self, int64_t n, int64_t nbytes, int64_t wt, int64_t file_size, int64_t end) except -1:
        """The bookkeeping after ``n`` records of ``nbytes`` ending at ``end`` in a file of
        ``file_size`` bytes warmed up to ``wt``."""
        self.put_total += n
        self.put_bytes += nbytes
        # the warm-ahead service is asked only near the warmed end (its ``idle`` is a Python read)
        if wt < file_size and wt - end <= self.warm_half:
            warm = self.warm
            if warm is not None and warm.idle:
                warm.kick()
        if not self.wake_pending and self.waker is not None:
            self.waker()
        if self.notify_armed and self.notifier is not None:
            self.notifier()
        for hook in self.hooks:
            hook()
        return 0

    def write(self, mf, str topic, body, bytes topic_b not None, props, int32_t queue_id, int32_t flag,
              int64_t queue_offset, bint advance, int32_t sys_flag, int64_t born_timestamp,
              bytes born_host not None, int32_t reconsume_times, int64_t prepared_transaction_offset):
        """Write one record at the end of ``mf`` (room checked by the caller); ``advance``
        moves the queue's offset on. Returns ``(physical offset, size, store timestamp)``."""
        cdef RecordHead h
        cdef Py_ssize_t tlen = len(topic_b), size
        cdef int64_t pos = mf.wrote_position
        cdef RecordBuf d
        cdef RecordBuf b = record_buf(body)
        cdef RecordBuf pr = record_buf(props)
        if len(born_host) != HOST_V4_LEN:
            raise ValueError("born_host must be 8 bytes (IPv4 + int32 port)")
        if tlen > MAX_TOPIC_LEN_V1 or pr.size > MAX_PROPERTIES_LEN:
            raise ValueError("topic longer than 255 bytes or properties longer than 32767 bytes")
        size = FIXED + b.size + tlen + pr.size
        d = record_buf(mf.mm, True)
        if pos < 0 or pos + size > d.size:
            raise ValueError("record does not fit in the buffer")
        h.body_crc = _crc(b.ptr, b.size)
        h.queue_id = queue_id
        h.flag = flag
        h.queue_offset = queue_offset
        h.phy_offset = <int64_t>mf.file_from_offset + pos
        h.sys_flag = sys_flag
        h.born_timestamp = born_timestamp
        h.born_host = born_host
        h.store_timestamp = _now_ms()
        h.store_host = self.store_host_bytes
        h.reconsume_times = reconsume_times
        h.prepared_transaction_offset = prepared_transaction_offset
        _write_record(d.wptr + pos, &h, b.ptr, b.size, topic_b, tlen, pr.ptr, pr.size, NULL, 0, False)
        d = None
        mf.wrote_position = pos + size
        if advance:
            self.queues.set_offset(topic, queue_id, queue_offset + 1)
        self._after(1, size, mf.warmed_to, mf.file_size, pos + size)
        return h.phy_offset, size, h.store_timestamp

    def write_batch(self, mf, str topic, batch, list items, bytes topic_b not None, outer_props,
                    int32_t queue_id, int32_t sys_flag, int64_t born_timestamp, bytes born_host not None,
                    int32_t reconsume_times, int64_t first_queue_offset):
        """Write the records of a batch (``items`` from split_batch) at the end of ``mf`` and
        move the queue's offset on by their number. Returns ``(physical offset, total size,
        store timestamp)``."""
        cdef int64_t pos = mf.wrote_position
        cdef int64_t phy = <int64_t>mf.file_from_offset + pos
        cdef int64_t now = _now_ms()
        cdef Py_ssize_t total
        total = encode_batch(mf.mm, pos, batch, items, topic_b, outer_props, queue_id, sys_flag,
                             born_timestamp, born_host, now, self.store_host_bytes, reconsume_times,
                             first_queue_offset, phy)
        mf.wrote_position = pos + total
        self.queues.set_offset(topic, queue_id, first_queue_offset + len(items))
        self._after(len(items), total, mf.warmed_to, mf.file_size, pos + total)
        return phy, total, now

    def write_data(self, mf, data):
        """A slave's replicated bytes at the end of ``mf`` (room checked by the caller): no
        put totals and no hooks (the HA client wakes dispatch once per read)."""
        cdef int64_t pos = mf.wrote_position
        cdef RecordBuf s = record_buf(data)
        cdef RecordBuf d = record_buf(mf.mm, True)
        if pos < 0 or pos + s.size > d.size:
            raise ValueError("replicated data does not fit in the file")
        memcpy(d.wptr + pos, s.ptr, s.size)
        d = None
        mf.wrote_position = pos + s.size

    cdef int put_plain(self, object topic, int32_t queue_id, RecordHead* h, const uint8_t* body,
                       Py_ssize_t blen, const uint8_t* pp, Py_ssize_t plen, int64_t* out) except -1:
        """The plain put of an ASYNC_FLUSH master at C level: 1 when the record (``h``'s
        flag, sys_flag, born timestamp and host, reconsume times set by the caller) was
        written with ``out`` = (physical offset, queue offset, size), 0 when it was declined
        and nothing changed: a store not running or not an ASYNC_MASTER + ASYNC_FLUSH, full,
        after a flush error; a topic not in the cache; a queue without an offset yet (the
        store admits new queues); a record over the size limits; a roll to the next file."""
        cdef object store = self._bound, scfg = self._scfg, files, mf
        cdef PyObject* p
        cdef TopicEntry e
        cdef bytes topic_b
        cdef int64_t max_size, size, pos, queue_offset, file_size, file_from, warmed
        cdef Py_ssize_t tlen
        cdef Py_buffer view
        if store is None or self.mfq is None or self.queues is None or self.refusing:
            return 0
        # StoreConfig's slots at their offsets (bind_config_type), read at every put: a role or
        # flush type changed at run time (a failover's SLAVE) is seen by the next one
        if type(scfg) is not self._cfg_type \
                or not rmq_slot_ascii_eq(scfg, self._o_role, "ASYNC_MASTER", 12) \
                or not rmq_slot_ascii_eq(scfg, self._o_flush, "ASYNC_FLUSH", 11) \
                or not rmq_slot_i64(scfg, self._o_max_size, &max_size):
            return 0
        # one dict lookup: the topic's cached name (checked legal, <= 127 bytes) and offsets
        p = PyDict_GetItem(self.queues.topics, topic)
        if p == NULL:
            return 0
        e = <TopicEntry>p
        topic_b = e.topic_b
        if topic_b is None:
            return 0
        tlen = PyBytes_GET_SIZE(topic_b)
        size = FIXED + blen + tlen + plen
        if plen > MAX_PROPERTIES_LEN or blen > max_size or size > max_size:
            return 0
        queue_offset = e.offs[queue_id] if 0 <= queue_id < e.cap else e.get(queue_id)
        if queue_offset < 0 or queue_offset == INT64_MAX:
            return 0
        files = self.mfq.files
        if not files:
            return 0
        mf = files[-1]
        # MappedFile's slots at their offsets (bind_file_type): what is not a plain int there
        # declines (the Python path then reads them as attributes)
        if type(mf) is not self._mf_type or rmq_slot(mf, self._o_alloc) != Py_True \
                or not rmq_slot_i64(mf, self._o_wrote, &pos) or not rmq_slot_i64(mf, self._o_size, &file_size) \
                or not rmq_slot_i64(mf, self._o_from, &file_from) or not rmq_slot_i64(mf, self._o_warmed, &warmed) \
                or rmq_slot(mf, self._o_mm) == NULL:
            return 0
        if pos + size + END_FILE_MIN_BLANK_LEN > file_size:     # (a C constant: no int objects)
            return 0
        PyObject_GetBuffer(<object>rmq_slot(mf, self._o_mm), &view, PyBUF_WRITABLE)
        if pos + size > view.len:
            PyBuffer_Release(&view)
            return 0
        # -- from here on the message is stored ------------------------------------------------
        h.body_crc = _crc(body, blen)
        h.queue_id = queue_id
        h.queue_offset = queue_offset
        h.phy_offset = file_from + pos
        h.store_timestamp = _now_ms()
        h.store_host = PyBytes_AS_STRING(self.store_host_bytes)
        h.prepared_transaction_offset = 0
        _write_record(<uint8_t*>view.buf + pos, h, body, blen, PyBytes_AS_STRING(topic_b), tlen, pp, plen, NULL, 0,
                      False)
        PyBuffer_Release(&view)
        rmq_slot_set_i64(mf, self._o_wrote, pos + size)
        if 0 <= queue_id < e.cap:
            e.offs[queue_id] = queue_offset + 1
        else:
            e.set(queue_id, queue_offset + 1)
        out[0] = h.phy_offset
        out[1] = queue_offset
        out[2] = size
        self._after(1, size, warmed, file_size, pos + size)
        return 1

