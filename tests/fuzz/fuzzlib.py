"""Shared plumbing of the atheris fuzz targets in this directory.

Each ``fuzz_*.py`` defines ``TARGET`` (a callable taking the fuzzer's bytes), ``ALLOWED`` (the
exception types the target documents) and ``seeds()`` (valid inputs to start from), and ends
with ``main(__file__)``. Run one standalone::

    python tests/fuzz/fuzz_frame_decoder.py -max_total_time=60

Any exception outside ``ALLOWED`` escapes to libFuzzer, which reports it as a crash and writes
the input to ``crash-<sha1>`` (``-artifact_prefix=DIR/`` chooses where). With no corpus
directory on the command line, a temporary one is filled from ``seeds()``.

``FUZZ_CONTINUE=DIR`` (what ``run_all.py`` sets) keeps fuzzing past crashes instead: the first
input of each distinct crash (exception type + the line that raised it) is written to
``DIR/crash-<signature>``, and ``DIR/counts.txt`` counts them (libFuzzer's own fork mode does
not work under atheris).
"""

from __future__ import annotations

import base64
import hashlib
import json
import os
import sys
import tempfile
import traceback
from collections.abc import Callable, Iterable
from pathlib import Path

# This tree's rmq, not an installed one: run_all.py puts the repository on PYTHONPATH (run a
# target by hand with `PYTHONPATH=. python tests/fuzz/fuzz_<name>.py`).
ROOT = Path(__file__).resolve().parents[2]

GOLDEN = ROOT / "tests" / "golden"


def golden_frames() -> list[bytes]:
    """Whole frames captured from Java RocketMQ 4.9.8 (both header codecs) and its pull replies."""
    out = []
    for path in [*sorted((GOLDEN / "remoting").glob("*.jsonl")), GOLDEN / "rocketmq-4.9.8-pull-responses.jsonl"]:
        for line in path.read_text().splitlines():
            rec = json.loads(line)
            if "frame_b64" in rec:
                out.append(base64.b64decode(rec["frame_b64"]))
    return out


def golden_pull_bodies() -> list[bytes]:
    """Bodies of Java's PULL_MESSAGE replies: back-to-back CommitLog records."""
    from rmq.remoting.codec import decode_frame

    out = []
    for line in (GOLDEN / "rocketmq-4.9.8-pull-responses.jsonl").read_text().splitlines():
        body = decode_frame(base64.b64decode(json.loads(line)["frame_b64"])).body_bytes()
        if body:
            out.append(body)
    return out


def guarded(target: Callable[[bytes], object], allowed: tuple[type[BaseException], ...]) -> Callable[[bytes], None]:
    """``target`` with its documented exceptions swallowed; anything else propagates (or, with
    ``FUZZ_CONTINUE``, is recorded once per signature)."""
    keep_going = os.environ.get("FUZZ_CONTINUE")
    seen: dict[str, int] = {}
    total = 0

    def one_input(data: bytes) -> None:
        nonlocal total
        try:
            target(data)
        except allowed:
            pass
        except Exception as e:
            if not keep_going:
                raise
            tb = traceback.extract_tb(e.__traceback__)[-1]
            sig = f"{type(e).__name__} at {Path(tb.filename).name}:{tb.lineno}"
            total += 1
            first = sig not in seen
            seen[sig] = seen.get(sig, 0) + 1
            if first:
                name = hashlib.sha1(sig.encode()).hexdigest()[:12]
                Path(keep_going, f"crash-{name}").write_bytes(data)
                print(f"=== CRASH (continuing): {sig}: {str(e)[:200]}", file=sys.stderr, flush=True)
            if first or total & (total - 1) == 0:
                Path(keep_going, "counts.txt").write_text("".join(f"{n}\t{s}\n" for s, n in seen.items()))

    return one_input


def main(
    target: Callable[[bytes], object], allowed: tuple[type[BaseException], ...], seeds: Callable[[], Iterable[bytes]]
) -> None:
    import atheris

    argv = list(sys.argv)
    if not any(not a.startswith("-") for a in argv[1:]):
        corpus = tempfile.mkdtemp(prefix="rmq-fuzz-")
        for i, seed in enumerate(seeds()):
            Path(corpus, f"seed-{i:04d}").write_bytes(seed)
        argv.append(corpus)
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 1000))
    atheris.Setup(argv, guarded(target, allowed))
    atheris.Fuzz()


def instrument() -> object:
    """``atheris.instrument_imports`` limited to rmq (coverage feedback from our code only);
    a no-op context when imported by the regression tests (``RMQ_FUZZ_NO_INSTRUMENT=1``)."""
    if os.environ.get("RMQ_FUZZ_NO_INSTRUMENT") == "1":
        import contextlib

        return contextlib.nullcontext()
    import atheris

    return atheris.instrument_imports(include=["rmq"])
