# ---------------------------------------------------------------------------------------------
# The message index (Java store.index.IndexFile / IndexHeader), byte for byte.
#
# One index file: a 40-byte header, ``hashSlotNum`` 4-byte hash slots, ``indexNum`` 20-byte
# entries. All integers big-endian.
#
#   header (IndexHeader, 40 bytes)
#   +0                +8              +16               +24             +32          +36        +40
#   | beginTimestamp  | endTimestamp  | beginPhyOffset  | endPhyOffset  | hashSlot-  | index-   |
#   | int64 (ms)      | int64 (ms)    | int64           | int64         | Count i32  | Count i32|
#
#   hash slots (at 40): slot s = the number of the newest entry whose keyHash % hashSlotNum == s
#   +0     +4     +8            40 + 4*hashSlotNum
#   | i32  | i32  | ...  | i32  |            0 = empty
#
#   entries (at 40 + 4*hashSlotNum): entry i at 40 + 4*hashSlotNum + 20*i, i >= 1 (entry 0 is
#   never written: indexCount starts at 1, so 0 can mean "no entry")
#   +0         +4                 +12              +16          +20
#   | keyHash  | phyOffset int64  | timeDiff int32 | prevIndex  |
#   | int32    | (CommitLog)      | seconds since  | int32: the |
#   | (>= 0)   |                  | beginTimestamp | older entry of the same slot, 0 = none
#
# keyHash = abs(Java String.hashCode("topic#key")) (Integer.MIN_VALUE → 0), over UTF-16 code
# units (IndexFile.indexKeyHashMethod). A lookup walks slot → entry → prevIndex → ... and keeps
# the entries whose keyHash equals the key's (different keys can share a hash: the caller
# compares the record's keys).
# ---------------------------------------------------------------------------------------------
cdef enum:
    IDX_HEADER_SIZE = 40
    IDX_BEGIN_TS = 0
    IDX_END_TS = 8
    IDX_BEGIN_PHY = 16
    IDX_END_PHY = 24
    IDX_SLOT_COUNT = 32
    IDX_INDEX_COUNT = 36
    IDX_SLOT_SIZE = 4
    IDX_ENTRY_SIZE = 20
    IDX_E_HASH = 0
    IDX_E_PHY = 4
    IDX_E_TIMEDIFF = 12
    IDX_E_PREV = 16
    # Transaction type bits of SYSFLAG (MessageSysFlag.TRANSACTION_ROLLBACK_TYPE = 0xC)
    SYSFLAG_TRANSACTION_MASK = 0xC
    SYSFLAG_TRANSACTION_ROLLBACK = 0xC
    KEY_SEPARATOR = 0x20                 # MessageConst.KEY_SEPARATOR " "
    HASH_SEPARATOR = 0x23                # IndexService.buildKey: topic + "#" + key
    INT32_MAX = 0x7FFFFFFF

INDEX_HEADER_SIZE = IDX_HEADER_SIZE
INDEX_ENTRY_SIZE = IDX_ENTRY_SIZE
INDEX_SLOT_SIZE = IDX_SLOT_SIZE

cdef const uint8_t* _UNIQ_KEY = b"UNIQ_KEY"
cdef const uint8_t* _KEYS = b"KEYS"


cdef inline Py_ssize_t _index_file_size(int64_t slots, int64_t num) noexcept nogil:
    return IDX_HEADER_SIZE + slots * IDX_SLOT_SIZE + num * IDX_ENTRY_SIZE


def index_file_size(int64_t hash_slot_num, int64_t index_num) -> int:
    """Bytes of an index file (Java IndexFile's fileTotalSize)."""
    return _index_file_size(hash_slot_num, index_num)


cdef inline uint32_t _hash_unit(uint32_t h, uint32_t unit) noexcept nogil:
    return 31u * h + unit


cdef uint32_t _hash_str(uint32_t h, str s):
    """Extend a Java String.hashCode state with ``s``'s UTF-16 code units (a code point above
    U+FFFF is a surrogate pair; a lone surrogate in ``s`` is one unit, as in Java)."""
    cdef Py_UCS4 c
    cdef uint32_t u
    for c in s:
        u = <uint32_t>c
        if u > 0xFFFF:
            u -= 0x10000
            h = _hash_unit(h, 0xD800 + (u >> 10))
            h = _hash_unit(h, 0xDC00 + (u & 0x3FF))
        else:
            h = _hash_unit(h, u)
    return h


