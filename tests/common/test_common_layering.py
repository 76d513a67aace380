"""Layers import downwards only, read from each module's syntax tree (nothing is imported):

    __main__                                python -m rmq
    → cli, _testing                         the command line and the test harness
      → console                             the web console (over the client's Admin)
      → broker | namesrv | client | spark | controller   (siblings: none imports another)
        → remoting | store                  (siblings)
          → protocol                        (codes, RemotingCommand, headers, requests, bodies)
            → types | config                (value types and statuses the request parsers
                                             return; configuration)
              → common
                → errors, _version, _store  (_store: the Cython extension, imports nothing)

Every import counts, including the ones inside functions and under ``if TYPE_CHECKING``: a lazy
import still ties the layers together. The native sources (``.pyx``, ``.pxd``, ``.pxi``) are held to
the same order through their ``cimport`` and ``import`` lines; a header-only ``.pxd`` (one without a
``.pyx``: inline helpers, no module at run time, e.g. rmq/common/_bytes.pxd) may be cimported from
any layer and cimports nothing from rmq itself. A module may import its own package freely. ``from rmq
import __version__`` counts as ``rmq._version``; anything else taken from the package root (the
public facade, which re-exports the client) must be imported from where it is defined.
"""

import ast
import pathlib
import re

import pytest

import rmq

ROOT = pathlib.Path(rmq.__file__).parent

RANK = {
    "errors": 0,
    "_version": 0,
    "_store": 0,
    "common": 1,
    "types": 2,
    "config": 2,
    "protocol": 3,
    "remoting": 4,
    "store": 4,
    "broker": 5,
    "namesrv": 5,
    "client": 5,
    "spark": 5,
    "controller": 5,
    "console": 6,
    "cli": 7,
    "_testing": 7,
    "__main__": 8,
}


def _top_units() -> set[str]:
    """Every first-level module or package of rmq (the extension by its stem)."""
    out = set()
    for p in ROOT.iterdir():
        if p.name.startswith("__pycache__") or p.name == "__init__.py":
            continue
        if p.is_dir() and (p / "__init__.py").exists():
            out.add(p.name)
        elif p.suffix in (".py", ".pyx", ".so", ".pyi"):
            out.add(p.name.split(".")[0])
    return out


def _unit_of(path: pathlib.Path) -> str:
    return path.relative_to(ROOT).parts[0].removesuffix(".py")


# the fields that hold statements (an import is a statement: expressions need not be walked)
_BODIES = ("body", "orelse", "finalbody", "handlers", "cases")


