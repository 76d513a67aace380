"""Every input the fuzzers found (tests/fuzz/crashes/<target>__<what>.bin) replayed through its
target: only the target's documented errors may come out. Each file was a crash once (a
non-UTF-8 topic and IPv6 records shorter than their hosts in the batch decoder, route JSON
nested 5000 deep); any undeclared exception now fails the test.
"""

import importlib
import os
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
CRASHES = sorted((HERE / "crashes").glob("*.bin"))


def _target(name: str):
    os.environ["RMQ_FUZZ_NO_INSTRUMENT"] = "1"
    return importlib.import_module(f"fuzz_{name}")


def test_every_target_has_seeds_that_pass():
    """The targets themselves work: each one's seeds run clean (so a crash file means a bug)."""
    names = sorted(p.stem[len("fuzz_") :] for p in HERE.glob("fuzz_*.py"))
    assert {"frame_decoder", "json_header", "binary_header", "record", "batch", "properties", "route_json"} <= set(
        names
    )
    for name in names:
        mod = _target(name)
        from fuzzlib import guarded

        one = guarded(mod.target, mod.ALLOWED)
        for seed in mod.seeds():
            one(seed)


@pytest.mark.parametrize("path", CRASHES, ids=[p.name for p in CRASHES])
def test_crash_input_only_raises_documented_errors(path):
    mod = _target(path.name.split("__", 1)[0])
    try:
        mod.target(path.read_bytes())
    except mod.ALLOWED:
        pass
