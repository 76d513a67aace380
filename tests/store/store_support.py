"""Helpers shared by the store tests and the crash-test writer subprocess.

(Not in conftest.py: several test directories have a conftest, and ``from conftest import``
resolves to whichever was imported first.)
"""

from rmq.store import StoreConfig

STORE_HOST = ("127.0.0.1", 10911)


def small_config(root, **kw) -> StoreConfig:
    """Small files so rolls, BLANK records and CQ file boundaries happen in every test."""
    base = dict(
        store_path_root_dir=str(root),
        mapped_file_size_commitlog=64 * 1024,
        mapped_file_size_consume_queue=20 * 100,
        max_hash_slot_num=1000,
        max_index_num=4000,
    )
    base.update(kw)
    return StoreConfig(**base)
