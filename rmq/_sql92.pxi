# ---------------------------------------------------------------------------------------------
# SQL92 property programs (included by _store.pyx before get_message_scan).
#
# rmq.common.sql92 compiles a selector to Python closures and, when the whole expression is made
# of AND / OR / NOT over the common leaf shapes (a property against a number, a string or a
# boolean constant, IN, IS [NOT] NULL), also to a plan: nested tuples that SqlProgram turns into
# a flat array of nodes evaluated here, per record, on the property bytes themselves. A leaf
# that meets something only the Python evaluator decides exactly (non-ASCII text where Java
# parses numbers, a constant holding U+FFFD) answers SQ_FALLBACK, and the scan asks the Python
# evaluator for that record. Results follow Java's three-valued logic; SQ_ERROR is Java's
# exception (the record does not match).
# ---------------------------------------------------------------------------------------------
from libc.stdlib cimport strtod
from libc.math cimport isnan, signbit, NAN, INFINITY

cdef enum:
    SQ_FALSE = 0
    SQ_TRUE = 1
    SQ_NULL = 2
    SQ_ERROR = 3
    SQ_FALLBACK = 4

cdef enum:
    PN_AND = 1
    PN_OR = 2
    PN_NOT = 3
    PN_ISNULL = 4
    PN_INT = 5
    PN_DBL = 6
    PN_STR = 7
    PN_IN = 8
    PN_BOOL = 9

cdef enum:
    OP_EQ = 0
    OP_GT = 1
    OP_GE = 2
    OP_LT = 3
    OP_LE = 4

cdef struct PNode:
    int kind
    int slot
    int op
    int flag        # INT/DBL/STR: property on the left; IN: NOT IN; BOOL: the constant
    int first       # AND/OR/NOT: first child in kids; STR/IN: first constant in strs
    int count       # AND/OR: children; IN: constants
    int fallback    # STR/IN: a constant holds U+FFFD (an unequal value may decode equal)
    int64_t ki
    int64_t lo
    int64_t hi
    double kd

_OPS_CODE = {"=": OP_EQ, ">": OP_GT, ">=": OP_GE, "<": OP_LT, "<=": OP_LE}