cdef uint32_t _hash_utf8(uint32_t h, const uint8_t* p, Py_ssize_t n):
    """Extend a Java String.hashCode state with the UTF-8 text ``p[:n]`` (ASCII in C, in one
    pass; anything else decoded as Java does, malformed bytes as U+FFFD)."""
    cdef Py_ssize_t i = 0
    cdef uint32_t h0 = h
    while i + 4 <= n:                     # four units a step: 31^4, 31^3, 31^2, 31
        if (p[i] | p[i + 1] | p[i + 2] | p[i + 3]) >= 0x80:
            return _hash_str(h0, (<const char*>p)[:n].decode("utf-8", "replace"))
        h = 923521u * h + 29791u * p[i] + 961u * p[i + 1] + 31u * p[i + 2] + p[i + 3]
        i += 4
    while i < n:
        if p[i] >= 0x80:
            return _hash_str(h0, (<const char*>p)[:n].decode("utf-8", "replace"))
        h = _hash_unit(h, p[i])
        i += 1
    return h


cdef inline int32_t _key_hash(uint32_t h) noexcept nogil:
    """IndexFile.indexKeyHashMethod: abs of the signed hash, Integer.MIN_VALUE → 0."""
    cdef int32_t v = <int32_t>h
    if v == <int32_t>0x80000000u:
        return 0
    return -v if v < 0 else v


def index_key_hash(str topic, str key) -> int:
    """The slot hash of ``topic#key`` (IndexFile.indexKeyHashMethod over IndexService.buildKey)."""
    cdef uint32_t h = _hash_str(0, topic)
    h = _hash_unit(h, HASH_SEPARATOR)
    return _key_hash(_hash_str(h, key))


cdef int _index_put(uint8_t* base, int32_t slots, int32_t num, int32_t key_hash, int64_t phy,
                    int64_t store_ts) noexcept nogil:
    """IndexFile.putKey: 1 when written, 0 when the file is full. The caller checked the
    buffer holds the whole file."""
    cdef int32_t count = rd32(base + IDX_INDEX_COUNT)
    if count <= 0:
        count = 1                          # a new file's header is zero (IndexHeader.load)
    if count >= num:
        return 0
    cdef Py_ssize_t slot_at = IDX_HEADER_SIZE + <Py_ssize_t>(key_hash % slots) * IDX_SLOT_SIZE
    cdef int32_t slot_value = rd32(base + slot_at)
    if slot_value <= 0 or slot_value > count:
        slot_value = 0
    cdef int64_t begin_ts = rd64(base + IDX_BEGIN_TS)
    cdef int64_t diff = (store_ts - begin_ts) / 1000
    if begin_ts <= 0:
        diff = 0
    elif diff > INT32_MAX:
        diff = INT32_MAX
    elif diff < 0:
        diff = 0
    cdef uint8_t* e = base + IDX_HEADER_SIZE + <Py_ssize_t>slots * IDX_SLOT_SIZE + <Py_ssize_t>count * IDX_ENTRY_SIZE
    wr32(e + IDX_E_HASH, key_hash)
    wr64(e + IDX_E_PHY, phy)
    wr32(e + IDX_E_TIMEDIFF, diff)
    wr32(e + IDX_E_PREV, slot_value)
    wr32(base + slot_at, count)
    if count <= 1:
        wr64(base + IDX_BEGIN_PHY, phy)
        wr64(base + IDX_BEGIN_TS, store_ts)
    if slot_value == 0:
        wr32(base + IDX_SLOT_COUNT, rd32(base + IDX_SLOT_COUNT) + 1)
    wr32(base + IDX_INDEX_COUNT, count + 1)
    wr64(base + IDX_END_PHY, phy)
    wr64(base + IDX_END_TS, store_ts)
    return 1


cdef RecordBuf _index_buf(buf, int32_t slots, int32_t num, bint writable):
    if slots <= 0 or num <= 1:
        raise ValueError(f"bad index geometry: {slots} hash slots, {num} entries")
    cdef RecordBuf b = record_buf(buf, writable)
    if b.size < _index_file_size(slots, num):
        raise ValueError(f"index buffer of {b.size} bytes is smaller than {_index_file_size(slots, num)}")
    return b


