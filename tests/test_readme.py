"""Every code block of README.md runs as written, against a live ``rmq standalone``.

The convention for README authors (the markers are HTML comments, invisible on GitHub):

* ```` ```sh ```` / ```` ```bash ```` blocks: each command (a line, ``\\``-continued lines joined;
  a block with a heredoc runs as one script) runs in bash in a scratch directory, against a
  ``rmq standalone`` on free ports: ``127.0.0.1:9876`` and ``127.0.0.1:10911`` in the text are
  rewritten to its name server and broker, ``$NAMESRV_ADDR`` points at it (so ``rmq admin``
  without ``-n`` reaches it) and ``rmq`` is this checkout's. A command must exit 0, or 1 (a
  daemon's refusal, which rmq prints with its code and remark); never 2 (bad flags or an
  unreachable peer), and never with a traceback.
* ```` ```python ```` blocks: must pass ``mypy --strict`` and run to exit 0 as a script (with
  the same address rewriting).
* ```` ```text ```` blocks are prose (trees, diagrams): not run.
* A block that cannot run as is carries, on the line just before it, either
  ``<!-- readme-test: skip (why) -->`` (not run; the test prints why), or
  ``<!-- readme-test: file NAME -->`` (its text is written to NAME in the scratch directory,
  for the blocks after it).
* Anything else fails the test: an unmarked block in another language, an unknown marker.

What the examples take for granted exists before the first block runs: topic ``T`` holding a
message with key ``order-42`` (its ids in ``$MSG_ID`` / ``$OFFSET_MSG_ID``), producer group
``PG`` and consumer group ``G`` (subscribed to ``T``, offsets committed) online.
Blocks run in order against one cluster, so a block must leave it as the later ones expect
(the admin cheat sheet deletes the order conf it puts on ``T``: while it exists, producers send to
the queues it names, not to the broker's).
"""

from __future__ import annotations

import asyncio
import os
import re
import stat
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest

import rmq
from rmq._testing import StandaloneProcess, wait_until
from rmq.client.admin import Admin, AdminError

# About 60 commands, each a fresh interpreter importing the SDK (~0.8 CPU-seconds): some 6 minutes
# at a load average of 12 on 2 cores, past the suite's 300 s hang guard.
pytestmark = [pytest.mark.slow, pytest.mark.timeout(1200), pytest.mark.heavy(60)]

ROOT = Path(__file__).resolve().parent.parent
README = ROOT / "README.md"
MARKER = re.compile(r"<!--\s*readme-test:\s*(.*?)\s*-->")
FENCE = re.compile(r"^```(\S*)\s*$")
TIMEOUT = 180  # per command or script; generous for a busy machine
SHELL = {"sh", "bash", "shell"}


@dataclass
class Block:
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    marker: str | None  # the readme-test marker's text, if any


def readme_blocks(text: str) -> list[Block]:
    """The fenced code blocks of ``text``, with the marker on the line before each."""
    blocks: list[Block] = []
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        start, lang = i, m.group(1).lower()
        j = i + 1
        while j < len(lines) and lines[j].rstrip() != "```":
            j += 1
        prev = next((lines[k] for k in range(start - 1, -1, -1) if lines[k].strip()), "")
        mk = MARKER.search(prev)
        blocks.append(Block(start + 1, lang, "\n".join(lines[start + 1 : j]) + "\n", mk.group(1) if mk else None))
        i = j + 1
    return blocks


def test_readme_blocks_are_found_and_marked():
    """The parser itself: every block is found, and markers are of the two known kinds."""
    text = README.read_text()
    blocks = readme_blocks(text)
    assert 2 * len(blocks) == sum(1 for line in text.splitlines() if line.startswith("```"))
    for b in blocks:
        if b.marker is not None:
            assert b.marker.startswith(("skip (", "file ")), f"README.md:{b.line}: unknown marker {b.marker!r}"
    sample = readme_blocks("x\n<!-- readme-test: skip (why) -->\n```sh\nls\n```\n```python\npass\n```\n")
    assert [(b.lang, b.marker, b.text) for b in sample] == [("sh", "skip (why)", "ls\n"), ("python", None, "pass\n")]


def _commands(script: str) -> list[str]:
    """One entry per command: comment-only lines dropped, backslash continuations joined."""
    out: list[str] = []
    pending = ""
    for line in script.splitlines():
        if not pending and (not line.strip() or line.lstrip().startswith("#")):
            continue
        if line.rstrip().endswith("\\"):
            pending += line.rstrip()[:-1] + " "
            continue
        out.append(pending + line)
        pending = ""
    if pending:
        out.append(pending)
    return out


