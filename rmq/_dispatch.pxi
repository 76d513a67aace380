# ---------------------------------------------------------------------------------------------
# The common dispatch run in one call (Java DefaultMessageStore.ReputMessageService.doReput
# with CommitLogDispatcherBuildConsumeQueue -> ConsumeQueue.putMessagePositionInfo and
# CommitLogDispatcherBuildIndex -> IndexService.buildIndex): the records of one CommitLog file
# are walked by ``_check`` (the record walker behind ``scan_records``) and each one it takes
# gets its 20-byte ConsumeQueue unit written straight into its queue's current mapped file and
# its keys into the current index file -- no record tuple, topic str or per-record call.
#
# What it reads and writes (all big-endian):
#
#   CommitLog record (the full drawing is in rmq/common/message.py; ``_walk`` finds the fields)
#   +0 TOTALSIZE i32 | +4 MAGIC | ... | +12 QUEUEID i32 | +20 QUEUEOFFSET i64 | +28 PHYSICALOFFSET
#   | +36 SYSFLAG i32 | ... STORETIMESTAMP i64 | ... | TOPIC | PROPERTIES (TAGS, KEYS, UNIQ_KEY)
#
#   ConsumeQueue unit, written at (QUEUEOFFSET * 20) - file start of the queue's last file
#   +----------------------------------+-----------------+----------------------------------+
#   | CommitLog offset int64           | size int32      | tags code int64                  |
#   +----------------------------------+-----------------+----------------------------------+
#   0                                  8                 12                                 20
#
#   index entries: IndexFile layout drawn in rmq/_index.pxi (``_index_record`` writes them).
#
# ``Dispatcher.run`` stops, before touching anything for it, at the first record it does not
# take and returns where; the caller (rmq/store/reput.py) runs that record through the Python
# path, which is the reference for every uncommon case:
#
# * anything that is not a valid record (BLANK end of file, end of data, torn, corrupt);
# * a SCHEDULE_TOPIC_XXXX record (its tags code is the delivery time);
# * a record whose queue is not in the cache yet (the Python path finds or creates the
#   ConsumeQueue, then ``register``s it), or whose cached ConsumeQueue is no longer the one in
#   the store's table (destroyed by CLEAN_EXPIRED_CONSUMEQUEUE or a topic deletion);
# * a queue without files, a unit past the queue's end (a gap: logged by Python), a unit that
#   does not fit the queue's last file (the roll creates a file);
# * an index file without room for a record's keys (the roll), a queue with more distinct tags
#   codes in this call than the arrival table holds.
#
# A record the run takes whose unit is already written (below the queue's end or below its
# max_physic_offset: a re-dispatch after recovery) is passed over as putMessagePositionInfo
# passes it over. PREPARED / ROLLBACK records get no unit (Java), PREPARED ones are indexed.
#
# Cache and consistency: the cache maps (topic bytes, queue id) -> ``_QueueSlot`` (the
# ConsumeQueue object, its topic str and its arrival key). Nothing the Python side owns is
# kept across calls: a slot is activated at its first record in a call (the ConsumeQueue is
# checked to still be the store's, its last file's ``wrote_position``, ``file_from_offset``
# and the queue's ``max_physic_offset`` are read, the file's buffer is held) and written back
# and released when the call returns. Recovery, truncation, retention and flushes all run
# between calls, so none can see or leave a stale value.
# ---------------------------------------------------------------------------------------------

from cpython.list cimport PyList_GET_ITEM

cdef enum:
    _DQ_MAX_TAGS = 8             # distinct tags codes tracked per queue per call
    _DQ_FIRST_SLOTS = 64         # the cache's first table size (a power of two)
    _DQ_MAX_SLOTS = 1 << 17      # a table this large is emptied and refilled
    _SYSFLAG_PREPARED_BIT = 0x4  # MessageSysFlag.TRANSACTION_PREPARED_TYPE (ROLLBACK 0xC has it)


@cython.final
cdef class _QueueSlot:
    """One cached ConsumeQueue and, while a call runs, the state of its last file."""
    cdef bytes topic_b
    cdef str topic
    cdef int32_t qid
    cdef uint64_t h
    cdef object cq
    cdef object key               # (topic, queue_id): what the arrival listeners watch
    # while active (mf is not None): read at activation, written back at the end of the call
    cdef object mf
    cdef Py_buffer view
    cdef bint held
    cdef bint dirty
    cdef uint8_t* base
    cdef int64_t ffo, wrote, mfs, max_phy
    cdef int ntags
    cdef int64_t tags[_DQ_MAX_TAGS]
    cdef int64_t nxt[_DQ_MAX_TAGS]

    def __cinit__(self):
        self.held = False
        self.mf = None
        self.ntags = 0
        self.dirty = False

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.view)
            self.held = False


cdef inline uint64_t _slot_hash(const uint8_t* t, Py_ssize_t n, int32_t qid) noexcept nogil:
    cdef uint64_t h = 14695981039346656037u          # FNV-1a
    cdef Py_ssize_t i
    for i in range(n):
        h = (h ^ t[i]) * 1099511628211u
    return (h ^ <uint32_t>qid) * 1099511628211u


