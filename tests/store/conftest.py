"""Fixtures for the store tests: real MessageStores on small files in a temp directory."""

import pytest
from store_support import STORE_HOST, small_config

from rmq.store import MessageStore


@pytest.fixture
async def make_store(tmp_path):
    """``await make_store(**config_overrides)`` → a started MessageStore on small files.

    Every store still running at the end of the test is shut down cleanly."""
    stores = []

    async def factory(root=None, disk_used_ratio=None, **kw):
        cfg = small_config(root or tmp_path / "store", **kw)
        s = MessageStore(cfg, STORE_HOST, disk_used_ratio=disk_used_ratio)
        await s.start()
        stores.append(s)
        return s

    yield factory
    for s in stores:
        await s.shutdown()
