# cython: language_level=3, cdivision=True
"""rmq._store: the byte-level hot paths of the store.

Everything here works on buffers (mmap'd CommitLog / ConsumeQueue files, bytes, bytearrays)
through the buffer protocol and never copies message data it does not have to:

* the record walker (``_walk``; Python: ``record_span``, ``walk_records``): one validation of a
  CommitLog / pull-body record for every layer (the store's scan and decode, the SDK's
  MessageExt, the Spark reader's Arrow columns), agreeing with the pure-Python reference
  ``rmq.common.message.walk_record``;
* the one record writer (``_write_record``) behind ``encode_record`` and ``encode_batch``, and the
  batch-body splitter;
* the record scanner used by the reput (dispatch) service and by crash recovery;
* the ConsumeQueue unit codec;
* the loop of Java DefaultMessageStore.getMessage over a mapped ConsumeQueue, returning the
  positions of the CommitLog records it selected (the caller turns them into zero-copy
  memoryviews), with its property stage for SQL92 subscriptions (``SqlProgram``, in
  ``_sql92.pxi``: the common selector shapes evaluated on the property bytes).

All integers on disk are big-endian (Java ``ByteBuffer`` order).

Buffers: one idiom, a ``Py_buffer`` held by a ``RecordBuf`` (or, for the mapped CommitLog files,
by ``CommitLogTable``'s array) and read through ``const uint8_t*``. Typed memoryviews cannot
sit in a C array (``CommitLogTable``) and cost more to acquire on the per-pull path; a raw
pointer also runs without the GIL (``crc32``, ``madvise``). No function indexes a memoryview,
so there is no bounds-check directive to set: every function compares its positions with the
buffer's length before it reads (``_walk`` for records, explicit checks elsewhere).
"""
cimport cython
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyBUF_WRITABLE
from cpython.mem cimport PyMem_Malloc, PyMem_Free, PyMem_Realloc
from cpython.bytes cimport PyBytes_FromStringAndSize, PyBytes_AS_STRING
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, INT64_MIN
from libc.string cimport memcpy, memcmp, memset
from rmq.common._bytes cimport rd16, rdu16, rd32, rdu32, rd64, wr16, wr32, wr64, java_crc as _crc

# ---------------------------------------------------------------------------------------------
# Constants (Java names; the C ones are in _store.pxd).
# ---------------------------------------------------------------------------------------------


MESSAGE_MAGIC_CODE = 0xDAA320A7          # MessageDecoder.MESSAGE_MAGIC_CODE (v1)
MESSAGE_MAGIC_CODE_V2 = 0xDAA320AB       # RocketMQ 5 MessageDecoder.MESSAGE_MAGIC_CODE_V2
BLANK_MAGIC_CODE = 0xCBD43194            # CommitLog.BLANK_MAGIC_CODE (-875286124 as int32)
CQ_STORE_UNIT_SIZE = CQ_UNIT             # ConsumeQueue.CQ_STORE_UNIT_SIZE
END_FILE_MIN_BLANK_LENGTH = END_FILE_MIN_BLANK_LEN  # (the C constant, rmq/_store.pxd)
RECORD_FIXED_SIZE = FIXED                # v1 record size with empty body, topic and properties

# The offsets as Python ints, for the test that compares them with rmq.common.message.
LAYOUT = {
    "OFF_TOTALSIZE": OFF_TOTALSIZE, "OFF_MAGIC": OFF_MAGIC, "OFF_BODYCRC": OFF_BODYCRC,
    "OFF_QUEUEID": OFF_QUEUEID, "OFF_FLAG": OFF_FLAG, "OFF_QUEUEOFFSET": OFF_QUEUEOFFSET,
    "OFF_PHYSICALOFFSET": OFF_PHYSICALOFFSET, "OFF_SYSFLAG": OFF_SYSFLAG,
    "OFF_BORNTIMESTAMP": OFF_BORNTIMESTAMP, "OFF_BORNHOST": OFF_BORNHOST,
    "HOST_V4_LEN": HOST_V4_LEN, "HOST_V6_LEN": HOST_V6_LEN,
    "REL_RECONSUMETIMES": REL_RECONSUMETIMES, "REL_PREPARED_TX_OFFSET": REL_PREPARED_TX_OFFSET,
    "REL_BODYLEN": REL_BODYLEN, "REL_BODY": REL_BODY, "RECORD_FIXED_SIZE": FIXED,
}

cdef uint32_t _MAGIC = 0xDAA320A7u
cdef uint32_t _MAGIC_V2 = 0xDAA320ABu
cdef uint32_t _BLANK = 0xCBD43194u
cdef int64_t _I64_MIN = INT64_MIN

# Outcomes of scan_records (why the scan stopped)
SCAN_LIMIT = 0       # reached the limit given by the caller on a record boundary
SCAN_BLANK = 1       # met the BLANK end-of-file record: continue in the next file
SCAN_END = 2         # met a zero TOTALSIZE: the end of the written data
SCAN_CORRUPT = 3     # bad magic, impossible size, wrong PHYSICALOFFSET or CRC mismatch
SCAN_TORN = 4        # a record runs past the limit (torn write at the end of the data)

# getMessage statuses as returned by get_message_scan (values of GetMessageStatus)
ST_FOUND = 0
ST_NO_MATCHED_MESSAGE = 1
ST_MESSAGE_WAS_REMOVING = 2




@cython.freelist(16)
cdef class RecordBuf:
    """A Py_buffer held for the lifetime of this object (read-only or writable view): the one
    way this module reads or writes a buffer. Made by ``record_buf`` (a freelist and no argument
    parsing keep the per-call object cheap; both declared in _store.pxd)."""

    def __cinit__(self):
        self.held = False

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.view)
            self.held = False


# ---------------------------------------------------------------------------------------------
# Java String.hashCode (CRC: rmq/common/_bytes.pxd)
# ---------------------------------------------------------------------------------------------
def body_crc(body) -> int:
    """CRC32 of a message body as Java stores it (``crc32 & 0x7FFFFFFF``)."""
    cdef RecordBuf b = record_buf(body)
    return _crc(b.ptr, b.size)


cdef int64_t _java_hash_utf8(const uint8_t* p, Py_ssize_t n) except? -1:
    """Java ``String.hashCode`` (signed 32-bit, widened) of the UTF-8 text ``p[:n]``.

    Java hashes UTF-16 code units; ASCII is the fast path, anything else goes through a
    UTF-16 re-encoding.
    """
    cdef uint32_t h = 0
    cdef Py_ssize_t i
    cdef bint ascii = True
    for i in range(n):
        if p[i] >= 0x80:
            ascii = False
            break
        h = 31u * h + p[i]
    if ascii:
        return <int64_t><int32_t>h
    cdef bytes u16 = (<bytes>p[:n]).decode("utf-8", "replace").encode("utf-16-be")
    cdef const uint8_t* q = u16
    h = 0
    for i in range(0, len(u16), 2):
        h = 31u * h + ((<uint32_t>q[i] << 8) | q[i + 1])
    return <int64_t><int32_t>h


