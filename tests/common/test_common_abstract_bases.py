"""The abstract bases refuse construction when a subclass forgets a method (at construction,
not mid-run when the method is first called)."""

import pytest

from rmq.broker.managers.config_store import ConfigManager
from rmq.client.consumer.offset_store import OffsetStore


def test_config_manager_needs_encode_and_decode(tmp_path):
    class Half(ConfigManager):
        def encode(self):
            return {}

    with pytest.raises(TypeError, match="decode"):
        Half(str(tmp_path))


def test_offset_store_needs_its_backing_store_methods():
    class ReadOnly(OffsetStore):
        async def _read_from_store(self, mq):
            return -1

    with pytest.raises(TypeError, match="persist_all"):
        ReadOnly()
