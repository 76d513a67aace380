"""The order in which the test suite's files are collected, hence handed to `make test`'s
pytest-xdist workers.

`make test` sends whole files to its workers (``--dist loadfile``: a module's fixtures stay
single) in collection order (``--no-loadscope-reorder``; xdist's own order, by number of tests
per file, put the one-test packaging build and the Spark cluster near the end, where one
worker idled while the other finished them). A module that takes long declares it with
``pytest.mark.heavy(seconds)`` in its ``pytestmark``: its wall time on a quiet 2-core machine.
:func:`heavy_files_first` puts those files first, longest first, and leaves the others in
their collection order: longest-processing-time-first scheduling, the short files at the end
even the workers out. It is deterministic, as xdist requires every worker to collect the same
order.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Protocol

__all__ = ["HEAVY_MARK", "heavy_files_first", "heavy_seconds"]

HEAVY_MARK = "heavy"


class _Item(Protocol):
    """What this needs of a ``pytest.Item``."""

    @property
    def nodeid(self) -> str: ...

    @property
    def path(self) -> Path: ...

    def get_closest_marker(self, name: str) -> Any: ...


def heavy_seconds(item: _Item) -> float:
    """The seconds of the item's ``heavy`` mark (0.0 without one); raises ValueError naming
    the test when the mark's argument is not a positive number."""
    mark = item.get_closest_marker(HEAVY_MARK)
    if mark is None:
        return 0.0
    seconds = mark.args[0] if mark.args else mark.kwargs.get("seconds")
    if isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds <= 0:
        raise ValueError(f"{item.nodeid}: pytest.mark.heavy takes the module's seconds (a positive number)")
    return float(seconds)


def heavy_files_first(items: list[Any]) -> None:
    """Reorder ``items`` (pytest's collected items, in place): the files holding an item marked
    heavy first, by their largest ``heavy`` seconds (longest first; ties in collection order),
    then every other file in collection order. A file's items stay together and in order."""
    first_index: dict[Path, int] = {}
    weight: dict[Path, float] = {}
    for i, item in enumerate(items):
        first_index.setdefault(item.path, i)
        weight[item.path] = max(weight.get(item.path, 0.0), heavy_seconds(item))
    items.sort(key=lambda item: (-weight[item.path], first_index[item.path]))
