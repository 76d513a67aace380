# ---------------------------------------------------------------------------------------------
# The CommitLog writer's queue-offset table and topic cache (Java CommitLog.topicQueueTable,
# ``{topic-queueId: next queue offset}``, with the topic's encoded name beside it).
#
# One dict lookup by the topic str finds everything the plain put needs; the offset is then
# read and advanced in C (no key tuple, no int object, no dict store per message):
#
#   QueueTable.topics: dict {topic str: TopicEntry}
#
#   TopicEntry (one per topic with an offset or a cached name)
#   +------------+----------------------------------------------------------------------------+
#   | topic_b    | bytes: the name's UTF-8 bytes once checked legal and <= 127 bytes; or None |
#   | offs       | int64_t* --> [ next offset of queue 0 | queue 1 | ... | queue cap-1 ]        |
#   |            |              (PyMem, -1 = no offset; grown on demand, 8 slots, doubling,  |
#   |            |               up to QUEUE_ARRAY_MAX = 1024)                                |
#   | cap        | int32_t: slots of offs (0 until the first queue id in 0..1023)             |
#   | count      | offsets present (in offs and far)                                          |
#   | far        | dict {queue id: next offset} for ids < 0 or >= 1024 (None until one)       |
#   +------------+----------------------------------------------------------------------------+
#
# Why 1024: it is the broker's default cap on a topic's queue numbers (maxTopicQueueNums,
# rmq/config.py; Java's topics have 4 to 16 queues), so every queue id a default broker admits
# has its slot, and a topic costs at most 8 KiB of slots however large a queue id its records
# carry. A broker allowed more queues (maxTopicQueueNums up to 65,535) keeps the ids from 1024
# in the entry's ``far`` dict (a dict lookup per put for those queues). A recovered CommitLog
# may hold any int32 queue id (negative ones included): they all recover, into ``far``, one
# dict item per queue present, never a slot array sized by the id.
#
# The names cached are bounded (``max_topics``, CommitLog's 100,000): past it a topic's name is
# encoded per put by the Python path (and ``put_plain`` declines it). Entries for offsets are
# bounded by the queues the store holds (a ConsumeQueue each, under the store's mapping budget).
# ---------------------------------------------------------------------------------------------


cdef object _NO_DEFAULT = object()


@cython.final
cdef class TopicEntry:

    """One topic's cached name and next queue offsets (see the layout above); made and owned
    by a ``QueueTable``."""

    def __dealloc__(self):
        PyMem_Free(self.offs)

    cdef int64_t get(self, int32_t qid) except -2:
        """The next offset of queue ``qid``, -1 when it has none."""
        cdef object v
        if 0 <= qid < self.cap:
            return self.offs[qid]
        if 0 <= qid < QUEUE_ARRAY_MAX or self.far is None:
            return -1
        v = self.far.get(qid)
        return -1 if v is None else <int64_t>v

    cdef int set(self, int32_t qid, int64_t value) except -1:
        """Set queue ``qid``'s next offset (``value`` >= 0): 1 when the queue had none, else 0."""
        cdef int32_t cap
        cdef int64_t* grown
        cdef int added
        if 0 <= qid < QUEUE_ARRAY_MAX:
            if qid >= self.cap:
                cap = self.cap if self.cap else 8
                while cap <= qid:
                    cap *= 2
                grown = <int64_t*>PyMem_Realloc(self.offs, <size_t>cap * sizeof(int64_t))
                if grown == NULL:
                    raise MemoryError()
                memset(grown + self.cap, 0xff, <size_t>(cap - self.cap) * sizeof(int64_t))   # -1
                self.offs = grown
                self.cap = cap
            added = self.offs[qid] < 0
            self.offs[qid] = value
        else:
            if self.far is None:
                self.far = {}
            added = qid not in self.far
            self.far[qid] = value
        self.count += added
        return added

    cdef int64_t remove(self, int32_t qid) except -2:
        """Drop queue ``qid``'s offset: the offset it had, -1 when it had none."""
        cdef int64_t old = self.get(qid)
        if old < 0:
            return -1
        if 0 <= qid < self.cap:
            self.offs[qid] = -1
        else:
            del self.far[qid]
        self.count -= 1
        return old


