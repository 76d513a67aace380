"""Fixtures for the store tests: real MessageStores on small files in a temp directory."""
import pytest

from rmq.store import MessageStore, StoreConfig

STORE_HOST = ("127.0.0.1", 10911)


def small_config(root, **kw) -> StoreConfig:
    """Small files so rolls, BLANK records and CQ file boundaries happen in every test."""
    base = dict(store_path_root_dir=str(root), mapped_file_size_commitlog=64 * 1024,
                mapped_file_size_consume_queue=20 * 100)
    base.update(kw)
    return StoreConfig(**base)


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