def _import_statements(tree: ast.AST):
    """Every Import / ImportFrom in ``tree``, at any depth (functions, classes, if, try, with,
    match), without visiting expressions: ast.walk over whole modules was most of this test's
    time."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            yield node
            continue
        for field in _BODIES:
            stack.extend(getattr(node, field, ()))


def _imported_units(path: pathlib.Path, root: pathlib.Path = ROOT) -> list[tuple[int, str]]:
    """``(line, first-level unit of rmq)`` for every rmq import in ``path``, in line order."""
    return [(line, name.split(".")[1]) for line, name in _imported_modules(path, root)]


def _imported_modules(path: pathlib.Path, root: pathlib.Path = ROOT) -> list[tuple[int, str]]:
    """``(line, dotted rmq module)`` for every rmq import in ``path``, in line order (``from m
    import x`` counts as ``m``)."""
    rel = path.relative_to(root.parent).with_suffix("").parts
    package = rel[:-1]  # a module's package, or the package of an __init__
    out = []
    for node in _import_statements(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = list(package[: len(package) - (node.level - 1)])
                module = ".".join(base + ([node.module] if node.module else []))
            else:
                module = node.module or ""
            if module == "rmq":  # from rmq import x: x is a first-level unit or a re-export
                names = ["rmq._version" if a.name == "__version__" else f"rmq.{a.name}" for a in node.names]
            else:
                names = [module]
        else:
            continue
        for name in names:
            parts = name.split(".")
            if parts[0] == "rmq" and len(parts) > 1:
                out.append((node.lineno, name))
    return sorted(out)


def test_every_first_level_unit_has_a_layer():
    missing = _top_units() - set(RANK)
    assert not missing, f"place {sorted(missing)} in a layer in RANK (and in the docstring's drawing)"


@pytest.mark.parametrize("unit", sorted(u for u in RANK if u not in ("_store",)))
def test_imports_go_downwards_only(unit):
    path = ROOT / unit
    files = sorted(path.rglob("*.py")) if path.is_dir() else [ROOT / f"{unit}.py"]
    files = [f for f in files if f.exists()]
    assert files, f"no source for rmq.{unit}"
    bad = []
    for f in files:
        for line, target in _imported_units(f):
            if target == unit:
                continue
            if target not in RANK:
                bad.append(
                    f"{f.relative_to(ROOT.parent)}:{line} imports rmq.{target}, which no layer holds "
                    "(a re-export of the package root? import it from where it is defined)"
                )
            elif RANK[target] >= RANK[unit]:
                bad.append(
                    f"{f.relative_to(ROOT.parent)}:{line} imports rmq.{target} "
                    f"(layer {RANK[target]}) from rmq.{unit} (layer {RANK[unit]})"
                )
    assert not bad, "imports must go downwards only:\n  " + "\n  ".join(bad)


# Inside the broker only the controller (and the package's facade) know BrokerController: the
# processors and the services they call see the broker through rmq.broker.context's protocols.
_CONTROLLER_IMPORTERS = {"broker/__init__.py", "broker/controller.py"}


def test_broker_modules_do_not_import_the_controller():
    bad = [
        f"{f.relative_to(ROOT.parent)}:{line} imports {name} (type it against rmq.broker.context instead)"
        for f in sorted((ROOT / "broker").rglob("*.py"))
        if f.relative_to(ROOT).as_posix() not in _CONTROLLER_IMPORTERS
        for line, name in _imported_modules(f)
        if name == "rmq.broker.controller" or name.startswith("rmq.broker.controller.")
    ]
    assert not bad, "\n  ".join(["processors must not import the controller:", *bad])


def test_the_controller_check_sees_an_import(tmp_path):
    pkg = tmp_path / "rmq" / "broker" / "processors"
    pkg.mkdir(parents=True)
    mod = pkg / "p.py"
    mod.write_text(
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from rmq.broker.controller import BrokerController\n"
        "from ..context import BrokerContext\n"
    )
    assert _imported_modules(mod, tmp_path / "rmq") == [(3, "rmq.broker.controller"), (4, "rmq.broker.context")]


_NATIVE_IMPORT = re.compile(r"^\s*(?:from\s+(rmq(?:\.\w+)*)\s+c?import\b|c?import\s+(rmq(?:\.\w+)*))", re.M)


def _native_unit(path: pathlib.Path) -> str:
    """The layer unit of a native source: top-level ``_*.pxi`` are included by rmq/_store.pyx."""
    parts = path.relative_to(ROOT).parts
    if len(parts) == 1:
        return "_store" if path.suffix == ".pxi" else parts[0].split(".")[0]
    return parts[0]


def _native_imports(path: pathlib.Path) -> list[tuple[int, str, str]]:
    """``(line, module, first-level unit)`` of every rmq import or cimport in a Cython source."""
    src = path.read_text()
    out = []
    for m in _NATIVE_IMPORT.finditer(src):
        module = m.group(1) or m.group(2)
        parts = module.split(".")
        if len(parts) > 1:
            out.append((src.count("\n", 0, m.start()) + 1, module, parts[1]))
    return out


def _header_only(module: str) -> bool:
    rel = pathlib.Path(*module.split(".")[1:])
    return (ROOT / rel.with_suffix(".pxd")).exists() and not (ROOT / rel.with_suffix(".pyx")).exists()


def test_native_sources_cimport_downwards_only():
    files = sorted(p for ext in ("*.pyx", "*.pxd", "*.pxi") for p in ROOT.rglob(ext))
    assert any(f.suffix == ".pxd" for f in files), "the native sources were not found"
    bad = []
    for f in files:
        unit = _native_unit(f)
        own = "rmq." + ".".join(f.relative_to(ROOT).with_suffix("").parts)
        for line, module, target in _native_imports(f):
            where = f"{f.relative_to(ROOT.parent)}:{line}"
            if _header_only(own):
                bad.append(f"{where}: the header-only {own} cimports {module}")
            elif _header_only(module) or target == unit:
                continue
            elif target not in RANK:
                bad.append(f"{where} imports {module}, which no layer holds")
            elif RANK[target] >= RANK[unit]:
                bad.append(f"{where} imports {module} (layer {RANK[target]}) from rmq.{unit} (layer {RANK[unit]})")
    assert not bad, "native imports must go downwards only:\n  " + "\n  ".join(bad)


def test_the_native_check_sees_a_cimport(tmp_path):
    f = tmp_path / "m.pyx"
    f.write_text(
        "from libc.stdint cimport int64_t\nfrom rmq._store cimport Appender\n"
        "cimport rmq.remoting._codec\nfrom rmq.remoting._codec cimport (\n    _JOut,\n)\n"
    )
    assert [(line, t) for line, _, t in _native_imports(f)] == [(2, "_store"), (3, "remoting"), (4, "remoting")]


def test_the_check_sees_a_violation(tmp_path):
    """The walker itself: an upward import inside a function and a relative one are both found."""
    pkg = tmp_path / "rmq" / "common"
    pkg.mkdir(parents=True)
    (tmp_path / "rmq" / "__init__.py").write_text("")
    (pkg / "__init__.py").write_text("")
    mod = pkg / "m.py"
    mod.write_text(
        "def f():\n    from rmq.broker import controller\nfrom ..remoting import codec\n"
        "from . import n\nfrom rmq import __version__\n"
    )
    assert _imported_units(mod, tmp_path / "rmq") == [(2, "broker"), (3, "remoting"), (4, "common"), (5, "_version")]
