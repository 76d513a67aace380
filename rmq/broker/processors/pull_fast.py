"""The plain pull answered straight from its frame (``PullFastPath``,
rmq/broker/processors/_pullpath.pyx), beside the Python processor (``pull.py``), which handles
every pull the native path declines (see the .pyx for the list: SQL92 and class filters, long
polls, offset corrections, groups to auto-create, refusals, ...).

:func:`header_spec` reads the wire names, kinds and ranges from the PULL header's declaration
(``PullMessageRequestHeader``), so the native reader and the typed header take the same
names and the same values.
"""

from __future__ import annotations

import dataclasses
import typing
from typing import Any

from rmq.broker.processors._pullpath import PullFastPath
from rmq.protocol.headers.consumer import PullMessageRequestHeader

__all__ = ["header_spec", "make_fast_path"]

_KINDS = {str: 0, int: 1}


def header_spec() -> list[tuple[str, str, int, bool, int, int]]:
    """``(attribute, wire name, kind, required, lo, hi)`` of every PULL header field."""
    hints = typing.get_type_hints(PullMessageRequestHeader)
    out = []
    for f in dataclasses.fields(PullMessageRequestHeader):
        tp: Any = hints[f.name]
        args = [a for a in typing.get_args(tp) if a is not type(None)]
        base = args[0] if args else tp
        lo, hi = f.metadata["range"] if base is int else (0, 0)
        out.append((f.name, f.metadata["wire"], _KINDS[base], f.default is dataclasses.MISSING, lo, hi))
    return out


def make_fast_path(controller: Any, processor: Any) -> PullFastPath:
    """The native pull path of ``controller``'s PULL processor ``processor`` (its filter cache and
    ``PullCounters`` shared); no store until ``bind``."""
    return PullFastPath(header_spec(), controller, processor)
