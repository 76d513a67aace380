"""The ``rmq admin`` CLI as the tests run it: a real ``python -m rmq admin ...`` subprocess."""

from __future__ import annotations

import asyncio
import subprocess
import sys

RMQ = [sys.executable, "-m", "rmq"]

#: Generous: the machine is shared and a CLI process starts a Python interpreter.
TIMEOUT = 120


def admin(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """Run ``rmq admin *args`` to completion (blocking)."""
    return subprocess.run([*RMQ, "admin", *args], capture_output=True, text=True, timeout=TIMEOUT, env=env)


async def admin_async(*args: str) -> tuple[int, str, str]:
    """``rmq admin *args`` while the test's event loop keeps SDK clients running (so a broker's
    relays to them are answered): ``(exit status, stdout, stderr)``."""
    proc = await asyncio.create_subprocess_exec(
        *RMQ, "admin", *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await asyncio.wait_for(proc.communicate(), TIMEOUT)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()