cdef class SqlProgram:
    """The C form of a compiled SQL92 selector: ``SqlProgram(plan, keys)`` with ``keys`` the
    property names (UTF-8 bytes) in slot order and ``plan`` the nested tuples of
    ``rmq.common.sql92`` (or None: every record goes to the Python evaluator)."""
    cdef PNode* nodes
    cdef int* kids
    cdef const char** strs
    cdef Py_ssize_t* str_lens
    cdef const char** key_ptrs
    cdef Py_ssize_t* key_lens
    cdef const uint8_t** vals     # per record: where each property's value is (NULL: absent)
    cdef Py_ssize_t* lens
    cdef int nnodes, nkids, nstrs, root
    cdef readonly int nkeys
    cdef list _keep

    def __cinit__(self, plan, tuple keys):
        self._keep = list(keys)
        self.nkeys = len(keys)
        self.key_ptrs = <const char**>PyMem_Malloc((self.nkeys + 1) * sizeof(char*))
        self.key_lens = <Py_ssize_t*>PyMem_Malloc((self.nkeys + 1) * sizeof(Py_ssize_t))
        self.vals = <const uint8_t**>PyMem_Malloc((self.nkeys + 1) * sizeof(uint8_t*))
        self.lens = <Py_ssize_t*>PyMem_Malloc((self.nkeys + 1) * sizeof(Py_ssize_t))
        if self.key_ptrs == NULL or self.key_lens == NULL or self.vals == NULL or self.lens == NULL:
            raise MemoryError()
        cdef bytes k
        cdef int i
        for i in range(self.nkeys):
            k = keys[i]
            self.key_ptrs[i] = <const char*>k
            self.key_lens[i] = len(k)
        self.root = -1
        if plan is None:
            return
        nodes, kids, strs = [], [], []
        self.root = self._collect(plan, nodes, kids, strs)
        self.nnodes, self.nkids, self.nstrs = len(nodes), len(kids), len(strs)
        self.nodes = <PNode*>PyMem_Malloc((self.nnodes + 1) * sizeof(PNode))
        self.kids = <int*>PyMem_Malloc((self.nkids + 1) * sizeof(int))
        self.strs = <const char**>PyMem_Malloc((self.nstrs + 1) * sizeof(char*))
        self.str_lens = <Py_ssize_t*>PyMem_Malloc((self.nstrs + 1) * sizeof(Py_ssize_t))
        if self.nodes == NULL or self.kids == NULL or self.strs == NULL or self.str_lens == NULL:
            raise MemoryError()
        memset(self.nodes, 0, (self.nnodes + 1) * sizeof(PNode))
        for i in range(self.nkids):
            self.kids[i] = kids[i]
        for i in range(self.nstrs):
            k = strs[i]
            self._keep.append(k)
            self.strs[i] = <const char*>k
            self.str_lens[i] = len(k)
        for i in range(self.nnodes):
            self._fill(&self.nodes[i], nodes[i])

    def __dealloc__(self):
        PyMem_Free(self.nodes)
        PyMem_Free(self.kids)
        PyMem_Free(<void*>self.strs)
        PyMem_Free(self.str_lens)
        PyMem_Free(<void*>self.key_ptrs)
        PyMem_Free(self.key_lens)
        PyMem_Free(<void*>self.vals)
        PyMem_Free(self.lens)

    def _collect(self, plan, list nodes, list kids, list strs) -> int:
        """Number the plan's nodes depth first; children and constants go to their tables."""
        kind = plan[0]
        entry = list(plan)
        if kind in ("and", "or"):
            sub = [self._collect(p, nodes, kids, strs) for p in plan[1]]
            entry[1] = (len(kids), len(sub))
            kids.extend(sub)
        elif kind == "not":
            sub = [self._collect(plan[1], nodes, kids, strs)]
            entry[1] = (len(kids), 1)
            kids.extend(sub)
        elif kind == "str":
            entry[2] = (len(strs), 1)
            strs.append(bytes(plan[2]))
        elif kind == "in":
            entry[2] = (len(strs), len(plan[2]))
            strs.extend(bytes(s) for s in plan[2])
        nodes.append(tuple(entry))
        return len(nodes) - 1

    cdef _fill(self, PNode* n, tuple e):
        kind = e[0]
        if kind in ("and", "or", "not"):
            n.kind = PN_AND if kind == "and" else (PN_OR if kind == "or" else PN_NOT)
            n.first, n.count = e[1]
            return
        n.slot = e[1]
        if not 0 <= n.slot < self.nkeys:
            raise ValueError("plan slot out of range")
        if kind == "isnull":
            n.kind = PN_ISNULL
        elif kind == "int":        # ("int", slot, op, k, lo, hi, prop_left)
            n.kind = PN_INT
            n.op = _OPS_CODE[e[2]]
            n.ki, n.lo, n.hi, n.flag = e[3], e[4], e[5], e[6]
        elif kind == "dbl":        # ("dbl", slot, op, k, prop_left)
            n.kind = PN_DBL
            n.op = _OPS_CODE[e[2]]
            n.kd, n.flag = e[3], e[4]
        elif kind == "str":        # ("str", slot, k, prop_left, has_fffd)
            n.kind = PN_STR
            n.first, n.count = e[2]
            n.flag, n.fallback = e[3], e[4]
        elif kind == "in":         # ("in", slot, [k...], negated, has_fffd)
            n.kind = PN_IN
            n.first, n.count = e[2]
            n.flag, n.fallback = e[3], e[4]
        elif kind == "bool":       # ("bool", slot, k)
            n.kind = PN_BOOL
            n.flag = e[2]
        else:
            raise ValueError(f"unknown plan node {kind!r}")

    def evaluate(self, props) -> int:
        """The program's answer for one encoded properties string: 0 FALSE, 1 TRUE, 2 unknown,
        3 error, 4 ask the Python evaluator (for tests)."""
        cdef RecordBuf b = record_buf(props)
        _sq_values(self, b.ptr, b.size)
        if self.root < 0:
            return SQ_FALLBACK
        return _sq_eval(self, self.root)

    def values(self, props) -> list:
        """The values the selector's properties have in an encoded properties string (Java
        ``MessageDecoder.string2messageProperties``: the last of a repeated name wins, an
        empty value or one holding the name/value separator counts as absent)."""
        cdef RecordBuf b = record_buf(props)
        _sq_values(self, b.ptr, b.size)
        return _sq_value_list(self)


cdef list _sq_value_list(SqlProgram p):
    out = []
    cdef int i
    for i in range(p.nkeys):
        if p.vals[i] == NULL:
            out.append(None)
        else:
            out.append((<const char*>p.vals[i])[:p.lens[i]].decode("utf-8", "replace"))
    return out