def java_hash_code(s) -> int:
    """Java ``String.hashCode`` of ``s`` (str, or UTF-8 bytes; None hashes as "") as a signed
    32-bit int."""
    if s is None:
        return 0
    if isinstance(s, str):
        s = (<str>s).encode("utf-8")
    cdef RecordBuf b = record_buf(s)
    return _java_hash_utf8(b.ptr, b.size)


# ---------------------------------------------------------------------------------------------
# Properties: "name\x01value\x02name\x01value" (UTF-8, the trailing \x02 optional)
# ---------------------------------------------------------------------------------------------
cdef extern from "string.h" nogil:
    void* memchr(const void* s, int c, size_t n)


cdef Py_ssize_t _find_prop(const uint8_t* p, Py_ssize_t n, const uint8_t* key, Py_ssize_t klen,
                           Py_ssize_t* vlen) noexcept nogil:
    """Start of the value of ``key`` in a properties string, or -1; the length in ``vlen``.
    Items are skipped with ``memchr`` (each SEND's record is walked for TAGS, UNIQ_KEY and
    KEYS: byte by byte these walks were 900 instructions per message)."""
    cdef Py_ssize_t i = 0, j
    cdef const uint8_t* q
    while i < n:
        # i is at the start of an item
        q = <const uint8_t*>memchr(p + i, PROPERTY_SEPARATOR, <size_t>(n - i))
        j = (q - p) if q != NULL else n                  # the item is p[i:j]
        if j - i > klen and p[i + klen] == NAME_VALUE_SEPARATOR and memcmp(p + i, key, klen) == 0:
            vlen[0] = j - (i + klen + 1)
            return i + klen + 1
        i = j + 1
    return -1


cdef const uint8_t* _TAGS = b"TAGS"


cdef inline int64_t _tags_code_of_props(const uint8_t* p, Py_ssize_t n) except? -1:
    cdef Py_ssize_t vlen = 0
    cdef Py_ssize_t at = _find_prop(p, n, _TAGS, 4, &vlen)
    if at < 0 or vlen == 0:
        return 0
    return _java_hash_utf8(p + at, vlen)


def tags_code_of_properties(props) -> int:
    """The ConsumeQueue tags code for an encoded properties string (0 without TAGS or for None)."""
    if props is None:
        return 0
    cdef RecordBuf b = record_buf(props)
    return _tags_code_of_props(b.ptr, b.size)


def find_property(props, str key):
    """The value (bytes) of ``key`` in an encoded properties string (None: empty), or None."""
    if props is None:
        return None
    cdef RecordBuf b = record_buf(props)
    cdef bytes k = key.encode("utf-8")
    cdef Py_ssize_t vlen = 0, at
    at = _find_prop(b.ptr, b.size, k, len(k), &vlen)
    if at < 0:
        return None
    return (<const char*>(b.ptr + at))[:vlen]


# ---------------------------------------------------------------------------------------------
# The record walker. Layout and field names: rmq/common/message.py (the one drawing).
# ---------------------------------------------------------------------------------------------
cdef struct RecordSpan:
    int32_t total
    int version               # 1 or 2 (magic code)
    int32_t sys_flag
    Py_ssize_t born_host_len  # born host at OFF_BORNHOST
    Py_ssize_t store_host_at  # STORETIMESTAMP at store_host_at - STORETIMESTAMP_LEN
    Py_ssize_t store_host_len
    Py_ssize_t body_at        # BODYLEN at body_at - 4
    Py_ssize_t body_len
    Py_ssize_t topic_at
    Py_ssize_t topic_len
    Py_ssize_t props_at
    Py_ssize_t props_len

# _walk's verdicts
cdef enum:
    W_OK = 0
    W_TRUNCATED = 1    # fewer bytes than the smallest record
    W_MAGIC = 2        # not a message magic code
    W_TOTALSIZE = 3    # TOTALSIZE below the minimum for its layout
    W_TORN = 4         # TOTALSIZE past the bytes available
    W_BODYLEN = 5
    W_TOPICLEN = 6
    W_PROPLEN = 7      # negative, or the lengths do not add up to TOTALSIZE
    W_CRC = 8


cdef inline int _walk(const uint8_t* p, Py_ssize_t avail, bint check_crc, RecordSpan* r) noexcept:
    """Validate the record at ``p`` (``avail`` bytes readable) and fill ``r`` with where its
    fields are (offsets from ``p``); W_OK or the first check that failed. Reads nothing
    before checking it lies inside ``avail`` (and inside TOTALSIZE)."""
    cdef uint32_t magic
    cdef Py_ssize_t tl_size, minimum, at
    if avail < FIXED:
        return W_TRUNCATED
    magic = rdu32(p + OFF_MAGIC)
    if magic == _MAGIC:
        r.version = 1
    elif magic == _MAGIC_V2:
        r.version = 2
    else:
        return W_MAGIC
    tl_size = r.version                     # TOPICLEN: 1 byte (v1) or 2 (v2)
    r.total = rd32(p + OFF_TOTALSIZE)
    r.sys_flag = rd32(p + OFF_SYSFLAG)
    r.born_host_len = HOST_V6_LEN if r.sys_flag & SYSFLAG_BORNHOST_V6 else HOST_V4_LEN
    r.store_host_len = HOST_V6_LEN if r.sys_flag & SYSFLAG_STOREHOST_V6 else HOST_V4_LEN
    r.store_host_at = OFF_BORNHOST + r.born_host_len + STORETIMESTAMP_LEN
    r.body_at = r.store_host_at + r.store_host_len + REL_BODY
    minimum = r.body_at + tl_size + 2
    if r.total < minimum:
        return W_TOTALSIZE
    if r.total > avail:
        return W_TORN
    r.body_len = rd32(p + r.body_at - 4)
    if r.body_len < 0 or r.body_at + r.body_len + tl_size + 2 > r.total:
        return W_BODYLEN
    at = r.body_at + r.body_len
    r.topic_len = p[at] if tl_size == 1 else rdu16(p + at)
    r.topic_at = at + tl_size
    if r.topic_at + r.topic_len + 2 > r.total:
        return W_TOPICLEN
    r.props_len = rd16(p + r.topic_at + r.topic_len)
    r.props_at = r.topic_at + r.topic_len + 2
    if r.props_len < 0 or r.props_at + r.props_len != r.total:
        return W_PROPLEN
    if check_crc and _crc(p + r.body_at, r.body_len) != rd32(p + OFF_BODYCRC):
        return W_CRC
    return W_OK


# The exception the walker raises: rmq.common.message registers its RecordDecodeError (a
# ValueError) when it loads, so this module imports nothing from rmq (it sits below common).
cdef object _RecordDecodeError = ValueError


