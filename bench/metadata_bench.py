"""Cost of creating topics one by one as the topic table grows (metadata persistence).

Runs an in-process broker without a name server and times UPDATE_AND_CREATE_TOPIC round
trips; prints the mean per topic around 500 and around N topics and how many times the topic
table was written. With the table written off the loop and coalesced, the two means should be
close (creating N topics is O(N) in total).

    PYTHONPATH=$PWD python bench/metadata_bench.py [N]
"""

from __future__ import annotations

import asyncio
import sys
import tempfile
import time

from rmq._testing import run_broker
from rmq.protocol.codes import RequestCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting.client import RemotingClient


async def main(n: int) -> None:
    with tempfile.TemporaryDirectory(prefix="rmq-metadata-bench-") as d:
        await _main(d, n)


async def _main(d: str, n: int) -> None:
    async with run_broker(d) as broker:
        client = RemotingClient()
        addr = f"127.0.0.1:{broker.port}"
        windows = {min(500, n): 0.0, n: 0.0}
        t_start = time.perf_counter()
        t_window = t_start
        for i in range(1, n + 1):
            if any(i == w - 99 for w in windows):
                t_window = time.perf_counter()
            cmd = RemotingCommand.request(
                RequestCode.UPDATE_AND_CREATE_TOPIC, {"topic": f"MetaBench{i}", "readQueueNums": 1, "writeQueueNums": 1}
            )
            resp = await client.invoke(addr, cmd, timeout=10)
            assert resp.code == 0, resp.remark
            if i in windows:
                windows[i] = (time.perf_counter() - t_window) / 100
        total = time.perf_counter() - t_start
        for w, per in windows.items():
            print(f"topics {w - 99}..{w}: {per * 1e3:.2f} ms each")
        print(f"{n} topics in {total:.2f} s; persister writes (all tables): {broker.config_persister.writes}")
        await client.close()


if __name__ == "__main__":
    asyncio.run(main(int(sys.argv[1]) if len(sys.argv) > 1 else 3000))