cdef void _sq_values(SqlProgram p, const uint8_t* s, Py_ssize_t n) noexcept:
    cdef Py_ssize_t i = 0, start, sep, end, vend, j
    cdef int k
    cdef bint bad
    cdef const uint8_t** vals = p.vals
    cdef Py_ssize_t* lens = p.lens
    for k in range(p.nkeys):
        vals[k] = NULL
        lens[k] = 0
    while i <= n:
        start = i
        while i < n and s[i] != PROPERTY_SEPARATOR:
            i += 1
        end = i
        i += 1
        sep = start
        while sep < end and s[sep] != NAME_VALUE_SEPARATOR:
            sep += 1
        if sep >= end:
            continue
        vend = end
        while vend > sep + 1 and s[vend - 1] == NAME_VALUE_SEPARATOR:
            vend -= 1                   # String.split drops trailing empty strings
        if vend <= sep + 1:
            continue                    # "k\x01": one part, not put
        bad = False
        for j in range(sep + 1, vend):
            if s[j] == NAME_VALUE_SEPARATOR:
                bad = True              # three parts or more: not put
                break
        if bad:
            continue
        for k in range(p.nkeys):
            if p.key_lens[k] == sep - start and memcmp(p.key_ptrs[k], s + start, sep - start) == 0:
                vals[k] = s + sep + 1   # the last occurrence wins (HashMap.put)
                lens[k] = vend - sep - 1


cdef int _sq_parse_int(const uint8_t* s, Py_ssize_t n, int64_t lo, int64_t hi, int64_t* out) noexcept:
    """Java Integer.valueOf / Long.valueOf within [lo, hi] for ASCII text."""
    cdef Py_ssize_t i = 0, j
    cdef bint neg = False
    cdef uint64_t acc = 0, limit, d
    for j in range(n):
        if s[j] >= 0x80:
            return SQ_FALLBACK
    if n == 0:
        return SQ_ERROR
    if s[0] == 43 or s[0] == 45:     # '+' '-'
        neg = s[0] == 45
        i = 1
    if i == n:
        return SQ_ERROR
    limit = (<uint64_t>(-(lo + 1))) + 1 if neg else <uint64_t>hi
    while i < n:
        if s[i] < 48 or s[i] > 57:
            return SQ_ERROR
        d = s[i] - 48
        if acc > (limit - d) // 10:
            return SQ_ERROR
        acc = acc * 10 + d
        i += 1
    out[0] = <int64_t>(0 - acc) if neg else <int64_t>acc
    return SQ_TRUE


cdef inline bint _sq_digit(uint8_t c) noexcept:
    return 48 <= c <= 57


cdef int _sq_parse_double(const uint8_t* s, Py_ssize_t n, double* out) noexcept:
    """Java Double.valueOf for ASCII decimal text (trimmed of chars <= ' ', an optional sign,
    NaN / Infinity, digits with an optional point and exponent, an optional f/F/d/D)."""
    cdef Py_ssize_t a = 0, b = n, i, digits = 0, num_end
    cdef char buf[72]
    cdef bint neg = False
    for i in range(n):
        if s[i] >= 0x80:
            return SQ_FALLBACK
    while a < b and s[a] <= 32:
        a += 1
    while b > a and s[b - 1] <= 32:
        b -= 1
    i = a
    if i < b and (s[i] == 43 or s[i] == 45):
        neg = s[i] == 45
        i += 1
    if b - i == 3 and memcmp(s + i, b"NaN", 3) == 0:
        out[0] = NAN
        return SQ_TRUE
    if b - i == 8 and memcmp(s + i, b"Infinity", 8) == 0:
        out[0] = -INFINITY if neg else INFINITY
        return SQ_TRUE
    while i < b and _sq_digit(s[i]):
        i += 1
        digits += 1
    if i < b and s[i] == 46:         # '.'
        i += 1
        while i < b and _sq_digit(s[i]):
            i += 1
            digits += 1
    if digits == 0:
        return SQ_ERROR
    if i < b and (s[i] == 101 or s[i] == 69):     # e E
        i += 1
        if i < b and (s[i] == 43 or s[i] == 45):
            i += 1
        if i >= b or not _sq_digit(s[i]):
            return SQ_ERROR
        while i < b and _sq_digit(s[i]):
            i += 1
    num_end = i
    if i < b and (s[i] == 102 or s[i] == 70 or s[i] == 100 or s[i] == 68):   # f F d D
        i += 1
    if i != b:
        return SQ_ERROR
    if num_end - a >= 70:
        return SQ_FALLBACK
    memcpy(buf, s + a, num_end - a)
    buf[num_end - a] = 0
    out[0] = strtod(buf, NULL)
    return SQ_TRUE


