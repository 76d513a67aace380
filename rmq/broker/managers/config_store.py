"""Persisting the broker's small state files (topics, groups, offsets) atomically.

Java's ``ConfigManager`` writes JSON to ``<file>.tmp``, keeps a ``.bak`` and renames. We do
the POSIX-safe version of the same thing with msgpack (our own files need no Java reader):
write ``<file>.tmp``, ``fsync`` it, ``os.replace`` it over the file, ``fsync`` the directory.
After a crash the file is either the old or the new version, never a torn mix; a leftover
``.tmp`` is ignored. A file that cannot be decoded is kept aside as ``<file>.corrupt`` and the
manager starts empty, with an error in the log, rather than refusing to start.
"""
from __future__ import annotations

import abc
import logging
import os

import msgpack

log = logging.getLogger("rmq.broker")


def atomic_write(path: str, data: bytes) -> None:
    """Replace ``path`` with ``data`` so that a crash leaves the old or the new content."""
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


class ConfigManager(abc.ABC):
    """Base of the persisted managers: ``encode()`` → msgpack object, ``decode(obj)`` back.

    Subclasses set ``file_name`` and implement ``encode``/``decode``. ``persist()`` is cheap
    enough to call inline for topic and group changes (a few KiB); offsets are persisted on a
    timer by the controller.
    """

    file_name = "config.msgpack"

    def __init__(self, config_dir: str):
        self.config_dir = config_dir
        self.path = os.path.join(config_dir, self.file_name)

    @abc.abstractmethod
    def encode(self) -> object:
        """The manager's state as a msgpack-able object."""

    @abc.abstractmethod
    def decode(self, obj: object) -> None:
        """Restore the state written by :meth:`encode`."""

    def load(self) -> bool:
        """Load the file if present; True when something was loaded."""
        try:
            with open(self.path, "rb") as f:
                raw = f.read()
        except FileNotFoundError:
            return False
        try:
            self.decode(msgpack.unpackb(raw, raw=False, strict_map_key=False))
            return True
        except Exception as e:  # noqa: BLE001 - any decode failure means a damaged file
            aside = self.path + ".corrupt"
            log.error("cannot decode %s (%s); keeping it as %s and starting empty", self.path, e, aside)
            try:
                os.replace(self.path, aside)
            except OSError:
                pass
            return False

    def persist(self) -> None:
        atomic_write(self.path, msgpack.packb(self.encode(), use_bin_type=True))
