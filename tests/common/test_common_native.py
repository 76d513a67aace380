"""rmq.common.native is the one switch between the extensions and their pure-Python twins:
each part reports what it took, and the parts really run what they report (in this process,
where the extensions are built, and in a child with RMQ_NO_EXTENSIONS=1)."""

import json
import os
import subprocess
import sys

import pytest

from rmq.common import message, native
from rmq.protocol.body import register
from rmq.protocol.headers import _HeaderReader
from rmq.remoting import codec

PARTS = {"record walker", "header codec", "header reader", "register body reader"}

_REPORT = """
import json
from rmq.common import message, native
from rmq.remoting import codec
from rmq.protocol import headers
from rmq.protocol.body import register
print(json.dumps({
    "enabled": native.ENABLED,
    "implementations": native.IMPLEMENTATIONS,
    "walker_is_python": message.walk_records is message.walk_records_py,
    "json_encoder": codec._fast_encode is not None,
    "binary_codec": codec._fast_bin_encode is not None and codec._fast_bin_decode is not None,
    "reader": headers._HeaderReader is not None,
    "register_lines": register._native_lines is not None,
}))
"""


def _child(env_value):
    env = {k: v for k, v in os.environ.items() if k != "RMQ_NO_EXTENSIONS"}
    if env_value is not None:
        env["RMQ_NO_EXTENSIONS"] = env_value
    out = subprocess.run(
        [sys.executable, "-c", _REPORT], env=env, capture_output=True, text=True, timeout=120, check=True
    )
    return json.loads(out.stdout)


def test_this_process_runs_the_extensions():
    # every install builds them (make, pip): the test suite runs them unless told otherwise
    assert os.environ.get("RMQ_NO_EXTENSIONS") != "1"
    assert native.ENABLED
    assert dict.fromkeys(PARTS, "cython") == native.IMPLEMENTATIONS
    from rmq import _store
    from rmq.protocol import _codec

    assert message.walk_records is _store.walk_records
    assert codec._fast_encode is _codec.json_header_encode and codec._fast_bin_decode is _codec.binary_header_decode
    assert _HeaderReader is _codec.HeaderReader
    assert register._native_lines is _codec.register_topic_lines


@pytest.mark.integration  # a child interpreter
def test_the_switch_selects_the_python_twins_in_a_new_process():
    off = _child("1")
    assert off["enabled"] is False
    assert off["implementations"] == dict.fromkeys(PARTS, "python")
    assert off["walker_is_python"] and not off["json_encoder"] and not off["binary_codec"] and not off["reader"]
    assert not off["register_lines"]
    on = _child(None)
    assert on["enabled"] is True and on["implementations"] == dict.fromkeys(PARTS, "cython")
    assert not on["walker_is_python"] and on["json_encoder"] and on["binary_codec"] and on["reader"]
    assert on["register_lines"]


def test_only_the_switch_reads_the_environment():
    """RMQ_NO_EXTENSIONS is read in one place (it used to be read in three)."""
    import pathlib

    import rmq

    readers = [
        p.relative_to(pathlib.Path(rmq.__file__).parent).as_posix()
        for p in pathlib.Path(rmq.__file__).parent.rglob("*.py")
        if any(r in p.read_text() for r in ('environ.get("RMQ_NO_EXTENSIONS")', 'getenv("RMQ_NO_EXTENSIONS")'))
    ]
    assert readers == ["common/native.py"]