def set_record_error(cls) -> None:
    """Make the walker raise ``cls`` (a ValueError subclass; rmq.common.message passes its
    RecordDecodeError at import). Until then it raises ValueError."""
    global _RecordDecodeError
    if not (isinstance(cls, type) and issubclass(cls, ValueError)):
        raise TypeError("the record error must be a ValueError subclass")
    _RecordDecodeError = cls


cdef object _record_error(const uint8_t* p, Py_ssize_t pos, Py_ssize_t avail, int verdict,
                          RecordSpan* r):
    """The RecordDecodeError for a verdict, worded as rmq.common.message.walk_record words it."""
    cdef Py_ssize_t minimum
    if verdict == W_TRUNCATED:
        msg = f"truncated record at {pos}: {avail} bytes left, a record has at least {FIXED}"
    elif verdict == W_MAGIC:
        msg = f"record at {pos} has unknown magic code 0x{rdu32(p + OFF_MAGIC):08X}"
    elif verdict == W_TOTALSIZE or verdict == W_TORN:
        minimum = r.body_at + r.version + 2
        msg = f"record at {pos} has TOTALSIZE {r.total}; it must be {minimum}..{avail}"
    elif verdict == W_BODYLEN:
        msg = f"record at {pos} has BODYLEN {r.body_len}, past its TOTALSIZE {r.total}"
    elif verdict == W_TOPICLEN:
        msg = f"record at {pos} has TOPICLEN {r.topic_len}, past its TOTALSIZE {r.total}"
    elif verdict == W_PROPLEN:
        msg = f"record at {pos} has PROPLEN {r.props_len}; the lengths do not add up to TOTALSIZE {r.total}"
    else:
        msg = (f"record at {pos} has BODYCRC {rd32(p + OFF_BODYCRC)}, "
               f"the body's is {_crc(p + r.body_at, r.body_len)}")
    return _RecordDecodeError(msg)


cdef inline tuple _span_tuple(Py_ssize_t pos, RecordSpan* r):
    # the field order of rmq.common.message.RecordSpan, positions absolute
    return (pos, r.total, r.version, r.sys_flag, pos + OFF_BORNHOST, r.born_host_len,
            pos + r.store_host_at, r.store_host_len, pos + r.body_at, r.body_len,
            pos + r.topic_at, r.topic_len, pos + r.props_at, r.props_len)


cdef inline Py_ssize_t _clip_end(Py_ssize_t end, Py_ssize_t size) noexcept:
    return size if end < 0 or end > size else end


def record_span(buf, Py_ssize_t pos=0, Py_ssize_t end=-1, bint check_crc=False):
    """Validate the record at ``pos`` of ``buf[:end]`` (-1: the whole buffer) and return where
    its fields are: a tuple in the field order of ``rmq.common.message.RecordSpan``. The
    Cython twin of ``rmq.common.message.walk_record`` (same checks, same messages).

    Raises:
        RecordDecodeError: naming the position and what is wrong.
    """
    cdef RecordBuf b = record_buf(buf)
    cdef RecordSpan r
    cdef int verdict
    end = _clip_end(end, b.size)
    if pos < 0 or pos > end:
        raise _RecordDecodeError(f"record position {pos} outside a buffer of {end} bytes")
    verdict = _walk(b.ptr + pos, end - pos, check_crc, &r)
    if verdict != W_OK:
        raise _record_error(b.ptr + pos, pos, end - pos, verdict, &r)
    return _span_tuple(pos, &r)


def walk_records(buf, Py_ssize_t start=0, Py_ssize_t end=-1, bint check_crc=False):
    """Every record of ``buf[start:end]`` back to back (a pull body), each as ``record_span``
    returns it. All or nothing: the first bad record raises RecordDecodeError."""
    cdef RecordBuf b = record_buf(buf)
    cdef RecordSpan r
    cdef int verdict
    cdef Py_ssize_t pos = start
    end = _clip_end(end, b.size)
    if pos < 0 or pos > end:
        raise _RecordDecodeError(f"record position {pos} outside a buffer of {end} bytes")
    out = []
    while pos < end:
        verdict = _walk(b.ptr + pos, end - pos, check_crc, &r)
        if verdict != W_OK:
            raise _record_error(b.ptr + pos, pos, end - pos, verdict, &r)
        out.append(_span_tuple(pos, &r))
        pos += r.total
    return out


# ---------------------------------------------------------------------------------------------
# The record writer (v1, IPv4 hosts: Java CommitLog.DefaultAppendMessageCallback.doAppend)
# ---------------------------------------------------------------------------------------------
cdef inline Py_ssize_t _host_len(int32_t sysflag, int bit) noexcept nogil:
    return HOST_V6_LEN if (sysflag & bit) else HOST_V4_LEN


def record_size(Py_ssize_t body_len, Py_ssize_t topic_len, Py_ssize_t props_len) -> int:
    """TOTALSIZE of a v1 record (IPv4 hosts)."""
    return FIXED + body_len + topic_len + props_len


cdef Py_ssize_t _write_record(uint8_t* p, RecordHead* h, const uint8_t* body, Py_ssize_t blen,
                              const char* topic, Py_ssize_t tlen,
                              const uint8_t* props, Py_ssize_t plen,
                              const uint8_t* props2, Py_ssize_t plen2, bint sep) noexcept nogil:
    """Write one v1 record at ``p`` (room checked by the caller); its properties are
    ``props`` then, when ``plen2`` > 0, a PROPERTY_SEPARATOR if ``sep`` and ``props2``.
    Returns TOTALSIZE."""
    cdef Py_ssize_t tp = plen + plen2 + (1 if sep else 0)
    cdef Py_ssize_t size = FIXED + blen + tlen + tp
    cdef uint8_t* q
    wr32(p + OFF_TOTALSIZE, size)
    wr32(p + OFF_MAGIC, <int64_t>_MAGIC)
    wr32(p + OFF_BODYCRC, h.body_crc)
    wr32(p + OFF_QUEUEID, h.queue_id)
    wr32(p + OFF_FLAG, h.flag)
    wr64(p + OFF_QUEUEOFFSET, h.queue_offset)
    wr64(p + OFF_PHYSICALOFFSET, h.phy_offset)
    wr32(p + OFF_SYSFLAG, h.sys_flag & ~(SYSFLAG_BORNHOST_V6 | SYSFLAG_STOREHOST_V6))
    wr64(p + OFF_BORNTIMESTAMP, h.born_timestamp)
    memcpy(p + OFF_BORNHOST, h.born_host, HOST_V4_LEN)
    q = p + OFF_BORNHOST + HOST_V4_LEN
    wr64(q, h.store_timestamp)
    q += STORETIMESTAMP_LEN
    memcpy(q, h.store_host, HOST_V4_LEN)
    q += HOST_V4_LEN
    wr32(q + REL_RECONSUMETIMES, h.reconsume_times)
    wr64(q + REL_PREPARED_TX_OFFSET, h.prepared_transaction_offset)
    wr32(q + REL_BODYLEN, blen)
    q += REL_BODY
    if blen:
        memcpy(q, body, blen)
    q += blen
    q[0] = <uint8_t>tlen
    q += 1
    if tlen:
        memcpy(q, topic, tlen)
    q += tlen
    wr16(q, <int>tp)
    q += 2
    if plen:
        memcpy(q, props, plen)
        q += plen
    if plen2:
        if sep:
            q[0] = PROPERTY_SEPARATOR
            q += 1
        memcpy(q, props2, plen2)
    return size


