"""Crash-safe file replacement, shared by the broker's state files and the name server's
``kvConfig.json`` and configuration file (Java ``MixAll.string2File`` writes ``<file>.tmp``
and renames it; we also fsync, so a crash leaves the old or the new content, never a torn mix)."""

from __future__ import annotations

import os

__all__ = ["atomic_write"]


def atomic_write(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data``: write ``<path>.tmp``, fsync it, rename it over ``path``,
    fsync the directory. Creates the directory when missing; raises ``OSError``."""
    directory = os.path.dirname(path) or "."
    os.makedirs(directory, exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "wb") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, path)
    fd = os.open(directory, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)
