"""rmq._testing.order: the collection order `make test` hands to its xdist workers (heavy files
first, longest first, the rest in collection order, each file's tests together)."""

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest

from rmq._testing.order import heavy_files_first, heavy_seconds


@dataclass
class _Item:
    """The part of a pytest.Item the ordering reads (path, nodeid, markers)."""

    file: str
    name: str
    marks: list[Any] = field(default_factory=list)

    @property
    def path(self) -> Path:
        return Path("/t") / self.file

    @property
    def nodeid(self) -> str:
        return f"{self.file}::{self.name}"

    def get_closest_marker(self, name: str) -> Any:
        return next((m for m in self.marks if m.name == name), None)


def _heavy(*args: Any, **kwargs: Any) -> Any:
    return pytest.mark.heavy(*args, **kwargs).mark


def test_heavy_files_go_first_longest_first_and_the_rest_keep_their_order():
    items = [
        _Item("a/test_a.py", "t1"),
        _Item("a/test_b.py", "t1", [_heavy(30)]),
        _Item("a/test_b.py", "t2", [_heavy(30)]),
        _Item("a/test_c.py", "t1"),
        _Item("test_pack.py", "t1", [_heavy(seconds=190)]),
        _Item("a/test_a.py", "t2"),  # (a file's tests arrive together in pytest; kept in order anyway)
        _Item("test_z.py", "t1", [_heavy(30)]),
    ]
    heavy_files_first(items)
    assert [i.nodeid for i in items] == [
        "test_pack.py::t1",
        "a/test_b.py::t1",
        "a/test_b.py::t2",
        "test_z.py::t1",  # same weight as test_b.py, collected after it
        "a/test_a.py::t1",
        "a/test_a.py::t2",
        "a/test_c.py::t1",
    ]
    before = [i.nodeid for i in items]
    heavy_files_first(items)  # idempotent: the order it gives is its own fixed point
    assert [i.nodeid for i in items] == before


def test_a_heavy_mark_without_positive_seconds_names_the_test():
    assert heavy_seconds(_Item("f.py", "t")) == 0.0
    assert heavy_seconds(_Item("f.py", "t", [_heavy(2.5)])) == 2.5
    for bad in (_heavy(), _heavy(0), _heavy("long"), _heavy(True)):
        with pytest.raises(ValueError, match=r"f\.py::t: pytest\.mark\.heavy takes"):
            heavy_seconds(_Item("f.py", "t", [bad]))