cdef int _check_hosts(bytes born_host, bytes store_host) except -1:
    if len(born_host) != HOST_V4_LEN or len(store_host) != HOST_V4_LEN:
        raise ValueError("born_host and store_host must be 8 bytes (IPv4 + int32 port)")
    return 0


def encode_record(dst, Py_ssize_t pos, body, bytes topic, props, int32_t queue_id,
                  int32_t flag, int64_t queue_offset, int64_t phy_offset, int32_t sys_flag,
                  int64_t born_timestamp, bytes born_host, int64_t store_timestamp,
                  bytes store_host, int32_t reconsume_times, int64_t prepared_transaction_offset,
                  int32_t body_crc=-1):
    """Write one v1 record into the writable buffer ``dst`` at ``pos``; return its size.

    ``born_host`` / ``store_host`` are 8 bytes (IPv4 octets + int32 port). ``body_crc`` is
    computed when -1. Raises ValueError when the record does not fit in ``dst``.
    """
    cdef Py_ssize_t tlen = len(topic), size
    cdef RecordHead h
    _check_hosts(born_host, store_host)
    if tlen > MAX_TOPIC_LEN_V1:
        raise ValueError("topic longer than 255 bytes")
    cdef RecordBuf d = record_buf(dst, True)
    cdef RecordBuf b = record_buf(body)
    cdef RecordBuf pr = record_buf(props)
    if pr.size > MAX_PROPERTIES_LEN:
        raise ValueError("properties longer than 32767 bytes")
    size = FIXED + b.size + tlen + pr.size
    if pos < 0 or pos + size > d.size:
        raise ValueError("record does not fit in the buffer")
    h.body_crc = _crc(b.ptr, b.size) if body_crc == -1 else body_crc
    h.queue_id = queue_id
    h.flag = flag
    h.queue_offset = queue_offset
    h.phy_offset = phy_offset
    h.sys_flag = sys_flag
    h.born_timestamp = born_timestamp
    h.born_host = born_host
    h.store_timestamp = store_timestamp
    h.store_host = store_host
    h.reconsume_times = reconsume_times
    h.prepared_transaction_offset = prepared_transaction_offset
    return _write_record(d.wptr + pos, &h, b.ptr, b.size, topic, tlen, pr.ptr, pr.size, NULL, 0, False)


def write_blank(dst, Py_ssize_t pos, int64_t size):
    """Write the 8-byte BLANK end-of-file record header (TOTALSIZE = ``size``)."""
    cdef RecordBuf d = record_buf(dst, True)
    if pos < 0 or pos + END_FILE_MIN_BLANK_LEN > d.size:
        raise ValueError("blank record does not fit")
    wr32(d.wptr + pos + OFF_TOTALSIZE, size)
    wr32(d.wptr + pos + OFF_MAGIC, <int64_t>_BLANK)


# ---------------------------------------------------------------------------------------------
# Batch bodies (Java MessageDecoder.encodeMessages), one item:
#
#  +-----------------+-------------+---------------+-------------+----------------+
#  | TOTALSIZE int32 | MAGIC int32 | BODYCRC int32 | FLAG int32  | BODYLEN int32  |
#  +-----------------+-------------+---------------+-------------+----------------+
#  | BODY ...        | PROPLEN int16 | PROPERTIES ...                             |
#  +-----------------+---------------+--------------------------------------------+
#
# TOTALSIZE = 20 + BODYLEN + 2 + PROPLEN. Java 4.9.8 (CommitLog.MessageExtBatchEncoder) stores
# each item as its own record with the item's properties followed by the batch's own properties
# (WAIT, CLUSTER ...), joined by a \x02 when the item's properties do not end with one.
# ---------------------------------------------------------------------------------------------
cdef inline bint _needs_sep(const uint8_t* item_props, Py_ssize_t plen, Py_ssize_t oplen) noexcept nogil:
    return plen > 0 and oplen > 0 and item_props[plen - 1] != PROPERTY_SEPARATOR


def split_batch(batch, Py_ssize_t topic_len, outer_props):
    """Validate a batch body; return ``[(body_pos, body_len, props_pos, props_len, flag,
    record_size), ...]`` (``outer_props`` None: none). Raises ValueError naming the item and
    what is wrong."""
    cdef RecordBuf bb = record_buf(b"" if batch is None else batch)
    cdef RecordBuf opb = record_buf(b"" if outer_props is None else outer_props)
    cdef const uint8_t* b = bb.ptr
    cdef Py_ssize_t n = bb.size, pos = 0, total, blen, plen, oplen = opb.size, tp
    cdef int idx = 0
    cdef bint sep
    out = []
    if n == 0:
        raise ValueError("empty batch body")
    while pos < n:
        if pos + BATCH_HEAD > n:
            raise ValueError(f"batch item {idx}: truncated header at byte {pos}")
        total = rd32(b + pos + OFF_TOTALSIZE)
        blen = rd32(b + pos + BATCH_OFF_BODYLEN)
        if blen < 0 or pos + BATCH_HEAD + blen + 2 > n:
            raise ValueError(f"batch item {idx}: body length {blen} runs past the batch")
        plen = rd16(b + pos + BATCH_HEAD + blen)
        if plen < 0 or pos + BATCH_HEAD + 2 + blen + plen > n:
            raise ValueError(f"batch item {idx}: properties length {plen} runs past the batch")
        if total != BATCH_HEAD + 2 + blen + plen:
            raise ValueError(f"batch item {idx}: TOTALSIZE {total} != 22 + {blen} + {plen}")
        sep = _needs_sep(b + pos + BATCH_HEAD + 2 + blen, plen, oplen)
        tp = plen + oplen + (1 if sep else 0)
        if tp > MAX_PROPERTIES_LEN:
            raise ValueError(f"batch item {idx}: properties longer than 32767 bytes")
        out.append((pos + BATCH_HEAD, blen, pos + BATCH_HEAD + 2 + blen, plen,
                    rd32(b + pos + BATCH_OFF_FLAG), FIXED + blen + topic_len + tp))
        pos += total
        idx += 1
    return out


