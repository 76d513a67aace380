"""rmq.common is the bottom layer: it imports nothing from rmq but rmq.errors (and itself), and
the compiled leaf rmq._store (the record walker, which itself imports nothing from rmq at load)."""
import ast
import pathlib

import rmq.common

COMMON = pathlib.Path(rmq.common.__file__).parent


def _rmq_imports(path: pathlib.Path) -> set[str]:
    out = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "rmq"}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").split(".")[0] == "rmq":
            out.add(node.module)
    return out


def test_common_imports_only_errors_and_itself():
    files = sorted(COMMON.glob("*.py"))
    assert {f.name for f in files} >= {"__init__.py", "message.py", "tasks.py", "route.py"}
    for f in files:
        bad = {m for m in _rmq_imports(f) if m not in ("rmq.errors", "rmq._store") and not m.startswith("rmq.common")}
        assert not bad, f"{f.name} imports {sorted(bad)}"