def index_put(buf, int32_t hash_slot_num, int32_t index_num, int32_t key_hash, int64_t phy_offset,
              int64_t store_timestamp) -> bool:
    """Append one entry (IndexFile.putKey with a precomputed key hash); False when full."""
    cdef RecordBuf b = _index_buf(buf, hash_slot_num, index_num, True)
    return _index_put(b.wptr, hash_slot_num, index_num, key_hash, phy_offset, store_timestamp) == 1


cdef inline bint _index_skips(const uint8_t* base, int64_t phy, int32_t sys_flag) noexcept nogil:
    """IndexService.buildIndex's skips: a rollback record, or one at or below the file's
    endPhyOffset (indexed before: a re-dispatch)."""
    if (sys_flag & SYSFLAG_TRANSACTION_MASK) == SYSFLAG_TRANSACTION_ROLLBACK:
        return True
    cdef int64_t end_phy = rd64(base + IDX_END_PHY)
    # below endPhyOffset: indexed before (Java's check); at it: the last record indexed
    # (a file rolled from a previous one starts with that one's endPhyOffset)
    return phy < end_phy or (phy == end_phy and (rd32(base + IDX_INDEX_COUNT) > 1 or end_phy > 0))


cdef Py_ssize_t _index_record(uint8_t* base, int32_t slots, int32_t num, uint32_t prefix,
                              const uint8_t* props, Py_ssize_t plen, int64_t phy, int64_t store_ts,
                              Py_ssize_t key_i, Py_ssize_t max_keys, Py_ssize_t* capped) except -2:
    """Index one record's keys from key ``key_i`` (IndexService.buildIndex for one record):
    its UNIQ_KEY, then each non-empty space-separated KEYS item, at most ``max_keys`` in all,
    hashed from ``prefix`` (the hash state of ``topic#``). Returns -1 when done, else the key
    number at which the file is full (the caller rolls to a new file and goes on from it).
    The dispatcher (``_dispatch.pxi``) and ``index_build`` both index through this."""
    cdef Py_ssize_t k = 0, vat, vlen = 0, s, e, q
    vat = _find_prop(props, plen, _UNIQ_KEY, 8, &vlen)
    if vat >= 0 and vlen > 0:
        if k >= key_i:
            if not _index_put(base, slots, num, _key_hash(_hash_utf8(prefix, props + vat, vlen)), phy, store_ts):
                return k
        k += 1
    vat = _find_prop(props, plen, _KEYS, 4, &vlen)
    if vat >= 0:
        s = vat
        e = vat + vlen
        while s < e:
            while s < e and props[s] == KEY_SEPARATOR:
                s += 1
            if s >= e:
                break
            q = s
            while q < e and props[q] != KEY_SEPARATOR:
                q += 1
            if k >= max_keys:
                capped[0] += 1
                break
            if k >= key_i:
                if not _index_put(base, slots, num, _key_hash(_hash_utf8(prefix, props + s, q - s)), phy, store_ts):
                    return k
            k += 1
            s = q
    return -1


cdef inline uint32_t _index_prefix(str topic):
    """The hash state of ``topic#`` (IndexService.buildKey) over Java's UTF-16 code units."""
    return _hash_unit(_hash_str(0, topic), HASH_SEPARATOR)


def index_build(buf, int32_t hash_slot_num, int32_t index_num, records_buf, list records,
                Py_ssize_t rec_i, Py_ssize_t key_i, Py_ssize_t max_keys):
    """Index the keys of ``records`` (``scan_records`` tuples of the CommitLog file
    ``records_buf``) from record ``rec_i``, key ``key_i`` (IndexService.buildIndex).

    Each record's keys are its UNIQ_KEY then each non-empty space-separated KEYS item, at most
    ``max_keys`` in all, indexed as ``topic#key``. Skipped as Java skips them: rollback
    records, and records at or below the file's endPhyOffset (already indexed: a re-dispatch).

    Returns ``(rec_i, key_i, capped)``: ``rec_i == len(records)`` when done, else the file is
    full at that record's key ``key_i`` (the caller rolls to a new file and calls again);
    ``capped`` counts the records that had more than ``max_keys`` keys.
    """
    cdef RecordBuf b = _index_buf(buf, hash_slot_num, index_num, True)
    cdef RecordBuf r = record_buf(records_buf)
    cdef uint8_t* base = b.wptr
    cdef Py_ssize_t n = len(records), capped = 0, full
    cdef tuple rec
    cdef int64_t phy
    cdef Py_ssize_t ppos, plen
    while rec_i < n:
        rec = <tuple>records[rec_i]
        phy = rec[0]
        if key_i == 0 and _index_skips(base, phy, <int32_t>rec[7]):
            rec_i += 1
            continue
        ppos = rec[8]
        plen = rec[9]
        if ppos < 0 or plen < 0 or ppos + plen > r.size:
            raise ValueError(f"record properties [{ppos}, {ppos + plen}) outside the file")
        full = _index_record(base, hash_slot_num, index_num, _index_prefix(<str>rec[2]), r.ptr + ppos, plen,
                             phy, rec[6], key_i, max_keys, &capped)
        if full >= 0:
            return rec_i, full, capped
        rec_i += 1
        key_i = 0
    return rec_i, 0, capped