def encode_batch(dst, Py_ssize_t pos, batch, list items, bytes topic, outer_props,
                 int32_t queue_id, int32_t sys_flag, int64_t born_timestamp, bytes born_host,
                 int64_t store_timestamp, bytes store_host, int32_t reconsume_times,
                 int64_t first_queue_offset, int64_t first_phy_offset):
    """Write the records of a batch (``items`` from split_batch) back to back at ``pos``.

    Returns the total size written. Raises ValueError when an item does not match the batch
    body or the records do not fit in ``dst``."""
    cdef RecordBuf d = record_buf(dst, True)
    cdef RecordBuf bb = record_buf(batch)
    cdef RecordBuf opb = record_buf(b"" if outer_props is None else outer_props)
    cdef const uint8_t* b = bb.ptr
    cdef Py_ssize_t oplen = opb.size, tlen = len(topic), blen, plen, bpos, ppos, size
    cdef Py_ssize_t at = pos
    cdef RecordHead h
    cdef bint sep
    cdef int32_t flag
    _check_hosts(born_host, store_host)
    h.queue_id = queue_id
    h.queue_offset = first_queue_offset
    h.phy_offset = first_phy_offset
    h.sys_flag = sys_flag
    h.born_timestamp = born_timestamp
    h.born_host = born_host
    h.store_timestamp = store_timestamp
    h.store_host = store_host
    h.reconsume_times = reconsume_times
    h.prepared_transaction_offset = 0
    if pos < 0:
        raise ValueError("batch does not fit in the buffer")
    for item in items:
        bpos, blen, ppos, plen, flag, size = item
        if at + size > d.size:
            raise ValueError("batch does not fit in the buffer")
        if bpos < 0 or blen < 0 or bpos + blen > bb.size or ppos < 0 or plen < 0 or ppos + plen > bb.size:
            raise ValueError("batch items do not match the batch body")
        sep = _needs_sep(b + ppos, plen, oplen)
        if size != FIXED + blen + tlen + plen + oplen + (1 if sep else 0):
            raise ValueError("batch items do not match the batch body")
        h.body_crc = _crc(b + bpos, blen)
        h.flag = flag
        _write_record(d.wptr + at, &h, b + bpos, blen, topic, tlen, b + ppos, plen, opb.ptr, oplen, sep)
        at += size
        h.phy_offset += size
        h.queue_offset += 1
    return at - pos


# ---------------------------------------------------------------------------------------------
# Scanning and decoding CommitLog files
# ---------------------------------------------------------------------------------------------
cdef int _check(const uint8_t* p, Py_ssize_t avail, int64_t expect_phy, bint check_crc,
                RecordSpan* r, Py_ssize_t* out_size) noexcept:
    """Classify the position ``p`` of a CommitLog file (``avail`` bytes readable): 0 for a
    valid record (``r`` filled), or a SCAN_* code. PHYSICALOFFSET must equal ``expect_phy``
    (unless -1)."""
    cdef int32_t total
    cdef uint32_t magic
    cdef int verdict
    if avail < END_FILE_MIN_BLANK_LEN:
        if avail >= 4 and rd32(p + OFF_TOTALSIZE) == 0:
            return SCAN_END
        return SCAN_TORN if avail > 0 else SCAN_END
    total = rd32(p + OFF_TOTALSIZE)
    magic = rdu32(p + OFF_MAGIC)
    if total == 0 and magic == 0:
        return SCAN_END
    if magic == _BLANK:
        out_size[0] = total
        return SCAN_BLANK
    verdict = _walk(p, avail, check_crc, r)
    if verdict == W_TRUNCATED or verdict == W_TORN:
        # a record cut short by the end of the data (its magic and TOTALSIZE are sane)
        if magic == _MAGIC or magic == _MAGIC_V2:
            return SCAN_TORN if total >= FIXED else SCAN_CORRUPT
        return SCAN_CORRUPT
    if verdict != W_OK:
        return SCAN_CORRUPT
    if expect_phy >= 0 and rd64(p + OFF_PHYSICALOFFSET) != expect_phy:
        return SCAN_CORRUPT
    out_size[0] = r.total
    return 0


def scan_records(buf, Py_ssize_t pos, Py_ssize_t limit, int64_t file_from_offset,
                 bint check_crc=True, Py_ssize_t max_records=1 << 30):
    """Walk the records of one CommitLog file from ``pos`` to ``limit``.

    Returns ``(records, end_pos, outcome, outcome_size)`` where each record is
    ``(phy_offset, size, topic, queue_id, queue_offset, tags_code, store_timestamp, sys_flag,
    props_pos, props_len)``, ``end_pos`` is the position after the last valid record and
    ``outcome`` one of SCAN_LIMIT, SCAN_BLANK, SCAN_END, SCAN_CORRUPT, SCAN_TORN (for BLANK,
    ``outcome_size`` is the declared blank size). Each record is validated by the walker,
    PHYSICALOFFSET must be its own position and, with ``check_crc``, the body CRC must match.
    """
    cdef RecordBuf d = record_buf(buf)
    cdef const uint8_t* base = d.ptr
    cdef Py_ssize_t size = 0
    cdef int rc
    cdef RecordSpan r
    cdef const uint8_t* p
    records = []
    if limit > d.size:
        limit = d.size
    while pos < limit and len(records) < max_records:
        rc = _check(base + pos, limit - pos, file_from_offset + pos, check_crc, &r, &size)
        if rc != 0:
            return records, pos, rc, (size if rc == SCAN_BLANK else 0)
        p = base + pos
        records.append((file_from_offset + pos, size,
                        (<const char*>(p + r.topic_at))[:r.topic_len].decode("utf-8", "replace"),
                        rd32(p + OFF_QUEUEID), rd64(p + OFF_QUEUEOFFSET),
                        _tags_code_of_props(p + r.props_at, r.props_len),
                        rd64(p + r.store_host_at - STORETIMESTAMP_LEN), r.sys_flag,
                        pos + r.props_at, r.props_len))
        pos += size
    return records, pos, SCAN_LIMIT, 0


