# cython: language_level=3
"""Reading and moving ``__slots__`` of Python objects at their offsets (header only: cimported,
never imported). A native hot path that reads a few fields of a Python object per message (a
MappedFile's positions, a config's or a topic config's fields) binds the class once
(``rmq_slot_offset``, a writable slot's offset, TypeError otherwise), checks ``type(o) is cls``
per object, and then reads the slot in a few instructions where an attribute read costs a type
lookup and a descriptor call (100 to 250 instructions). Python code keeps its own specialised
slot reads and writes, and every write is seen at the next read (nothing is cached). A slot
that holds something unexpected makes the caller decline (the Python path then reads it as an
attribute and words any error).

The class's module owns that state and says which of it native code may read this way: its
``__native_slots__``, a tuple of slot names, is the class's native API (its docstring says who
reads them). ``rmq_slot_offset`` binds only a name listed there, so a reader cannot reach into
a slot its owner did not publish, and the owner sees in one place what it must keep a plain
int, bool or str."""
from cpython.object cimport PyObject
from libc.stdint cimport int64_t

cdef extern from *:
    """
    #include <string.h>
    #include "structmember.h"
    /* The offset of ``cls``'s writable object slot ``name`` (a member descriptor of
       __slots__) that ``cls.__native_slots__`` lists, or -1 with a TypeError set. */
    static Py_ssize_t rmq_slot_offset(PyObject *cls, const char *name)
    {
        Py_ssize_t off = -1;
        int listed = 0;
        PyObject *pub, *key;
        PyObject *d = PyObject_GetAttrString(cls, name);
        if (d == NULL)
            return -1;
        if (Py_TYPE(d) == &PyMemberDescr_Type) {
            PyMemberDef *m = ((PyMemberDescrObject *)d)->d_member;
            if (m->type == T_OBJECT_EX && !(m->flags & READONLY))
                off = m->offset;
        }
        Py_DECREF(d);
        if (off < 0) {
            PyErr_Format(PyExc_TypeError, "%s is not a writable slot", name);
            return -1;
        }
        pub = PyObject_GetAttrString(cls, "__native_slots__");
        if (pub == NULL) {
            if (!PyErr_ExceptionMatches(PyExc_AttributeError))
                return -1;
            PyErr_Clear();
        } else {
            key = PyUnicode_FromString(name);
            if (key == NULL) {
                Py_DECREF(pub);
                return -1;
            }
            listed = PySequence_Contains(pub, key);
            Py_DECREF(key);
            Py_DECREF(pub);
            if (listed < 0)
                return -1;
        }
        if (!listed) {
            PyErr_Format(PyExc_TypeError, "%s is a slot of %R that its __native_slots__ does not list "
                         "(the fields its module lets native code read)", name, cls);
            return -1;
        }
        return off;
    }
    /* The slot at ``off`` of ``o`` (borrowed; NULL: not set). */
    static inline PyObject *rmq_slot(PyObject *o, Py_ssize_t off)
    {
        return *(PyObject **)((char *)o + off);
    }
    /* 1 with the slot's exact int in ``out``, 0 when it is not one (unset, another type,
       outside int64). */
    static inline int rmq_slot_i64(PyObject *o, Py_ssize_t off, int64_t *out)
    {
        PyObject *v = *(PyObject **)((char *)o + off);
        int overflow = 0;
        long long x;
        if (v == NULL || !PyLong_CheckExact(v))
            return 0;
        /* one digit or none (a config's numbers, a file's positions below 2**30): read in
           place, without PyLong_AsLongLongAndOverflow's call */
    #if PY_VERSION_HEX >= 0x030C0000
        if (PyUnstable_Long_IsCompact((PyLongObject *)v)) {
            *out = (int64_t)PyUnstable_Long_CompactValue((PyLongObject *)v);
            return 1;
        }
    #else
        if (Py_SIZE(v) == 0) {
            *out = 0;
            return 1;
        }
        if (Py_SIZE(v) == 1 || Py_SIZE(v) == -1) {
            *out = (int64_t)Py_SIZE(v) * (int64_t)((PyLongObject *)v)->ob_digit[0];
            return 1;
        }
    #endif
        x = PyLong_AsLongLongAndOverflow(v, &overflow);
        if (overflow || (x == -1 && PyErr_Occurred())) {
            PyErr_Clear();
            return 0;
        }
        *out = (int64_t)x;
        return 1;
    }
    /* Set the slot at ``off`` of ``o`` to the int ``v``: 0, or -1 with an error set. */
    static inline int rmq_slot_set_i64(PyObject *o, Py_ssize_t off, int64_t v)
    {
        PyObject *n = PyLong_FromLongLong(v), *old;
        PyObject **p = (PyObject **)((char *)o + off);
        if (n == NULL)
            return -1;
        old = *p;
        *p = n;
        Py_XDECREF(old);
        return 0;
    }
    /* 1 when the slot at ``off`` of ``o`` is True, 0 when it is False, -1 otherwise (unset,
       another type: the caller declines). */
    static inline int rmq_slot_bool(PyObject *o, Py_ssize_t off)
    {
        PyObject *v = *(PyObject **)((char *)o + off);
        return v == Py_True ? 1 : (v == Py_False ? 0 : -1);
    }
    /* 1 when the slot at ``off`` of ``o`` is an exact str equal to the ASCII ``s`` of ``n``
       bytes, 0 otherwise (unset, another type, other text). */
    static inline int rmq_slot_ascii_eq(PyObject *o, Py_ssize_t off, const char *s, Py_ssize_t n)
    {
        PyObject *v = *(PyObject **)((char *)o + off);
        return v != NULL && PyUnicode_CheckExact(v) && PyUnicode_IS_COMPACT_ASCII(v)
            && PyUnicode_GET_LENGTH(v) == n && memcmp(PyUnicode_DATA(v), s, (size_t)n) == 0;
    }
    """
    Py_ssize_t rmq_slot_offset(object cls, const char* name) except -1
    PyObject* rmq_slot(object o, Py_ssize_t off)
    int rmq_slot_i64(object o, Py_ssize_t off, int64_t* out)
    int rmq_slot_set_i64(object o, Py_ssize_t off, int64_t v) except -1
    int rmq_slot_bool(object o, Py_ssize_t off)
    int rmq_slot_ascii_eq(object o, Py_ssize_t off, const char* s, Py_ssize_t n)