def index_select(buf, int32_t hash_slot_num, int32_t index_num, int32_t key_hash,
                 Py_ssize_t max_num, int64_t begin, int64_t end, list out) -> None:
    """IndexFile.selectPhyOffset: append to ``out`` the phy offsets of the entries with
    ``key_hash`` stored within ``[begin, end]`` ms, newest first, until ``out`` holds
    ``max_num``. The walk is bounded by the file's entry count (a damaged chain cannot loop)."""
    cdef RecordBuf b = _index_buf(buf, hash_slot_num, index_num, False)
    cdef const uint8_t* base = b.ptr
    cdef int32_t count = rd32(base + IDX_INDEX_COUNT)
    cdef int64_t begin_ts = rd64(base + IDX_BEGIN_TS)
    cdef int32_t nxt, prev, steps = 0
    cdef int64_t diff, t
    cdef const uint8_t* e
    if count > index_num:
        count = index_num
    nxt = rd32(base + IDX_HEADER_SIZE + <Py_ssize_t>(key_hash % hash_slot_num) * IDX_SLOT_SIZE)
    if nxt <= 0 or nxt > count or count <= 1:
        return
    while len(out) < max_num and steps < count:
        steps += 1
        if nxt >= index_num:
            break
        e = base + IDX_HEADER_SIZE + <Py_ssize_t>hash_slot_num * IDX_SLOT_SIZE + <Py_ssize_t>nxt * IDX_ENTRY_SIZE
        diff = rd32(e + IDX_E_TIMEDIFF)
        if diff < 0:
            break
        t = begin_ts + diff * 1000
        if rd32(e + IDX_E_HASH) == key_hash and begin <= t <= end:
            out.append(rd64(e + IDX_E_PHY))
        prev = rd32(e + IDX_E_PREV)
        if prev <= 0 or prev > count or prev == nxt or t < begin:
            break
        nxt = prev


def index_rebuild_slots(buf, int32_t hash_slot_num, int32_t index_num, int32_t count) -> int:
    """Truncate an index file to its first ``count - 1`` entries (a crash left later ones
    half-written): clear the slots and point each at its newest entry below ``count`` again
    (entries keep their prevIndex, written before them). Sets indexCount and hashSlotCount;
    returns the hash slot count."""
    cdef RecordBuf b = _index_buf(buf, hash_slot_num, index_num, True)
    cdef uint8_t* base = b.wptr
    cdef uint8_t* entries = base + IDX_HEADER_SIZE + <Py_ssize_t>hash_slot_num * IDX_SLOT_SIZE
    cdef int32_t i, h, used = 0
    cdef uint8_t* slot
    if count < 1:
        count = 1
    if count > index_num:
        count = index_num
    with nogil:
        memset(base + IDX_HEADER_SIZE, 0, <size_t>hash_slot_num * IDX_SLOT_SIZE)
        for i in range(1, count):
            h = rd32(entries + <Py_ssize_t>i * IDX_ENTRY_SIZE + IDX_E_HASH)
            if h < 0:
                h = 0
            slot = base + IDX_HEADER_SIZE + <Py_ssize_t>(h % hash_slot_num) * IDX_SLOT_SIZE
            if rd32(slot) == 0:
                used += 1
            wr32(slot, i)
        wr32(base + IDX_SLOT_COUNT, used)
        wr32(base + IDX_INDEX_COUNT, count)
    return used