cdef inline int _sq_dcmp(double a, double b) noexcept:
    """Java Double.compare."""
    cdef bint an, bn, sa, sb
    if a < b:
        return -1
    if a > b:
        return 1
    an = isnan(a)
    bn = isnan(b)
    if an or bn:
        return 0 if (an and bn) else (1 if an else -1)
    sa = signbit(a) != 0
    sb = signbit(b) != 0
    return 0 if sa == sb else (-1 if sa else 1)


cdef inline int _sq_answer(int op, int c) noexcept:
    if op == OP_EQ:
        return SQ_TRUE if c == 0 else SQ_FALSE
    if op == OP_GT:
        return SQ_TRUE if c > 0 else SQ_FALSE
    if op == OP_GE:
        return SQ_TRUE if c >= 0 else SQ_FALSE
    if op == OP_LT:
        return SQ_TRUE if c < 0 else SQ_FALSE
    return SQ_TRUE if c <= 0 else SQ_FALSE


cdef int _sq_eval(SqlProgram p, int idx) noexcept:
    cdef PNode* n = &p.nodes[idx]
    cdef int r, j, c
    cdef bint unknown, found
    cdef const uint8_t* v
    cdef Py_ssize_t vl
    cdef int64_t iv
    cdef double dv
    if n.kind == PN_AND or n.kind == PN_OR:
        unknown = False
        for j in range(n.count):
            r = _sq_eval(p, p.kids[n.first + j])
            if r >= SQ_ERROR:
                return r
            if r == SQ_NULL:
                unknown = True
            elif n.kind == PN_AND and r == SQ_FALSE:
                return SQ_FALSE
            elif n.kind == PN_OR and r == SQ_TRUE:
                return SQ_TRUE
        if unknown:
            return SQ_NULL
        return SQ_TRUE if n.kind == PN_AND else SQ_FALSE
    if n.kind == PN_NOT:
        r = _sq_eval(p, p.kids[n.first])
        if r >= SQ_NULL:
            return r
        return SQ_FALSE if r == SQ_TRUE else SQ_TRUE
    v = p.vals[n.slot]
    vl = p.lens[n.slot]
    if n.kind == PN_ISNULL:
        return SQ_TRUE if v == NULL else SQ_FALSE
    if v == NULL:
        # Java's equality: a missing left side is unknown, a missing right side FALSE
        if (n.kind == PN_INT or n.kind == PN_DBL) and n.op == OP_EQ and not n.flag:
            return SQ_FALSE
        if n.kind == PN_STR and not n.flag:
            return SQ_FALSE
        return SQ_NULL
    if n.kind == PN_INT:
        r = _sq_parse_int(v, vl, n.lo, n.hi, &iv)
        if r != SQ_TRUE:
            return r
        c = (iv > n.ki) - (iv < n.ki)
        return _sq_answer(n.op, c if n.flag else -c)
    if n.kind == PN_DBL:
        r = _sq_parse_double(v, vl, &dv)
        if r != SQ_TRUE:
            return r
        return _sq_answer(n.op, _sq_dcmp(dv, n.kd) if n.flag else _sq_dcmp(n.kd, dv))
    if n.kind == PN_STR:
        if p.str_lens[n.first] == vl and memcmp(p.strs[n.first], v, vl) == 0:
            return SQ_TRUE
        return SQ_FALLBACK if n.fallback else SQ_FALSE
    if n.kind == PN_IN:
        found = False
        for j in range(n.count):
            if p.str_lens[n.first + j] == vl and memcmp(p.strs[n.first + j], v, vl) == 0:
                found = True
                break
        if not found and n.fallback:
            return SQ_FALLBACK
        return SQ_TRUE if found != n.flag else SQ_FALSE
    # PN_BOOL: Java Boolean.valueOf, "true" ignoring case
    for j in range(vl):
        if v[j] >= 0x80:
            return SQ_FALLBACK
    found = vl == 4 and (v[0] | 32) == 116 and (v[1] | 32) == 114 and (v[2] | 32) == 117 and (v[3] | 32) == 101
    return SQ_TRUE if found == n.flag else SQ_FALSE


cdef bint _record_sql_match(const uint8_t* rec, int32_t size, SqlProgram program, object fallback) except -1:
    """The property stage of the pull scan: the program decides, or for the records it hands
    back, ``fallback`` (the Python evaluator) given the values as strings."""
    cdef RecordSpan r
    cdef int res
    if _walk(rec, size, False, &r) != W_OK:
        return False
    _sq_values(program, rec + r.props_at, r.props_len)
    if program.root >= 0:
        res = _sq_eval(program, program.root)
        if res != SQ_FALLBACK:
            return res == SQ_TRUE
    return bool(fallback(_sq_value_list(program)))
