# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""rmq._store: the byte-level hot paths of the store.

Everything here works on buffers (mmap'd CommitLog / ConsumeQueue files, bytes, bytearrays)
through the buffer protocol and never copies message data it does not have to:

* the CommitLog record codec (Java v1 layout, drawn below) and the batch-body splitter;
* the record scanner used by the reput (dispatch) service and by crash recovery;
* the ConsumeQueue unit codec;
* the getMessage scan of seeds 000/001 over a mapped ConsumeQueue, returning the positions of
  the CommitLog records it selected (the caller turns them into zero-copy memoryviews).

All integers on disk are big-endian (Java ``ByteBuffer`` order).
"""
from cpython.buffer cimport PyObject_GetBuffer, PyBuffer_Release, PyBUF_SIMPLE, PyBUF_WRITABLE
from cpython.mem cimport PyMem_Malloc, PyMem_Free, PyMem_Realloc
from libc.stdint cimport int16_t, int32_t, int64_t, uint8_t, uint16_t, uint32_t, uint64_t, INT64_MIN
from libc.string cimport memcpy, memcmp, memset

from zlib import crc32 as _zlib_crc32

# ---------------------------------------------------------------------------------------------
# Constants (Java names)
# ---------------------------------------------------------------------------------------------
MESSAGE_MAGIC_CODE = 0xDAA320A7          # CommitLog.MESSAGE_MAGIC_CODE (-626843481 as int32)
BLANK_MAGIC_CODE = 0xCBD43194            # CommitLog.BLANK_MAGIC_CODE (-875286124 as int32)
CQ_STORE_UNIT_SIZE = 20                  # ConsumeQueue.CQ_STORE_UNIT_SIZE
END_FILE_MIN_BLANK_LENGTH = 8            # CommitLog.END_FILE_MIN_BLANK_LENGTH
RECORD_FIXED_SIZE = 91                   # v1 record size with empty body, topic and properties

cdef uint32_t _MAGIC = 0xDAA320A7u
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


# ---------------------------------------------------------------------------------------------
# Big-endian helpers
# ---------------------------------------------------------------------------------------------
cdef inline int16_t rd16(const uint8_t* p) noexcept nogil:
    return <int16_t>((<uint16_t>p[0] << 8) | p[1])

cdef inline int32_t rd32(const uint8_t* p) noexcept nogil:
    return <int32_t>((<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3])

cdef inline uint32_t rdu32(const uint8_t* p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | p[3]

cdef inline int64_t rd64(const uint8_t* p) noexcept nogil:
    return <int64_t>((<uint64_t>rdu32(p) << 32) | rdu32(p + 4))

cdef inline void wr16(uint8_t* p, int v) noexcept nogil:
    p[0] = (v >> 8) & 0xFF
    p[1] = v & 0xFF

cdef inline void wr32(uint8_t* p, int64_t v) noexcept nogil:
    cdef uint32_t u = <uint32_t>v
    p[0] = (u >> 24) & 0xFF
    p[1] = (u >> 16) & 0xFF
    p[2] = (u >> 8) & 0xFF
    p[3] = u & 0xFF

cdef inline void wr64(uint8_t* p, int64_t v) noexcept nogil:
    cdef uint64_t u = <uint64_t>v
    wr32(p, <int64_t>(u >> 32))
    wr32(p + 4, <int64_t>(u & 0xFFFFFFFFu))


cdef class _Buf:
    """A Py_buffer held for the lifetime of this object (read-only or writable view)."""
    cdef Py_buffer view
    cdef bint held
    cdef const uint8_t* ptr
    cdef uint8_t* wptr
    cdef Py_ssize_t size

    def __cinit__(self, obj, bint writable=False):
        self.held = False
        PyObject_GetBuffer(obj, &self.view, PyBUF_WRITABLE if writable else PyBUF_SIMPLE)
        self.held = True
        self.ptr = <const uint8_t*>self.view.buf
        self.wptr = <uint8_t*>self.view.buf
        self.size = self.view.len

    def __dealloc__(self):
        if self.held:
            PyBuffer_Release(&self.view)
            self.held = False


# ---------------------------------------------------------------------------------------------
# CRC and Java String.hashCode
# ---------------------------------------------------------------------------------------------
def body_crc(body) -> int:
    """CRC32 of a message body as Java stores it (``crc32 & 0x7FFFFFFF``)."""
    return _zlib_crc32(body) & 0x7FFFFFFF


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
    """Java ``String.hashCode`` of ``s`` (str, or UTF-8 bytes) as a signed 32-bit int."""
    if isinstance(s, str):
        s = (<str>s).encode("utf-8")
    cdef const uint8_t[::1] b = s
    if b.shape[0] == 0:
        return 0
    return _java_hash_utf8(&b[0], b.shape[0])


# ---------------------------------------------------------------------------------------------
# Properties: "name\x01value\x02name\x01value" (UTF-8, the trailing \x02 optional)
# ---------------------------------------------------------------------------------------------
cdef Py_ssize_t _find_prop(const uint8_t* p, Py_ssize_t n, const uint8_t* key, Py_ssize_t klen,
                           Py_ssize_t* vlen) noexcept nogil:
    """Start of the value of ``key`` in a properties string, or -1; the length in ``vlen``."""
    cdef Py_ssize_t i = 0, j
    while i < n:
        # i is at the start of an item
        if i + klen < n and memcmp(p + i, key, klen) == 0 and p[i + klen] == 1:
            j = i + klen + 1
            i = j
            while i < n and p[i] != 2:
                i += 1
            vlen[0] = i - j
            return j
        while i < n and p[i] != 2:
            i += 1
        i += 1
    return -1


cdef const uint8_t* _TAGS = b"TAGS"


cdef inline int64_t _tags_code_of_props(const uint8_t* p, Py_ssize_t n) except? -1:
    cdef Py_ssize_t vlen = 0
    cdef Py_ssize_t at = _find_prop(p, n, _TAGS, 4, &vlen)
    if at < 0 or vlen == 0:
        return 0
    return _java_hash_utf8(p + at, vlen)


def tags_code_of_properties(props) -> int:
    """The ConsumeQueue tags code for an encoded properties string (0 without TAGS)."""
    cdef const uint8_t[::1] b = props
    if b.shape[0] == 0:
        return 0
    return _tags_code_of_props(&b[0], b.shape[0])


def find_property(props, str key):
    """The value (bytes) of ``key`` in an encoded properties string, or None."""
    cdef const uint8_t[::1] b = props
    cdef bytes k = key.encode("utf-8")
    cdef Py_ssize_t vlen = 0, at
    if b.shape[0] == 0:
        return None
    at = _find_prop(&b[0], b.shape[0], k, len(k), &vlen)
    if at < 0:
        return None
    return bytes(b[at:at + vlen])


# ---------------------------------------------------------------------------------------------
# The CommitLog record (Java v1, big-endian)
#
#  0                   4                   8                  12                  16
#  +-------------------+-------------------+-------------------+-------------------+
#  | TOTALSIZE  int32  | MAGICCODE  int32  | BODYCRC    int32  | QUEUEID    int32  |
#  +-------------------+-------------------+-------------------+-------------------+
#  | FLAG       int32  | QUEUEOFFSET  int64                    | PHYSICALOFFSET ...|
#  +-------------------+---------------------------------------+-------------------+
#  | ... int64 (28..36)| SYSFLAG    int32  | BORNTIMESTAMP  int64 (40..48)         |
#  +-------------------+-------------------+---------------------------------------+
#  | BORNHOST ip[4] port int32 (48..56)    | STORETIMESTAMP int64 (56..64)         |
#  +---------------------------------------+---------------------------------------+
#  | STOREHOST ip[4] port int32 (64..72)   | RECONSUMETIMES int32 (72..76)         |
#  +---------------------------------------+-------------------+-------------------+
#  | PREPARED TX OFFSET int64 (76..84)     | BODYLEN int32     | BODY ...          |
#  +---------------------------------------+-------------------+-------------------+
#  | TOPICLEN uint8 | TOPIC ... | PROPLEN int16 | PROPERTIES ...                     |
#  +----------------+-----------+---------------+------------------------------------+
#
# TOTALSIZE = 91 + BODYLEN + TOPICLEN + PROPLEN. With SYSFLAG bit 0x10 (0x20) the born
# (store) host is 16 + 4 bytes (IPv6); we never write those bits but decode them.
#
# The BLANK record that pads the end of a file: TOTALSIZE = the bytes left in the file,
# MAGICCODE = 0xCBD43194, the rest is not written.
# ---------------------------------------------------------------------------------------------
cdef enum:
    OFF_MAGIC = 4
    OFF_CRC = 8
    OFF_QID = 12
    OFF_FLAG = 16
    OFF_QOFF = 20
    OFF_PHY = 28
    OFF_SYSFLAG = 36
    OFF_BORNTS = 40
    OFF_BORNHOST = 48
    FIXED = 91


def record_size(Py_ssize_t body_len, Py_ssize_t topic_len, Py_ssize_t props_len) -> int:
    """TOTALSIZE of a v1 record (IPv4 hosts)."""
    return FIXED + body_len + topic_len + props_len


cdef inline Py_ssize_t _host_len(int32_t sysflag, int bit) noexcept nogil:
    return 20 if (sysflag & bit) else 8


def encode_record(dst, Py_ssize_t pos, body, bytes topic, props, int32_t queue_id,
                  int32_t flag, int64_t queue_offset, int64_t phy_offset, int32_t sys_flag,
                  int64_t born_timestamp, bytes born_host, int64_t store_timestamp,
                  bytes store_host, int32_t reconsume_times, int64_t prepared_transaction_offset,
                  int32_t body_crc=-1):
    """Write one v1 record into the writable buffer ``dst`` at ``pos``; return its size.

    ``born_host`` / ``store_host`` are 8 bytes (IPv4 octets + int32 port). ``body_crc`` is
    computed when -1. Raises ValueError when the record does not fit in ``dst``.
    """
    cdef Py_buffer d, b, pr
    cdef Py_ssize_t blen, tlen = len(topic), plen, size
    cdef uint8_t* p
    if len(born_host) != 8 or len(store_host) != 8:
        raise ValueError("born_host and store_host must be 8 bytes (IPv4 + int32 port)")
    if tlen > 255:
        raise ValueError("topic longer than 255 bytes")
    PyObject_GetBuffer(dst, &d, PyBUF_WRITABLE)
    try:
        PyObject_GetBuffer(body, &b, PyBUF_SIMPLE)
        try:
            PyObject_GetBuffer(props, &pr, PyBUF_SIMPLE)
            try:
                blen = b.len
                plen = pr.len
                size = FIXED + blen + tlen + plen
                if plen > 32767:
                    raise ValueError("properties longer than 32767 bytes")
                if pos < 0 or pos + size > d.len:
                    raise ValueError("record does not fit in the buffer")
                if body_crc == -1:
                    body_crc = _zlib_crc32(body) & 0x7FFFFFFF
                p = <uint8_t*>d.buf + pos
                wr32(p, size)
                wr32(p + 4, <int64_t>_MAGIC)
                wr32(p + 8, body_crc)
                wr32(p + 12, queue_id)
                wr32(p + 16, flag)
                wr64(p + 20, queue_offset)
                wr64(p + 28, phy_offset)
                wr32(p + 36, sys_flag & ~0x30)
                wr64(p + 40, born_timestamp)
                memcpy(p + 48, <const char*>born_host, 8)
                wr64(p + 56, store_timestamp)
                memcpy(p + 64, <const char*>store_host, 8)
                wr32(p + 72, reconsume_times)
                wr64(p + 76, prepared_transaction_offset)
                wr32(p + 84, blen)
                if blen:
                    memcpy(p + 88, b.buf, blen)
                p[88 + blen] = <uint8_t>tlen
                if tlen:
                    memcpy(p + 89 + blen, <const char*>topic, tlen)
                wr16(p + 89 + blen + tlen, <int>plen)
                if plen:
                    memcpy(p + 91 + blen + tlen, pr.buf, plen)
                return size
            finally:
                PyBuffer_Release(&pr)
        finally:
            PyBuffer_Release(&b)
    finally:
        PyBuffer_Release(&d)


def write_blank(dst, Py_ssize_t pos, int64_t size):
    """Write the 8-byte BLANK end-of-file record header (TOTALSIZE = ``size``)."""
    cdef _Buf d = _Buf(dst, True)
    if pos < 0 or pos + 8 > d.size:
        raise ValueError("blank record does not fit")
    wr32(d.wptr + pos, size)
    wr32(d.wptr + pos + 4, <int64_t>_BLANK)


# ---------------------------------------------------------------------------------------------
# Batch bodies (wire-contract §5.2), one item:
#
#  +-----------------+-------------+---------------+-------------+----------------+
#  | TOTALSIZE int32 | MAGIC int32 | BODYCRC int32 | FLAG int32  | BODYLEN int32  |
#  +-----------------+-------------+---------------+-------------+----------------+
#  | BODY ...        | PROPLEN int16 | PROPERTIES ...                             |
#  +-----------------+---------------+--------------------------------------------+
#
# TOTALSIZE = 20 + BODYLEN + 2 + PROPLEN. Java 4.9.8 (CommitLog.MessageExtEncoder) stores each
# item as its own record with the item's properties followed by the batch's own properties
# (WAIT, CLUSTER ...), joined by a \x02 when the item's properties do not end with one.
# ---------------------------------------------------------------------------------------------
def split_batch(batch, Py_ssize_t topic_len, outer_props):
    """Validate a batch body; return ``[(body_pos, body_len, props_pos, props_len, flag,
    record_size), ...]``. Raises ValueError naming the item and what is wrong."""
    cdef const uint8_t[::1] b = batch
    cdef const uint8_t[::1] op = outer_props
    cdef Py_ssize_t n = b.shape[0], pos = 0, total, blen, plen, oplen = op.shape[0], tp
    cdef int idx = 0
    cdef bint sep
    out = []
    if n == 0:
        raise ValueError("empty batch body")
    while pos < n:
        if pos + 20 > n:
            raise ValueError(f"batch item {idx}: truncated header at byte {pos}")
        total = rd32(&b[pos])
        blen = rd32(&b[pos + 16])
        if blen < 0 or pos + 20 + blen + 2 > n:
            raise ValueError(f"batch item {idx}: body length {blen} runs past the batch")
        plen = rd16(&b[pos + 20 + blen])
        if plen < 0 or pos + 22 + blen + plen > n:
            raise ValueError(f"batch item {idx}: properties length {plen} runs past the batch")
        if total != 22 + blen + plen:
            raise ValueError(f"batch item {idx}: TOTALSIZE {total} != 22 + {blen} + {plen}")
        sep = plen > 0 and oplen > 0 and b[pos + 22 + blen + plen - 1] != 2
        tp = plen + oplen + (1 if sep else 0)
        if tp > 32767:
            raise ValueError(f"batch item {idx}: properties longer than 32767 bytes")
        out.append((pos + 20, blen, pos + 22 + blen, plen, rd32(&b[pos + 12]),
                    FIXED + blen + topic_len + tp))
        pos += total
        idx += 1
    return out


def encode_batch(dst, Py_ssize_t pos, batch, list items, bytes topic, outer_props,
                 int32_t queue_id, int32_t sys_flag, int64_t born_timestamp, bytes born_host,
                 int64_t store_timestamp, bytes store_host, int32_t reconsume_times,
                 int64_t first_queue_offset, int64_t first_phy_offset):
    """Write the records of a batch (``items`` from split_batch) back to back at ``pos``.

    Returns the total size written. The caller has checked that it fits."""
    cdef _Buf d = _Buf(dst, True)
    cdef const uint8_t[::1] b = batch
    cdef const uint8_t[::1] op = outer_props
    cdef Py_ssize_t oplen = op.shape[0], tlen = len(topic), blen, plen, bpos, ppos, size, tp
    cdef Py_ssize_t at = pos
    cdef int64_t qoff = first_queue_offset, phy = first_phy_offset
    cdef uint8_t* p
    cdef bint sep
    cdef int32_t flag
    if len(born_host) != 8 or len(store_host) != 8:
        raise ValueError("born_host and store_host must be 8 bytes (IPv4 + int32 port)")
    for item in items:
        bpos, blen, ppos, plen, flag, size = item
        if at + size > d.size:
            raise ValueError("batch does not fit in the buffer")
        if bpos < 0 or blen < 0 or bpos + blen > b.shape[0] or ppos < 0 or plen < 0 or ppos + plen > b.shape[0] \
                or size != FIXED + blen + tlen + plen + oplen + (1 if plen > 0 and oplen > 0 and b[ppos + plen - 1] != 2 else 0):
            raise ValueError("batch items do not match the batch body")
        sep = plen > 0 and oplen > 0 and b[ppos + plen - 1] != 2
        tp = plen + oplen + (1 if sep else 0)
        p = d.wptr + at
        wr32(p, size)
        wr32(p + 4, <int64_t>_MAGIC)
        wr32(p + 8, _zlib_crc32(b[bpos:bpos + blen]) & 0x7FFFFFFF)
        wr32(p + 12, queue_id)
        wr32(p + 16, flag)
        wr64(p + 20, qoff)
        wr64(p + 28, phy)
        wr32(p + 36, sys_flag & ~0x30)
        wr64(p + 40, born_timestamp)
        memcpy(p + 48, <const char*>born_host, 8)
        wr64(p + 56, store_timestamp)
        memcpy(p + 64, <const char*>store_host, 8)
        wr32(p + 72, reconsume_times)
        wr64(p + 76, 0)
        wr32(p + 84, blen)
        if blen:
            memcpy(p + 88, &b[bpos], blen)
        p[88 + blen] = <uint8_t>tlen
        if tlen:
            memcpy(p + 89 + blen, <const char*>topic, tlen)
        p += 89 + blen + tlen
        wr16(p, <int>tp)
        p += 2
        if plen:
            memcpy(p, &b[ppos], plen)
            p += plen
        if oplen:
            if sep:
                p[0] = 2
                p += 1
            memcpy(p, &op[0], oplen)
        at += size
        phy += size
        qoff += 1
    return at - pos


# ---------------------------------------------------------------------------------------------
# Decoding and validation
# ---------------------------------------------------------------------------------------------
cdef int _check(const uint8_t* p, Py_ssize_t avail, int64_t expect_phy, bint check_crc,
                Py_ssize_t* out_size) except -1:
    """Classify the record at ``p`` (``avail`` bytes readable): 0 ok, or SCAN_* code."""
    cdef int32_t total
    cdef uint32_t magic
    cdef int32_t sysflag, blen, crc
    cdef Py_ssize_t bh, sh, at, tlen, plen
    if avail < 8:
        if avail >= 4 and rd32(p) == 0:
            return SCAN_END
        return SCAN_TORN if avail > 0 else SCAN_END
    total = rd32(p)
    magic = rdu32(p + 4)
    if total == 0 and magic == 0:
        return SCAN_END
    if magic == _BLANK:
        out_size[0] = total
        return SCAN_BLANK
    if magic != _MAGIC or total < FIXED:
        return SCAN_CORRUPT
    if total > avail:
        return SCAN_TORN
    sysflag = rd32(p + OFF_SYSFLAG)
    bh = _host_len(sysflag, 0x10)
    sh = _host_len(sysflag, 0x20)
    at = 48 + bh + 8 + sh + 4 + 8
    if at + 4 + 1 + 2 > total:
        return SCAN_CORRUPT
    blen = rd32(p + at)
    if blen < 0 or at + 4 + blen + 1 + 2 > total:
        return SCAN_CORRUPT
    tlen = p[at + 4 + blen]
    if at + 4 + blen + 1 + tlen + 2 > total:
        return SCAN_CORRUPT
    plen = rd16(p + at + 4 + blen + 1 + tlen)
    if plen < 0 or at + 4 + blen + 1 + tlen + 2 + plen != total:
        return SCAN_CORRUPT
    if expect_phy >= 0 and rd64(p + OFF_PHY) != expect_phy:
        return SCAN_CORRUPT
    if check_crc:
        crc = rd32(p + OFF_CRC)
        if (_zlib_crc32((<const char*>(p + at + 4))[:blen]) & 0x7FFFFFFF) != crc:
            return SCAN_CORRUPT
    out_size[0] = total
    return 0


def scan_records(buf, Py_ssize_t pos, Py_ssize_t limit, int64_t file_from_offset,
                 bint check_crc=True, Py_ssize_t max_records=1 << 30):
    """Walk the records of one CommitLog file from ``pos`` to ``limit``.

    Returns ``(records, end_pos, outcome, outcome_size)`` where each record is
    ``(phy_offset, size, topic, queue_id, queue_offset, tags_code, store_timestamp, sys_flag,
    props_pos, props_len)``, ``end_pos`` is the position after the last valid record and
    ``outcome`` one of SCAN_LIMIT, SCAN_BLANK, SCAN_END, SCAN_CORRUPT, SCAN_TORN (for BLANK,
    ``outcome_size`` is the declared blank size). Each record is validated: magic, sizes,
    PHYSICALOFFSET == its own position and, with ``check_crc``, the body CRC.
    """
    cdef _Buf d = _Buf(buf)
    cdef const uint8_t* base = d.ptr
    cdef Py_ssize_t size = 0, at, bh, sh, blen, tlen, plen, ppos
    cdef int rc
    cdef int32_t sysflag
    cdef const uint8_t* p
    records = []
    if limit > d.size:
        limit = d.size
    while pos < limit and len(records) < max_records:
        rc = _check(base + pos, limit - pos, file_from_offset + pos, check_crc, &size)
        if rc != 0:
            return records, pos, rc, (size if rc == SCAN_BLANK else 0)
        p = base + pos
        sysflag = rd32(p + OFF_SYSFLAG)
        bh = _host_len(sysflag, 0x10)
        sh = _host_len(sysflag, 0x20)
        at = 48 + bh + 8 + sh + 4 + 8
        blen = rd32(p + at)
        tlen = p[at + 4 + blen]
        ppos = at + 4 + blen + 1 + tlen + 2
        plen = size - ppos
        records.append((file_from_offset + pos, size,
                        (<const char*>(p + at + 5 + blen))[:tlen].decode("utf-8", "replace"),
                        rd32(p + OFF_QID), rd64(p + OFF_QOFF),
                        _tags_code_of_props(p + ppos, plen) if plen > 0 else 0,
                        rd64(p + 48 + bh), sysflag, pos + ppos, plen))
        pos += size
    return records, pos, SCAN_LIMIT, 0


def decode_record(buf, Py_ssize_t pos=0, bint check_crc=False):
    """Decode the record at ``pos`` into a dict of its fields (body and topic as bytes /
    str, properties as the raw encoded bytes). Raises ValueError on a malformed record."""
    cdef _Buf d = _Buf(buf)
    cdef Py_ssize_t size = 0, at, bh, sh, blen, tlen, plen
    cdef int rc
    if pos < 0 or pos >= d.size:
        raise ValueError("position outside the buffer")
    rc = _check(d.ptr + pos, d.size - pos, -1, check_crc, &size)
    if rc != 0:
        raise ValueError(f"no valid message record at {pos} (scan outcome {rc})")
    cdef const uint8_t* p = d.ptr + pos
    cdef int32_t sysflag = rd32(p + OFF_SYSFLAG)
    bh = _host_len(sysflag, 0x10)
    sh = _host_len(sysflag, 0x20)
    at = 48 + bh + 8 + sh + 4 + 8
    blen = rd32(p + at)
    tlen = p[at + 4 + blen]
    plen = rd16(p + at + 5 + blen + tlen)
    return {
        "store_size": size,
        "magic_code": rdu32(p + OFF_MAGIC),
        "body_crc": rd32(p + OFF_CRC),
        "queue_id": rd32(p + OFF_QID),
        "flag": rd32(p + OFF_FLAG),
        "queue_offset": rd64(p + OFF_QOFF),
        "commit_log_offset": rd64(p + OFF_PHY),
        "sys_flag": sysflag,
        "born_timestamp": rd64(p + OFF_BORNTS),
        "born_host": (<const char*>(p + 48))[:bh],
        "store_timestamp": rd64(p + 48 + bh),
        "store_host": (<const char*>(p + 56 + bh))[:sh],
        "reconsume_times": rd32(p + 56 + bh + sh),
        "prepared_transaction_offset": rd64(p + 60 + bh + sh),
        "body": (<const char*>(p + at + 4))[:blen],
        "topic": (<const char*>(p + at + 5 + blen))[:tlen].decode("utf-8", "replace"),
        "properties": (<const char*>(p + at + 7 + blen + tlen))[:plen],
    }


def record_store_timestamp(buf, Py_ssize_t pos) -> int:
    """STORETIMESTAMP of the record at ``pos`` (-1 when it is not a valid record)."""
    cdef _Buf d = _Buf(buf)
    cdef Py_ssize_t size = 0
    if pos < 0 or pos + FIXED > d.size or _check(d.ptr + pos, d.size - pos, -1, False, &size) != 0:
        return -1
    return rd64(d.ptr + pos + 48 + _host_len(rd32(d.ptr + pos + OFF_SYSFLAG), 0x10))


def last_nonzero(buf, Py_ssize_t start, Py_ssize_t end) -> int:
    """Index after the last non-zero byte in ``buf[start:end]`` (``start`` when all zero)."""
    cdef _Buf d = _Buf(buf)
    if end > d.size:
        end = d.size
    cdef const uint64_t* w
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
#  0                                  8                 12                                 20
# ---------------------------------------------------------------------------------------------
def put_cq_unit(dst, Py_ssize_t pos, int64_t phy_offset, int32_t size, int64_t tags_code):
    """Write one 20-byte ConsumeQueue unit at ``pos``."""
    cdef Py_buffer d
    cdef uint8_t* p
    PyObject_GetBuffer(dst, &d, PyBUF_WRITABLE)
    try:
        if pos < 0 or pos + 20 > d.len:
            raise ValueError("ConsumeQueue unit does not fit")
        p = <uint8_t*>d.buf + pos
        wr64(p, phy_offset)
        wr32(p + 8, size)
        wr64(p + 12, tags_code)
    finally:
        PyBuffer_Release(&d)


def read_cq_unit(buf, Py_ssize_t pos):
    """``(phy_offset, size, tags_code)`` of the unit at ``pos``."""
    cdef _Buf d = _Buf(buf)
    if pos < 0 or pos + 20 > d.size:
        raise ValueError("ConsumeQueue unit outside the buffer")
    return rd64(d.ptr + pos), rd32(d.ptr + pos + 8), rd64(d.ptr + pos + 12)


def cq_first_used(buf, Py_ssize_t limit):
    """Position of the first unit with a size > 0 (``limit`` when none): where a queue that
    was recreated mid-file starts."""
    cdef _Buf d = _Buf(buf)
    cdef Py_ssize_t pos = 0
    if limit > d.size:
        limit = d.size
    while pos + 20 <= limit and rd32(d.ptr + pos + 8) <= 0:
        pos += 20
    return pos


def cq_valid_end(buf, Py_ssize_t limit, int64_t max_phy_end, Py_ssize_t start=0):
    """Bytes of valid units from ``start`` in a ConsumeQueue file: stops at the first unit
    with size <= 0 or whose record would end past ``max_phy_end`` (-1: no bound)."""
    cdef _Buf d = _Buf(buf)
    cdef Py_ssize_t pos = start
    cdef int64_t phy
    cdef int32_t size
    if limit > d.size:
        limit = d.size
    while pos + 20 <= limit:
        phy = rd64(d.ptr + pos)
        size = rd32(d.ptr + pos + 8)
        if size <= 0 or phy < 0 or (max_phy_end >= 0 and phy + size > max_phy_end):
            break
        pos += 20
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
    """Second filter stage: the record's TAGS is one of ``tag_bytes``."""
    cdef int32_t sysflag = rd32(rec + OFF_SYSFLAG)
    cdef Py_ssize_t at = 48 + _host_len(sysflag, 0x10) + 8 + _host_len(sysflag, 0x20) + 12
    cdef Py_ssize_t blen, tlen, ppos, plen, vlen = 0, v
    if at + 4 > size:
        return False
    blen = rd32(rec + at)
    if blen < 0 or at + 4 + blen + 1 > size:
        return False
    tlen = rec[at + 4 + blen]
    ppos = at + 4 + blen + 1 + tlen + 2
    plen = size - ppos
    if plen <= 0:
        return False
    v = _find_prop(rec + ppos, plen, _TAGS, 4, &vlen)
    if v < 0:
        return False
    cdef bytes t
    for t in tag_bytes:
        if len(t) == vlen and memcmp(<const char*>t, rec + ppos + v, vlen) == 0:
            return True
    return False


def get_message_scan(cq_buf, Py_ssize_t start, Py_ssize_t end, CommitLogTable table,
                     int64_t readable_offset, int max_msg_nums, int64_t max_offset_py,
                     int64_t memory, tag_codes, list tag_bytes,
                     int max_bytes_mem, int max_count_mem, int max_bytes_disk,
                     int max_count_disk):
    """The loop of DefaultMessageStore.getMessage (seeds 000/001) over ``cq_buf[start:end]``.

    Scans at most ``max(16000, max_msg_nums * 20)`` bytes of units. For each unit: skip it
    when it lies below the next CommitLog file after a removed one; stop when the batch is
    full (transfer limits chosen by ``max_offset_py - offset_py > memory``); filter on the
    tags code (``tag_codes``: a set of ints, or None for "match all"); look the record up
    (``readable_offset`` bounds what is readable; a missing record means MESSAGE_WAS_REMOVING
    and a jump to the next CommitLog file); filter on the record's TAGS (``tag_bytes``).

    Returns ``(status, scanned_bytes, message_count, total_bytes, max_phy_offset_pulling,
    segments)``; ``segments`` lists ``(file_index, start, end)`` of adjacent records merged.
    """
    cdef _Buf d = _Buf(cq_buf)
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
    if end > d.size:
        end = d.size
    if start < 0:
        start = 0
    n = end - start
    n -= n % 20                     # whole units only
    if n < 0:
        n = 0
    budget = max_msg_nums * 20
    if budget < 16000:
        budget = 16000
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
            offset_py = rd64(cq + start + i)
            size_py = rd32(cq + start + i + 8)
            tags_code = rd64(cq + start + i + 12)
            max_phy_pulling = offset_py
            if next_phy_file_start != _I64_MIN and offset_py < next_phy_file_start:
                i += 20
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
                    i += 20
                    continue
            rec = NULL if size_py < FIXED else table.locate(offset_py, size_py, readable_offset, &fidx, &fpos)
            if rec == NULL or rdu32(rec + 4) != _MAGIC or rd32(rec) != size_py:
                if total == 0:
                    status = ST_MESSAGE_WAS_REMOVING
                next_phy_file_start = offset_py + table.file_size - (offset_py % table.file_size)
                i += 20
                continue
            if filtering and not _record_tags_match(rec, size_py, tag_bytes):
                if total == 0:
                    status = ST_NO_MATCHED_MESSAGE
                i += 20
                continue
            # addMessage: merge with the previous record when adjacent in the same file
            if seg_idx == fidx and seg_end == fpos:
                seg_end = fpos + size_py
            else:
                if seg_idx >= 0:
                    segments.append((seg_idx, seg_start, seg_end))
                seg_idx = fidx
                seg_start = fpos
                seg_end = fpos + size_py
            count += 1
            total += size_py
            status = ST_FOUND
            next_phy_file_start = _I64_MIN
            i += 20
    finally:
        if codes != NULL:
            PyMem_Free(codes)
    if seg_idx >= 0:
        segments.append((seg_idx, seg_start, seg_end))
    return status, i, count, total, max_phy_pulling, segments


# ---------------------------------------------------------------------------------------------
# Pre-faulting: writes into never-touched pages of a file mapping fault (and allocate blocks)
# one page at a time, which costs far more than the copy. MADV_POPULATE_WRITE (Linux 5.14)
# populates the page tables writable without changing the content, so a background thread can
# run it ahead of the writer without racing it.
# ---------------------------------------------------------------------------------------------
cdef extern from "sys/mman.h" nogil:
    int madvise(void* addr, size_t length, int advice)

cdef extern from "errno.h":
    int errno

MADV_POPULATE_WRITE = 23


def populate_write(buf, Py_ssize_t start, Py_ssize_t length) -> int:
    """Pre-fault ``buf[start:start+length]`` for writing without the GIL (``start`` is rounded
    down to a page). Returns 0, or the errno (EINVAL: the kernel does not support it)."""
    cdef Py_buffer d
    cdef int rc = 0, err = 0
    cdef Py_ssize_t s = start - (start % 4096)
    PyObject_GetBuffer(buf, &d, PyBUF_SIMPLE)
    try:
        if s < 0:
            s = 0
        if s + length > d.len:
            length = d.len - s
        if length <= 0:
            return 0
        with nogil:
            rc = madvise(<char*>d.buf + s, <size_t>length, 23)
            if rc != 0:
                err = errno
        return err
    finally:
        PyBuffer_Release(&d)


# ---------------------------------------------------------------------------------------------
# Remoting: the JSON header codec (decode requests, encode replies). Kept in its own file and
# compiled into this module so the project keeps a single extension.
# ---------------------------------------------------------------------------------------------
include "_codec.pxi"
