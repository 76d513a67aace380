"""Fuzz target: ``rmq.common.fastjson.loads`` (the route / cluster JSON reader, which also
reads fastjson's unquoted integer keys).

Allowed: ``ValueError`` (``json.JSONDecodeError`` and ``UnicodeDecodeError`` are ValueErrors).
"""

from __future__ import annotations

import fuzzlib

with fuzzlib.instrument():
    from rmq.common.fastjson import loads

ALLOWED = (ValueError,)


def target(data: bytes) -> None:
    loads(data)


def seeds() -> list[bytes]:
    return [
        b'{"brokerDatas":[{"brokerAddrs":{0:"127.0.0.1:10911"},"brokerName":"broker-a","cluster":"C"}],'
        b'"filterServerTable":{},"queueDatas":[{"brokerName":"broker-a","perm":6,"readQueueNums":4,'
        b'"topicSysFlag":0,"writeQueueNums":4}]}',
        b'{"brokerAddrTable":{"broker-a":{"brokerAddrs":{"0":"a:1",1:"b:2"}}},"clusterAddrTable":{"C":["broker-a"]}}',
        b'{"topicList":["a","b"]}',
        b'{"a":[[[[{"b":[[1]]}]]]]}',
        b"[" * 64 + b"]" * 64,
    ]


if __name__ == "__main__":
    fuzzlib.main(target, ALLOWED, seeds)