def decode_record(buf, Py_ssize_t pos=0, bint check_crc=False):
    """Decode the record at ``pos`` into a dict of its fields (body and topic as bytes /
    str, properties as the raw encoded bytes): the store's projection of the walker.
    Raises RecordDecodeError (a ValueError) on a malformed record."""
    cdef RecordBuf d = record_buf(buf)
    cdef RecordSpan r
    cdef int verdict
    if pos < 0 or pos > d.size:
        raise _RecordDecodeError(f"record position {pos} outside a buffer of {d.size} bytes")
    cdef const uint8_t* p = d.ptr + pos
    verdict = _walk(p, d.size - pos, check_crc, &r)
    if verdict != W_OK:
        raise _record_error(p, pos, d.size - pos, verdict, &r)
    cdef const uint8_t* after_store_host = p + r.store_host_at + r.store_host_len
    return {
        "store_size": r.total,
        "magic_code": rdu32(p + OFF_MAGIC),
        "body_crc": rd32(p + OFF_BODYCRC),
        "queue_id": rd32(p + OFF_QUEUEID),
        "flag": rd32(p + OFF_FLAG),
        "queue_offset": rd64(p + OFF_QUEUEOFFSET),
        "commit_log_offset": rd64(p + OFF_PHYSICALOFFSET),
        "sys_flag": r.sys_flag,
        "born_timestamp": rd64(p + OFF_BORNTIMESTAMP),
        "born_host": (<const char*>(p + OFF_BORNHOST))[:r.born_host_len],
        "store_timestamp": rd64(p + r.store_host_at - STORETIMESTAMP_LEN),
        "store_host": (<const char*>(p + r.store_host_at))[:r.store_host_len],
        "reconsume_times": rd32(after_store_host + REL_RECONSUMETIMES),
        "prepared_transaction_offset": rd64(after_store_host + REL_PREPARED_TX_OFFSET),
        "body": (<const char*>(p + r.body_at))[:r.body_len],
        "topic": (<const char*>(p + r.topic_at))[:r.topic_len].decode("utf-8", "replace"),
        "properties": (<const char*>(p + r.props_at))[:r.props_len],
    }


def record_store_timestamp(buf, Py_ssize_t pos) -> int:
    """STORETIMESTAMP of the record at ``pos`` (-1 when it is not a valid record)."""
    cdef RecordBuf d = record_buf(buf)
    cdef RecordSpan r
    if pos < 0 or pos > d.size or _walk(d.ptr + pos, d.size - pos, False, &r) != W_OK:
        return -1
    return rd64(d.ptr + pos + r.store_host_at - STORETIMESTAMP_LEN)


def last_nonzero(buf, Py_ssize_t start, Py_ssize_t end) -> int:
    """Index after the last non-zero byte in ``buf[start:end]`` (``start`` when all zero)."""
    cdef RecordBuf d = record_buf(buf)
    if end > d.size:
        end = d.size
    if start < 0:
        start = 0
    while end > start and (end & 7):
        if d.ptr[end - 1] != 0:
            return end
        end -= 1
    while end - 8 >= start:
        if (<const uint64_t*>(d.ptr + end - 8))[0] != 0:
            break
        end -= 8
    while end > start and d.ptr[end - 1] == 0:
        end -= 1
    return end


# ---------------------------------------------------------------------------------------------
# ConsumeQueue units:
#
#  +----------------------------------+-----------------+----------------------------------+
#  | CommitLog offset int64           | size int32      | tags code int64                  |
#  +----------------------------------+-----------------+----------------------------------+
#  0 (CQ_OFF_PHY)                     8 (CQ_OFF_SIZE)   12 (CQ_OFF_TAGS)                   20
# ---------------------------------------------------------------------------------------------
def put_cq_unit(dst, Py_ssize_t pos, int64_t phy_offset, int32_t size, int64_t tags_code):
    """Write one 20-byte ConsumeQueue unit at ``pos``."""
    cdef RecordBuf d = record_buf(dst, True)
    if pos < 0 or pos + CQ_UNIT > d.size:
        raise ValueError("ConsumeQueue unit does not fit")
    cdef uint8_t* p = d.wptr + pos
    wr64(p + CQ_OFF_PHY, phy_offset)
    wr32(p + CQ_OFF_SIZE, size)
    wr64(p + CQ_OFF_TAGS, tags_code)


def read_cq_unit(buf, Py_ssize_t pos):
    """``(phy_offset, size, tags_code)`` of the unit at ``pos``."""
    cdef RecordBuf d = record_buf(buf)
    if pos < 0 or pos + CQ_UNIT > d.size:
        raise ValueError("ConsumeQueue unit outside the buffer")
    cdef const uint8_t* p = d.ptr + pos
    return rd64(p + CQ_OFF_PHY), rd32(p + CQ_OFF_SIZE), rd64(p + CQ_OFF_TAGS)


def cq_first_used(buf, Py_ssize_t limit):
    """Position of the first unit with a size > 0 (``limit`` when none): where a queue that
    was recreated mid-file starts."""
    cdef RecordBuf d = record_buf(buf)
    cdef Py_ssize_t pos = 0
    if limit > d.size:
        limit = d.size
    while pos + CQ_UNIT <= limit and rd32(d.ptr + pos + CQ_OFF_SIZE) <= 0:
        pos += CQ_UNIT
    return pos


def cq_valid_end(buf, Py_ssize_t limit, int64_t max_phy_end, Py_ssize_t start=0):
    """Bytes of valid units from ``start`` in a ConsumeQueue file: stops at the first unit
    with size <= 0 or whose record would end past ``max_phy_end`` (-1: no bound)."""
    cdef RecordBuf d = record_buf(buf)
    cdef Py_ssize_t pos = start
    cdef int64_t phy
    cdef int32_t size
    if limit > d.size:
        limit = d.size
    if pos < 0:
        pos = 0
    while pos + CQ_UNIT <= limit:
        phy = rd64(d.ptr + pos + CQ_OFF_PHY)
        size = rd32(d.ptr + pos + CQ_OFF_SIZE)
        if size <= 0 or phy < 0 or (max_phy_end >= 0 and phy + size > max_phy_end):
            break
        pos += CQ_UNIT
    return pos