class Runner:
    def __init__(self, d: StandaloneProcess, work: Path, env_extra: dict[str, str]) -> None:
        self.d = d
        self.work = work
        bindir = work / "bin"
        bindir.mkdir()
        shim = bindir / "rmq"  # this checkout's rmq
        shim.write_text(f'#!/bin/sh\nexec "{sys.executable}" -m rmq "$@"\n')
        shim.chmod(shim.stat().st_mode | stat.S_IXUSR)
        self.env = dict(
            os.environ,
            PATH=f"{bindir}{os.pathsep}{os.environ.get('PATH', '')}",
            PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH")) if p),
            NAMESRV_ADDR=d.namesrv_addr,
            **env_extra,
        )
        self.python_files: list[tuple[Block, Path]] = []

    def rewrite(self, text: str) -> str:
        return text.replace("127.0.0.1:9876", self.d.namesrv_addr).replace("127.0.0.1:10911", self.d.broker_addr)

    def shell(self, block: Block) -> None:
        script = self.rewrite(block.text)
        units = [script] if "<<" in script else _commands(script)
        for cmd in units:
            r = subprocess.run(
                ["bash", "-c", cmd], cwd=self.work, env=self.env, capture_output=True, text=True, timeout=TIMEOUT
            )
            where = (
                f"README.md:{block.line}: {cmd.strip()!r} exited {r.returncode}\n{r.stdout[-2000:]}{r.stderr[-2000:]}"
            )
            assert r.returncode in (0, 1), where
            assert "Traceback" not in r.stderr, where
            print(f"README.md:{block.line}: ran {cmd.strip()!r}: exit {r.returncode}")

    def python(self, block: Block) -> None:
        path = self.work / f"readme_block_{block.line}.py"
        path.write_text(self.rewrite(block.text))
        self.python_files.append((block, path))
        r = subprocess.run(
            [sys.executable, str(path)], cwd=self.work, env=self.env, capture_output=True, text=True, timeout=TIMEOUT
        )
        assert r.returncode == 0, f"README.md:{block.line}: exited {r.returncode}\n{r.stdout[-2000:]}{r.stderr[-3000:]}"
        print(f"README.md:{block.line}: python ran: {r.stdout.strip()[:200]!r}")

    def mypy_strict(self) -> None:
        """Every Python block under ``mypy --strict`` in one run (errors in rmq itself are
        make lint's business: imports are followed silently)."""
        if not self.python_files:
            return
        r = subprocess.run(
            [
                sys.executable,
                "-m",
                "mypy",
                "--strict",
                "--follow-imports=silent",
                "--no-incremental",
                "--python-version",
                f"{sys.version_info.major}.{sys.version_info.minor}",
                *[str(p) for _, p in self.python_files],
            ],
            cwd=self.work,
            env=self.env,
            capture_output=True,
            text=True,
            timeout=600,
        )
        names = {p.name: b.line for b, p in self.python_files}
        report = r.stdout
        for file_name, line in names.items():
            report = report.replace(file_name, f"README.md block at line {line}")
        assert r.returncode == 0, report


async def test_every_readme_block_runs(tmp_path):
    blocks = readme_blocks(README.read_text())
    with StandaloneProcess(tmp_path / "store") as d:
        # what the examples take for granted (see the module docstring)
        async with Admin(d.namesrv_addr) as a:
            for addr in await a.master_addrs():
                await a.create_and_update_topic_config(addr, "T", read_queue_nums=4, write_queue_nums=4)

            # The broker answers once its registration is done or after 2.5 s, whichever is first:
            # on a busy machine the route may lag, and a producer without it would fall back to
            # TBW102's queues.
            async def routed() -> bool:
                try:
                    route = await a.examine_topic_route_info("T")
                except AdminError:
                    return False
                return [(q.read_queue_nums, q.write_queue_nums) for q in route.queue_datas] == [(4, 4)]

            await wait_until(routed, 60, interval=0.1, what="T's route with 4 queues on the name server")
        got: list[rmq.MessageExt] = []
        consumer = rmq.PushConsumer(
            d.namesrv_addr, "G", handler=got.append, consume_from_where=rmq.ConsumeFromWhere.CONSUME_FROM_FIRST_OFFSET
        )
        consumer.subscribe("T")
        async with rmq.Producer(d.namesrv_addr, "PG") as producer, consumer:
            sent = await producer.send(rmq.Message("T", b"order 42", tags="TagA", keys=["order-42"]))
            await wait_until(lambda: got, 60, what="the setup message consumed")

            async def committed() -> bool:
                async with Admin(d.namesrv_addr) as a:
                    try:
                        return (await a.examine_consume_stats("G")).compute_total_diff() == 0
                    except AdminError:
                        return False

            await wait_until(committed, 60, interval=0.2, what="G's offset committed")

            work = tmp_path / "work"
            work.mkdir()
            runner = Runner(d, work, {"MSG_ID": sent.msg_id, "OFFSET_MSG_ID": sent.offset_msg_id})
            for block in blocks:
                marker = block.marker or ""
                if marker.startswith("skip"):
                    why = marker[4:].strip().strip("()")
                    print(f"README.md:{block.line}: {block.lang or 'plain'} block not run: {why}")
                elif marker.startswith("file "):
                    name = marker[5:].strip()
                    (work / name).write_text(runner.rewrite(block.text))
                    print(f"README.md:{block.line}: written to {name}")
                elif marker:
                    pytest.fail(f"README.md:{block.line}: unknown readme-test marker {marker!r}")
                elif block.lang in SHELL:
                    await asyncio.to_thread(runner.shell, block)
                elif block.lang == "python":
                    await asyncio.to_thread(runner.python, block)
                elif block.lang == "text":
                    continue
                else:
                    pytest.fail(
                        f"README.md:{block.line}: a {block.lang or 'plain'} block the test cannot run: "
                        f"mark it <!-- readme-test: skip (why) --> or <!-- readme-test: file NAME -->"
                    )
            await asyncio.to_thread(runner.mypy_strict)
