#!/usr/bin/env python3
"""Measure (not a test): what the ACL 1.0 check costs per request on the broker, and what
signing costs a client.

    .venv/bin/python bench/measure_acl_cost.py [--iterations 50000] [--size 1024] [--json]

In-process, no network: a ``PlainPermissionManager`` loaded from a temporary plain_acl.yml
(Java's example accounts), and SEND_MESSAGE_V2 / PULL_MESSAGE requests as a Java client sends
them (13 / 11 extFields, signed). Reported per request, in microseconds:

* ``verify_send``: ``PlainPermissionManager.check`` of a signed send with a ``--size`` body
  (request resources, account lookup, HMAC-SHA1 over fields + body, topic permission);
* ``verify_pull``: the same for a pull (no body; topic and %RETRY% group permissions);
* ``verify_white``: a request from a white-listed address (no signature computed);
* ``sign_send``: ``sign_request`` on the client side (``AclClientRPCHook``).

For the end-to-end figure run ``bench/produce_bench.py`` against ``rmq standalone
--aclEnable=true --rocketmqHome=H`` with ``--access-key/--secret-key``, and without ACL.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time

from rmq.broker.acl import PlainPermissionManager
from rmq.protocol.codes import RequestCode
from rmq.protocol.command import RemotingCommand
from rmq.remoting.acl import SessionCredentials, sign_request

PLAIN_ACL = """
globalWhiteRemoteAddresses:
  - 10.10.103.*
accounts:
  - accessKey: RocketMQ
    secretKey: 12345678
    whiteRemoteAddress:
    admin: false
    defaultTopicPerm: DENY
    defaultGroupPerm: SUB
    topicPerms:
      - BenchTopic=PUB|SUB
    groupPerms:
      - benchmark_producer=PUB|SUB
  - accessKey: WhiteListed
    secretKey: 12345678
    whiteRemoteAddress: 192.168.1.*
"""
CREDS = SessionCredentials("RocketMQ", "12345678")


def send_request(size: int) -> RemotingCommand:
    ext = {
        "a": "benchmark_producer",
        "b": "BenchTopic",
        "c": "TBW102",
        "d": "4",
        "e": "3",
        "f": "0",
        "g": str(int(time.time() * 1000)),
        "h": "0",
        "i": "UNIQ_KEY\x01AC1100010001B4AAC2B0",
        "j": "0",
        "k": "false",
        "m": "false",
        "n": "broker-a",
    }
    cmd = RemotingCommand(RequestCode.SEND_MESSAGE_V2, ext_fields=ext, body=os.urandom(size), serialize_type=1)
    sign_request(cmd, CREDS)
    return cmd


def pull_request() -> RemotingCommand:
    ext = {
        "consumerGroup": "benchmark_consumer",
        "topic": "BenchTopic",
        "queueId": "1",
        "queueOffset": "1234",
        "maxMsgNums": "32",
        "sysFlag": "3",
        "commitOffset": "1200",
        "suspendTimeoutMillis": "15000",
        "subVersion": "1700000000000",
        "expressionType": "TAG",
        "bname": "broker-a",
    }
    cmd = RemotingCommand(RequestCode.PULL_MESSAGE, ext_fields=ext, serialize_type=1)
    sign_request(cmd, CREDS)
    return cmd


def per_call_us(fn, n: int) -> float:
    best = float("inf")
    for _ in range(3):
        t0 = time.perf_counter()
        for _ in range(n):
            fn()
        best = min(best, time.perf_counter() - t0)
    return best / n * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--iterations", type=int, default=50_000)
    ap.add_argument("--size", type=int, default=1024, help="send body bytes (default 1024)")
    ap.add_argument("--json", action="store_true")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory() as home:
        os.makedirs(os.path.join(home, "conf"))
        with open(os.path.join(home, "conf", "plain_acl.yml"), "w") as f:
            f.write(PLAIN_ACL)
        acl = PlainPermissionManager(home)
        acl.load()
        send, pull = send_request(args.size), pull_request()
        white = send_request(args.size)
        white.ext_fields["AccessKey"] = "WhiteListed"
        for cmd, host in ((send, "127.0.0.1"), (pull, "127.0.0.1"), (white, "192.168.1.7")):
            assert acl.check(cmd, host) is None, acl.check(cmd, host)
        n = args.iterations

        def resign() -> None:
            c = RemotingCommand(send.code, ext_fields=dict(send.ext_fields), body=send.body)
            sign_request(c, CREDS)

        figures = {
            "verify_send_us": per_call_us(lambda: acl.check(send, "127.0.0.1"), n),
            "verify_pull_us": per_call_us(lambda: acl.check(pull, "127.0.0.1"), n),
            "verify_white_us": per_call_us(lambda: acl.check(white, "192.168.1.7"), n),
            "sign_send_us": per_call_us(resign, n),
            "body_bytes": args.size,
            "iterations": n,
        }
    for k, v in figures.items():
        print(f"{k:>18}: {v:.2f}" if isinstance(v, float) else f"{k:>18}: {v}")
    if args.json:
        print(json.dumps(figures))


if __name__ == "__main__":
    main()