cdef class QueueTable:

    """``QueueTable(max_topics=100_000)``: the CommitLog writer's next queue offset of every
    queue and the encoded names of its topics (layout in rmq/_qtable.pxi).

    As a mapping it is ``{(topic, queue_id): next queue offset}`` (Java
    CommitLog.topicQueueTable): ``get``, ``[]``, ``in``, ``pop``, ``del``, ``len``, ``items``,
    iteration over the keys and ``clear`` (which keeps the cached names). Queue ids are int32
    (OverflowError otherwise), offsets 0..2**63-1 (ValueError / OverflowError otherwise).

    Args:
        max_topics: how many topic names ``cache_topic`` keeps (default 100,000); past it the
            writer encodes a name per put.
    """

    def __init__(self, Py_ssize_t max_topics=100_000):
        self.topics = {}
        self.n_offsets = 0
        self.n_cached = 0
        self.max_topics = max_topics

    cdef TopicEntry entry(self, str topic, bint create):
        """``topic``'s entry (a new one when ``create``), None when it has none."""
        cdef PyObject* p = PyDict_GetItem(self.topics, topic)
        cdef TopicEntry e
        if p != NULL:
            return <TopicEntry>p
        if not create:
            return None
        e = TopicEntry.__new__(TopicEntry)
        self.topics[topic] = e
        return e

    cdef int _drop_if_empty(self, str topic, TopicEntry e) except -1:
        if e.count == 0 and e.topic_b is None:
            del self.topics[topic]
        return 0

    cdef int set_offset(self, str topic, int32_t qid, int64_t value) except -1:
        """Queue ``(topic, qid)``'s next offset is ``value`` (>= 0)."""
        if value < 0:
            raise ValueError(f"queue offset {value} is negative")
        self.n_offsets += self.entry(topic, True).set(qid, value)
        return 0

    # -- the mapping over (topic, queue id) ------------------------------------------------
    def get(self, key, default=None):
        """The next offset of queue ``key`` = ``(topic, queue_id)``, ``default`` (None) when
        it has none."""
        cdef str topic
        cdef int32_t qid
        cdef int64_t v
        topic, qid = key
        e = self.entry(topic, False)
        v = -1 if e is None else (<TopicEntry>e).get(qid)
        return default if v < 0 else v

    def __getitem__(self, key):
        v = self.get(key)
        if v is None:
            raise KeyError(key)
        return v

    def __contains__(self, key):
        return self.get(key) is not None

    def __setitem__(self, key, int64_t value):
        cdef str topic
        cdef int32_t qid
        topic, qid = key
        self.set_offset(topic, qid, value)

    def pop(self, key, default=_NO_DEFAULT):
        """Drop queue ``key``'s offset and return it; ``default`` when it has none (KeyError
        without one). The topic's entry goes when nothing is left in it."""
        cdef str topic
        cdef int32_t qid
        cdef int64_t old = -1
        topic, qid = key
        e = self.entry(topic, False)
        if e is not None:
            old = (<TopicEntry>e).remove(qid)
        if old < 0:
            if default is _NO_DEFAULT:
                raise KeyError(key)
            return default
        self.n_offsets -= 1
        self._drop_if_empty(topic, e)
        return old

    def __delitem__(self, key):
        self.pop(key)

    def __len__(self):
        return self.n_offsets

    def items(self):
        """A list of ``((topic, queue_id), next offset)``: topics in insertion order, each
        topic's queues 0..1023 in order, then the others."""
        cdef list out = []
        cdef TopicEntry e
        cdef int32_t i
        for topic, e in self.topics.items():
            for i in range(e.cap):
                if e.offs[i] >= 0:
                    out.append(((topic, i), e.offs[i]))
            if e.far:
                for qid, v in e.far.items():
                    out.append(((topic, qid), v))
        return out

    def __iter__(self):
        return iter([k for k, _ in self.items()])

    def clear(self):
        """Drop every offset (recovery rebuilds them); the cached topic names stay."""
        cdef TopicEntry e
        for topic, e in list(self.topics.items()):
            PyMem_Free(e.offs)
            e.offs = NULL
            e.cap = 0
            e.far = None
            e.count = 0
            self._drop_if_empty(topic, e)
        self.n_offsets = 0

    # -- the topic cache ----------------------------------------------------------------------
    def topic_bytes(self, str topic not None):
        """``topic``'s cached UTF-8 bytes (checked legal and <= 127 bytes by the caller of
        ``cache_topic``), None when it is not cached."""
        cdef PyObject* p = PyDict_GetItem(self.topics, topic)
        return None if p == NULL else (<TopicEntry>p).topic_b

    def cache_topic(self, str topic not None, bytes encoded not None):
        """Cache ``topic``'s UTF-8 bytes (the caller checked the name); False when
        ``max_topics`` names are cached already (nothing changes)."""
        e = self.entry(topic, False)
        if e is not None and (<TopicEntry>e).topic_b is not None:
            (<TopicEntry>e).topic_b = encoded
            return True
        if self.n_cached >= self.max_topics:
            return False
        (<TopicEntry>self.entry(topic, True)).topic_b = encoded
        self.n_cached += 1
        return True

    @property
    def cached_topics(self):
        """How many topic names are cached."""
        return self.n_cached