# ---------------------------------------------------------------------------------------------
# The CommitLog file table used by the getMessage scan
# ---------------------------------------------------------------------------------------------
cdef class CommitLogTable:
    """Base pointers of the mapped CommitLog files, indexed by ``(offset - first_from) //
    file_size``. Holding the buffers here keeps an mmap from being closed under the scan; the
    owner calls ``reset`` after files are added or removed (rare: a roll or a deletion)."""
    cdef Py_buffer* bufs
    cdef char* held
    cdef Py_ssize_t n
    cdef readonly int64_t file_size
    cdef readonly int64_t first_from

    def __cinit__(self):
        self.bufs = NULL
        self.held = NULL
        self.n = 0
        self.file_size = 1
        self.first_from = 0

    cdef void _clear(self):
        cdef Py_ssize_t i
        for i in range(self.n):
            if self.held[i]:
                PyBuffer_Release(&self.bufs[i])
        PyMem_Free(self.bufs)
        PyMem_Free(self.held)
        self.bufs = NULL
        self.held = NULL
        self.n = 0

    def __dealloc__(self):
        self._clear()

    def reset(self, int64_t file_size, int64_t first_from, list buffers):
        """Point at ``buffers`` (one per file, contiguous from ``first_from``; None marks a
        file that is no longer readable)."""
        self._clear()
        self.file_size = file_size if file_size > 0 else 1
        self.first_from = first_from
        cdef Py_ssize_t n = len(buffers), i
        if n == 0:
            return
        self.bufs = <Py_buffer*>PyMem_Malloc(n * sizeof(Py_buffer))
        self.held = <char*>PyMem_Malloc(n)
        if self.bufs == NULL or self.held == NULL:
            raise MemoryError()
        memset(self.held, 0, n)
        self.n = n
        for i in range(n):
            if buffers[i] is not None:
                PyObject_GetBuffer(buffers[i], &self.bufs[i], PyBUF_SIMPLE)
                self.held[i] = 1

    def release(self):
        """Drop every buffer (before the files are unmapped)."""
        self._clear()

    cdef inline const uint8_t* locate(self, int64_t offset, int32_t size, int64_t readable,
                                      Py_ssize_t* idx, Py_ssize_t* pos) noexcept:
        cdef int64_t rel = offset - self.first_from
        cdef Py_ssize_t i
        cdef int64_t p
        if rel < 0 or size <= 0 or offset + size > readable:
            return NULL
        i = <Py_ssize_t>(rel // self.file_size)
        if i >= self.n or not self.held[i]:
            return NULL
        p = rel - i * self.file_size
        if p + size > self.bufs[i].len:
            return NULL
        idx[0] = i
        pos[0] = <Py_ssize_t>p
        return <const uint8_t*>self.bufs[i].buf + p


cdef bint _record_tags_match(const uint8_t* rec, int32_t size, list tag_bytes):
    """Second filter stage: the record's TAGS is one of ``tag_bytes`` (a record the walker
    does not accept matches nothing)."""
    cdef RecordSpan r
    cdef Py_ssize_t vlen = 0, v
    cdef bytes t
    if _walk(rec, size, False, &r) != W_OK or r.props_len == 0:
        return False
    v = _find_prop(rec + r.props_at, r.props_len, _TAGS, 4, &vlen)
    if v < 0:
        return False
    for t in tag_bytes:
        if len(t) == vlen and memcmp(<const char*>t, rec + r.props_at + v, vlen) == 0:
            return True
    return False


cdef inline bint _is_message_magic(const uint8_t* rec) noexcept nogil:
    cdef uint32_t m = rdu32(rec + OFF_MAGIC)
    return m == _MAGIC or m == _MAGIC_V2


include "_sql92.pxi"


def get_message_scan(cq_buf, Py_ssize_t start, Py_ssize_t end, CommitLogTable table,
                     int64_t readable_offset, int max_msg_nums, int64_t max_offset_py,
                     int64_t memory, tag_codes, list tag_bytes,
                     int max_bytes_mem, int max_count_mem, int max_bytes_disk,
                     int max_count_disk, SqlProgram prop_program=None, object prop_evaluate=None,
                     Py_ssize_t copy_limit=0):
    """The loop of Java DefaultMessageStore.getMessage over ``cq_buf[start:end]``.

    Scans at most ``max(16000, max_msg_nums * 20)`` bytes of units. For each unit: skip it
    when it lies below the next CommitLog file after a removed one; stop when the batch is
    full (transfer limits chosen by ``max_offset_py - offset_py > memory``); filter on the
    tags code (``tag_codes``: a set of ints, or None for "match all"); look the record up
    (``readable_offset`` bounds what is readable; a missing record means MESSAGE_WAS_REMOVING
    and a jump to the next CommitLog file); filter on the record's TAGS (``tag_bytes``); for a
    property (SQL92) subscription only, ``prop_program`` (a :class:`SqlProgram`) decides on the
    record's properties, handing the records it cannot decide exactly to ``prop_evaluate``
    (the Python evaluator, given the values as strings) (Java ``isMatchedByCommitLog``). TAG
    subscriptions pass ``None`` and pay one pointer test per record.

    Returns ``(status, scanned_bytes, message_count, total_bytes, max_phy_offset_pulling,
    segments)``; ``segments`` lists ``(file_index, start, end)`` of adjacent records merged,
    or, when ``0 < total_bytes <= copy_limit`` (default 0: never), is one ``bytes`` holding
    the records copied in order. A copy costs one memcpy of what the kernel copies again into
    the socket; a view per record costs several Python objects (the tuple here, the slice, the
    transport's own memoryview of it) and a hold on its file until the write has left, which
    for small records is far dearer than the bytes (bench/README.md, "The drain").
    """
    cdef RecordBuf d = record_buf(cq_buf)
    cdef const uint8_t* cq = d.ptr
    cdef Py_ssize_t i = 0, n, budget
    cdef int64_t offset_py, tags_code, next_phy_file_start = _I64_MIN, max_phy_pulling = 0
    cdef int32_t size_py
    cdef int status = ST_NO_MATCHED_MESSAGE
    cdef int count = 0
    cdef int64_t total = 0
    cdef bint in_disk
    cdef Py_ssize_t fidx = 0, fpos = 0, seg_idx = -1, seg_start = 0, seg_end = 0
    cdef const uint8_t* rec
    cdef int64_t* codes = NULL
    cdef Py_ssize_t ncodes = 0, k
    cdef bint filtering = tag_codes is not None
    cdef bint matched
    # the segments as (file index, start, end) triplets, made Python objects (or copied) at the end
    cdef Py_ssize_t* segs = NULL
    cdef Py_ssize_t nsegs = 0, cap = 0
    cdef Py_ssize_t* grown
    cdef bytes body
    cdef char* out
    if end > d.size:
        end = d.size
    if start < 0:
        start = 0
    n = end - start
    n -= n % CQ_UNIT                # whole units only
    if n < 0:
        n = 0
    budget = max_msg_nums * CQ_UNIT
    if budget < MIN_FILTER_SCAN_BYTES:
        budget = MIN_FILTER_SCAN_BYTES
    segments = []
    if filtering:
        ncodes = len(tag_codes)
        codes = <int64_t*>PyMem_Malloc((ncodes + 1) * sizeof(int64_t))
        if codes == NULL:
            raise MemoryError()
        k = 0
        for c in tag_codes:
            codes[k] = c
            k += 1
    try:
        while i < n and i < budget:
            offset_py = rd64(cq + start + i + CQ_OFF_PHY)
            size_py = rd32(cq + start + i + CQ_OFF_SIZE)
            tags_code = rd64(cq + start + i + CQ_OFF_TAGS)
            max_phy_pulling = offset_py
            if next_phy_file_start != _I64_MIN and offset_py < next_phy_file_start:
                i += CQ_UNIT
                continue
            in_disk = (max_offset_py - offset_py) > memory
            # isTheBatchFull
            if total != 0 and count != 0:
                if max_msg_nums <= count:
                    break
                if in_disk:
                    if total + size_py > max_bytes_disk or count > max_count_disk - 1:
                        break
                else:
                    if total + size_py > max_bytes_mem or count > max_count_mem - 1:
                        break
            if filtering:
                matched = False
                for k in range(ncodes):
                    if codes[k] == tags_code:
                        matched = True
                        break
                if not matched:
                    if total == 0:
                        status = ST_NO_MATCHED_MESSAGE
                    i += CQ_UNIT
                    continue
            rec = NULL if size_py < FIXED else table.locate(offset_py, size_py, readable_offset, &fidx, &fpos)
            if rec == NULL or not _is_message_magic(rec) or rd32(rec + OFF_TOTALSIZE) != size_py:
                if total == 0:
                    status = ST_MESSAGE_WAS_REMOVING
                next_phy_file_start = offset_py + table.file_size - (offset_py % table.file_size)
                i += CQ_UNIT
                continue
            if filtering and not _record_tags_match(rec, size_py, tag_bytes):
                if total == 0:
                    status = ST_NO_MATCHED_MESSAGE
                i += CQ_UNIT
                continue
            if prop_program is not None and not _record_sql_match(rec, size_py, prop_program, prop_evaluate):
                if total == 0:
                    status = ST_NO_MATCHED_MESSAGE
                i += CQ_UNIT
                continue
            # addMessage: merge with the previous record when adjacent in the same file
            if seg_idx == fidx and seg_end == fpos:
                seg_end = fpos + size_py
            else:
                if seg_idx >= 0:
                    if nsegs == cap:
                        cap = cap * 2 if cap else 64
                        grown = <Py_ssize_t*>PyMem_Realloc(segs, cap * 3 * sizeof(Py_ssize_t))
                        if grown == NULL:
                            raise MemoryError()
                        segs = grown
                    segs[3 * nsegs] = seg_idx
                    segs[3 * nsegs + 1] = seg_start
                    segs[3 * nsegs + 2] = seg_end
                    nsegs += 1
                seg_idx = fidx
                seg_start = fpos
                seg_end = fpos + size_py
            count += 1
            total += size_py
            status = ST_FOUND
            next_phy_file_start = _I64_MIN
            i += CQ_UNIT
        if seg_idx >= 0:
            if nsegs == cap:
                cap = cap + 1
                grown = <Py_ssize_t*>PyMem_Realloc(segs, cap * 3 * sizeof(Py_ssize_t))
                if grown == NULL:
                    raise MemoryError()
                segs = grown
            segs[3 * nsegs] = seg_idx
            segs[3 * nsegs + 1] = seg_start
            segs[3 * nsegs + 2] = seg_end
            nsegs += 1
        if 0 < total <= copy_limit:
            # every segment was located in a held buffer of the table during this call
            body = PyBytes_FromStringAndSize(NULL, <Py_ssize_t>total)
            out = PyBytes_AS_STRING(body)
            for k in range(nsegs):
                memcpy(out, <const char*>table.bufs[segs[3 * k]].buf + segs[3 * k + 1], segs[3 * k + 2] - segs[3 * k + 1])
                out += segs[3 * k + 2] - segs[3 * k + 1]
            return status, i, count, total, max_phy_pulling, body
        for k in range(nsegs):
            segments.append((segs[3 * k], segs[3 * k + 1], segs[3 * k + 2]))
    finally:
        if codes != NULL:
            PyMem_Free(codes)
        PyMem_Free(segs)
    return status, i, count, total, max_phy_pulling, segments


# ---------------------------------------------------------------------------------------------
# Pre-faulting: writes into never-touched pages of a file mapping fault (and allocate blocks)
# one page at a time, which costs far more than the copy. MADV_POPULATE_WRITE (Linux 5.14)
# populates the page tables writable without changing the content, so a background thread can
# run it ahead of the writer without racing it.
# ---------------------------------------------------------------------------------------------
cdef extern from *:
    """
    #include <sys/mman.h>
    #ifndef MADV_POPULATE_WRITE
    #define MADV_POPULATE_WRITE 23  /* Linux 5.14 uapi value; older libc headers lack it */
    #endif
    """
    const int C_MADV_POPULATE_WRITE "MADV_POPULATE_WRITE"
    const int C_MS_SYNC "MS_SYNC"
    int madvise(void* addr, size_t length, int advice) nogil
    int msync(void* addr, size_t length, int flags) nogil

cdef extern from "errno.h":
    int errno

cdef enum:
    PAGE_SIZE = 4096

MADV_POPULATE_WRITE = C_MADV_POPULATE_WRITE


# Flushing a range: fdatasync writes back every dirty page of the file, and the CommitLog's
# last file has up to a warm-ahead chunk of pre-faulted pages past the writer, dirty (a
# MADV_POPULATE_WRITE is a write fault): each flush wrote them out as zeros, cleaned them, and
# the writer then faulted on every one of them again (ext4_page_mkwrite) before writing them a
# second time. msync(MS_SYNC) of the written range is the same ext4_sync_file (the data, the
# metadata they need, the device cache) bounded to that range (Linux vfs_fsync_range).
def sync_range(buf, Py_ssize_t start, Py_ssize_t end) -> int:
    """msync(MS_SYNC) the pages of ``buf[start:end]`` without the GIL (``start`` is rounded
    down to a page; ``end`` is clipped to the buffer). Returns 0 or the errno."""
    cdef RecordBuf d = record_buf(buf)
    cdef int rc = 0, err = 0
    cdef Py_ssize_t s = start - (start % PAGE_SIZE)
    if s < 0:
        s = 0
    if end > d.size:
        end = d.size
    if end <= s:
        return 0
    with nogil:
        rc = msync(<void*>(d.ptr + s), <size_t>(end - s), C_MS_SYNC)
        if rc != 0:
            err = errno
    return err


def populate_write(buf, Py_ssize_t start, Py_ssize_t length) -> int:
    """Pre-fault ``buf[start:start+length]`` for writing without the GIL (``start`` is rounded
    down to a page). Returns 0, or the errno (EINVAL: the kernel does not support it)."""
    cdef RecordBuf d = record_buf(buf)
    cdef int rc = 0, err = 0
    cdef Py_ssize_t s = start - (start % PAGE_SIZE)
    if s < 0:
        s = 0
    if s + length > d.size:
        length = d.size - s
    if length <= 0:
        return 0
    with nogil:
        rc = madvise(<void*>(d.ptr + s), <size_t>length, C_MADV_POPULATE_WRITE)
        if rc != 0:
            err = errno
    return err


# The store's one writer and its after-append bookkeeping (rmq/_append.pxi; declared in
# _store.pxd for the broker's SEND fast path, rmq/broker/processors/_sendpath.pyx).
include "_append.pxi"
include "_qtable.pxi"

# ---------------------------------------------------------------------------------------------
# The message index (Java IndexFile): layout drawn in the file.
# ---------------------------------------------------------------------------------------------
include "_index.pxi"

# ---------------------------------------------------------------------------------------------
# The common dispatch run in one call (rmq/_dispatch.pxi: ConsumeQueue units and index entries
# straight from the CommitLog file).
# ---------------------------------------------------------------------------------------------
include "_dispatch.pxi"

# ---------------------------------------------------------------------------------------------
# Timer messages (rmq/_timer.pxi: timer-log records and the wheel's slots; rmq/store/timer).
# ---------------------------------------------------------------------------------------------
include "_timer.pxi"
