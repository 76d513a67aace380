"""No module outside rmq/store reaches into the store's private state (issue 24): every
``x._name`` in rmq's Python and Cython sources outside the store, where ``_name`` is a private
attribute or method of ``MessageStore``, ``CommitLog`` or the C-level ``Appender``, fails here.
The names come from the classes themselves (their syntax trees and rmq/_store.pxd), so a new
private attribute is covered as soon as it exists. ``self._name`` / ``cls._name`` are a class's
own business and are not counted."""

import ast
import pathlib
import re

import rmq

ROOT = pathlib.Path(rmq.__file__).parent
STORE_CLASSES = {"store/message_store.py": "MessageStore", "store/commitlog.py": "CommitLog"}
# The store extension's own sources (rmq._store is the store's native half).
STORE_NATIVE = {"_store.pyx", "_store.pxd", "_append.pxi", "_qtable.pxi", "_index.pxi", "_dispatch.pxi", "_sql92.pxi"}


def _private_names() -> set[str]:
    names: set[str] = set()
    for rel, cls_name in STORE_CLASSES.items():
        tree = ast.parse((ROOT / rel).read_text())
        cls = next(n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == cls_name)
        for node in ast.walk(cls):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                names.add(node.name)
            elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "self":
                names.add(node.attr)
    # the Appender's C-level members that are not public (``cdef`` without public/readonly)
    pxd = (ROOT / "_store.pxd").read_text()
    body = pxd[pxd.index("cdef class Appender") :]
    for line in body.splitlines()[1:]:
        m = re.match(r"\s+cdef\s+(?!public|readonly)[\w ]+?\b(\w+)\s*(\(|$|,)", line)
        if m:
            names.add(m.group(1))
    return {n for n in names if n.startswith("_") and not n.startswith("__")}


def _outside_store() -> list[pathlib.Path]:
    out = []
    for p in sorted(ROOT.rglob("*")):
        rel = p.relative_to(ROOT).as_posix()
        if p.suffix not in (".py", ".pyx", ".pxd", ".pxi") or rel.startswith("store/") or rel in STORE_NATIVE:
            continue
        out.append(p)
    return out


# ``.`` then a private name, maybe across whitespace, line breaks and comments (inside brackets);
# group 1 is set when the object is plainly ``self`` or ``cls`` (not ``x.self``)
_DOT_PRIVATE = re.compile(r"(?:(?<![\w.])(self|cls))?\s*\.\s*(?:#[^\n]*\n\s*)*(_\w+)")


def _accesses(path: pathlib.Path, names: set[str]) -> list[str]:
    src = path.read_text()
    hits = []
    if path.suffix == ".py":
        # no attribute access to any of ``names`` in the text: no syntax tree needed (parsing
        # every module was most of this test's time)
        if names.isdisjoint(name for own, name in _DOT_PRIVATE.findall(src) if not own):
            return hits
        for node in ast.walk(ast.parse(src, str(path))):
            if (
                isinstance(node, ast.Attribute)
                and node.attr in names
                and not (isinstance(node.value, ast.Name) and node.value.id in ("self", "cls"))
            ):
                hits.append(f"{path.relative_to(ROOT.parent)}:{node.lineno}: .{node.attr}")
    else:  # Cython: no syntax tree here, the attribute accesses by pattern
        for i, line in enumerate(src.splitlines(), 1):
            for m in re.finditer(r"(\w+)\s*\.\s*(_\w+)", line.split("#", 1)[0]):
                if m.group(2) in names and m.group(1) not in ("self", "cls"):
                    hits.append(f"{path.relative_to(ROOT.parent)}:{i}: .{m.group(2)}")
    return hits


def test_the_names_come_from_the_store_classes():
    names = _private_names()
    # a few that exist today (the Python classes' and the Appender's): if these go, the
    # derivation above broke, not the rule
    assert {"_after_append", "_stats", "_queues", "_id_prefix", "_refresh_table", "_after"} <= names
    assert not any(n.startswith("__") or not n.startswith("_") for n in names)


def test_no_module_outside_the_store_touches_its_private_state():
    names = _private_names()
    hits = [h for p in _outside_store() for h in _accesses(p, names)]
    assert not hits, "private store state used outside rmq/store:\n  " + "\n  ".join(hits)


def test_the_scan_sees_an_access(tmp_path):
    py = tmp_path / "m.py"
    py.write_text("def f(store):\n    return store.commit_log._topic_cache, self._topic_cache\n")
    # across a line break and a comment (the text filter must let it through to the tree)
    py2 = tmp_path / "m2.py"
    py2.write_text("def f(x):\n    self._stats = cls._stats\n    return (x.\n        # why\n        _stats)\n")
    pyx = tmp_path / "m.pyx"
    pyx.write_text("cdef f(cl):\n    return cl._id_prefix  # cl._stats\n")
    global ROOT
    old, ROOT = ROOT, tmp_path
    try:
        assert _accesses(py, {"_topic_cache"}) == [f"{tmp_path.name}/m.py:2: ._topic_cache"]
        assert _accesses(py2, {"_stats"}) == [f"{tmp_path.name}/m2.py:3: ._stats"]
        assert _accesses(pyx, {"_id_prefix", "_stats"}) == [f"{tmp_path.name}/m.pyx:2: ._id_prefix"]
    finally:
        ROOT = old