cdef class Dispatcher:
    """``Dispatcher(schedule_topic)``: the common dispatch run in one call (see above).

    Attributes:
        taken: records dispatched by :meth:`run` so far.
        declined: calls that stopped at a record handed to the Python path.
    """
    cdef list table
    cdef Py_ssize_t mask, used
    cdef bytes schedule_topic
    cdef list active
    cdef public Py_ssize_t taken, declined

    def __init__(self, str schedule_topic):
        self.schedule_topic = schedule_topic.encode("utf-8")
        self.active = []
        self.taken = 0
        self.declined = 0
        self.clear()

    def clear(self):
        """Forget every cached queue."""
        self.table = [None] * _DQ_FIRST_SLOTS
        self.mask = _DQ_FIRST_SLOTS - 1
        self.used = 0

    def __len__(self):
        return self.used

    cdef _QueueSlot _find(self, const uint8_t* t, Py_ssize_t n, int32_t qid, uint64_t h):
        cdef Py_ssize_t i = <Py_ssize_t>(h & <uint64_t>self.mask)
        cdef object o
        cdef _QueueSlot s
        while True:
            o = <object>PyList_GET_ITEM(self.table, i)
            if o is None:
                return None
            s = <_QueueSlot>o
            if (s.h == h and s.qid == qid and len(s.topic_b) == n
                    and memcmp(<const char*>s.topic_b, t, n) == 0):
                return s
            i = (i + 1) & self.mask

    cdef void _insert(self, _QueueSlot s):
        cdef Py_ssize_t i = <Py_ssize_t>(s.h & <uint64_t>self.mask)
        cdef object o
        while True:
            o = self.table[i]
            if o is None:
                self.table[i] = s
                self.used += 1
                return
            if (<_QueueSlot>o).qid == s.qid and (<_QueueSlot>o).topic_b == s.topic_b:
                self.table[i] = s             # the queue's ConsumeQueue was replaced
                return
            i = (i + 1) & self.mask

    def register(self, str topic, int32_t queue_id, cq):
        """Cache ``cq`` as the ConsumeQueue of (``topic``, ``queue_id``) (after the Python path
        found or created it). Not while a call runs."""
        cdef _QueueSlot s = _QueueSlot.__new__(_QueueSlot)
        cdef list old
        cdef object o
        s.topic = topic
        s.topic_b = topic.encode("utf-8")
        s.qid = queue_id
        s.h = _slot_hash(s.topic_b, len(s.topic_b), queue_id)
        s.cq = cq
        s.key = (topic, queue_id)
        if (self.used + 1) * 2 > len(self.table):
            if len(self.table) >= _DQ_MAX_SLOTS:
                self.clear()
            else:
                old = self.table
                self.table = [None] * (len(old) * 2)
                self.mask = len(self.table) - 1
                self.used = 0
                for o in old:
                    if o is not None:
                        self._insert(<_QueueSlot>o)
        self._insert(s)

    cdef bint _activate(self, _QueueSlot s, dict cq_table) except -1:
        """Read the queue's state for this call; False when the Python path must take it."""
        queues = cq_table.get(s.topic)
        if queues is None or (<dict?>queues).get(s.qid) is not s.cq:
            return False                      # destroyed (and maybe recreated): re-registered by Python
        try:
            files = s.cq.mfq.files
            if not files:
                return False                  # the queue's first file is created by Python
            mf = files[-1]
            s.wrote = mf.wrote_position
            s.ffo = mf.file_from_offset
            s.mfs = s.cq.mapped_file_size
            s.max_phy = s.cq.max_physic_offset
            PyObject_GetBuffer(mf.mm, &s.view, PyBUF_WRITABLE)
        except Exception:                     # a closed mapping: Python raises it as it always did
            return False
        s.held = True
        if s.view.len < s.mfs or s.wrote < 0 or s.wrote > s.mfs:
            PyBuffer_Release(&s.view)
            s.held = False
            return False
        s.base = <uint8_t*>s.view.buf
        s.mf = mf
        s.dirty = False
        s.ntags = 0
        self.active.append(s)
        return True

    cdef void _finish(self, dict arrived, object watch):
        """Write back and release every active queue; record its arrivals (Python objects only
        for queues a listener watches)."""
        cdef _QueueSlot s
        cdef int j
        cdef bint wanted
        for o in self.active:
            s = <_QueueSlot>o
            try:
                if s.dirty:
                    s.mf.wrote_position = s.wrote
                    s.cq.max_physic_offset = s.max_phy
                    s.dirty = False
                if s.ntags and arrived is not None:
                    wanted = watch is None
                    if not wanted:
                        for w in watch:
                            if s.key in w:
                                wanted = True
                                break
                    if wanted:
                        for j in range(s.ntags):
                            arrived[(s.topic, s.qid, s.tags[j])] = s.nxt[j]
            except Exception:
                pass                          # (int and dict stores: cannot fail but for memory)
            s.ntags = 0
            if s.held:
                PyBuffer_Release(&s.view)
                s.held = False
            s.base = NULL
            s.mf = None
        self.active.clear()

    def run(self, mm, Py_ssize_t pos, Py_ssize_t stop, int64_t file_from_offset, Py_ssize_t max_records,
            dict cq_table, index_mm, int32_t hash_slot_num, int32_t index_num, Py_ssize_t max_keys,
            dict arrived, watch):
        """Dispatch the records of the CommitLog file ``mm`` from ``pos`` to ``stop`` (at most
        ``max_records``), stopping at the first one the Python path must take.

        ``cq_table`` is the store's ``consume_queue_table``; ``index_mm`` the last index file
        (None: no index) of ``hash_slot_num`` slots and ``index_num`` entries, ``max_keys`` keys
        per record; ``arrived`` (None: nobody is told) gets ``(topic, queue_id, tags_code) ->
        next queue offset`` for each distinct tags code written, for the queues that a container
        of ``watch`` holds (``watch`` None: every queue).

        Returns ``(end_pos, records, capped)``: where it stopped, the records dispatched, and
        how many of them had more than ``max_keys`` keys.
        """
        cdef RecordBuf d = record_buf(mm)
        cdef RecordBuf ib = None
        cdef uint8_t* ibase = NULL
        cdef const uint8_t* base = d.ptr
        cdef const uint8_t* p
        cdef const uint8_t* tp
        cdef uint8_t* u
        cdef RecordSpan r
        cdef Py_ssize_t size = 0, n = 0, capped = 0, tlen, limit = stop
        cdef Py_ssize_t sched_len = len(self.schedule_topic)
        cdef const char* sched = self.schedule_topic
        cdef int rc, j, tj
        cdef int32_t qid, sys_flag, count
        cdef int64_t phy, at, qoff, tags = 0
        cdef bint write, indexed
        cdef _QueueSlot s
        if limit > d.size:
            limit = d.size
        if index_mm is not None:
            ib = _index_buf(index_mm, hash_slot_num, index_num, True)
            ibase = ib.wptr
        try:
            while pos < limit and n < max_records:
                rc = _check(base + pos, limit - pos, file_from_offset + pos, False, &r, &size)
                if rc != 0:
                    break
                p = base + pos
                phy = file_from_offset + pos
                sys_flag = r.sys_flag
                tp = p + r.topic_at
                tlen = r.topic_len
                s = None
                write = False
                tj = -1
                # -- ConsumeQueue.putMessagePositionInfo: decide (nothing written yet) --------
                if not (sys_flag & _SYSFLAG_PREPARED_BIT):
                    if tlen == sched_len and memcmp(tp, sched, tlen) == 0:
                        break
                    qid = rd32(p + OFF_QUEUEID)
                    s = self._find(tp, tlen, qid, _slot_hash(tp, tlen, qid))
                    if s is None:
                        break
                    if s.mf is None and not self._activate(s, cq_table):
                        break
                    if phy + size > s.max_phy:
                        qoff = rd64(p + OFF_QUEUEOFFSET)
                        at = qoff * CQ_UNIT
                        if at > s.ffo + s.wrote:
                            break             # a gap: Python logs it
                        if at == s.ffo + s.wrote:
                            if s.wrote + CQ_UNIT > s.mfs:
                                break         # the roll
                            tags = _tags_code_of_props(p + r.props_at, r.props_len)
                            if arrived is not None:
                                for j in range(s.ntags):
                                    if s.tags[j] == tags:
                                        tj = j
                                        break
                                if tj < 0:
                                    if s.ntags >= _DQ_MAX_TAGS:
                                        break
                                    tj = s.ntags
                            write = True
                # -- IndexService.buildIndex: decide ------------------------------------------
                indexed = ibase != NULL and not _index_skips(ibase, phy, sys_flag)
                if indexed:
                    count = rd32(ibase + IDX_INDEX_COUNT)
                    if count < 1:
                        count = 1
                    if <int64_t>count + max_keys > index_num:
                        break                 # may fill the file: the roll
                # -- write -------------------------------------------------------------------
                if indexed:
                    _index_record(ibase, hash_slot_num, index_num,
                                  _hash_unit(_hash_utf8(0, tp, tlen), HASH_SEPARATOR),
                                  p + r.props_at, r.props_len, phy,
                                  rd64(p + r.store_host_at - STORETIMESTAMP_LEN), 0, max_keys, &capped)
                if write:
                    u = s.base + s.wrote
                    wr64(u + CQ_OFF_PHY, phy)
                    wr32(u + CQ_OFF_SIZE, size)
                    wr64(u + CQ_OFF_TAGS, tags)
                    s.wrote += CQ_UNIT
                    s.max_phy = phy + size
                    s.dirty = True
                    if tj >= 0:
                        if tj == s.ntags:
                            s.tags[tj] = tags
                            s.ntags += 1
                        s.nxt[tj] = qoff + 1
                n += 1
                pos += size
        finally:
            self._finish(arrived, watch)
        self.taken += n
        if pos < limit and n < max_records:
            self.declined += 1
        return pos, n, capped
