"""Loaders for the golden frames under tests/golden/remoting (copied from /work/shared/golden)."""

import base64
import json
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent / "golden" / "remoting"


def load(name: str) -> list[dict]:
    rows = []
    for line in (GOLDEN / name).read_text().splitlines():
        if line.strip():
            row = json.loads(line)
            if "frame_b64" in row:
                row["frame"] = base64.b64decode(row["frame_b64"])
            rows.append(row)
    return rows


def quickstart() -> list[dict]:
    return load("rocketmq-4.9.8-quickstart-frames.jsonl")


def serialize_frames() -> list[dict]:
    return load("rocketmq-4.9.8-serialize-frames.jsonl")


def client_requests() -> list[tuple[str, dict]]:
    out = []
    for name in ("alions-3.12.0-requests.jsonl", "cpp1-rocketmq-0.4.4-requests.jsonl"):
        out += [(name, row) for row in load(name)]
    return out


def mqadmin_frames() -> list[dict]:
    """Apache RocketMQ 4.9.8's mqadmin (39 commands) against the Java name server and broker,
    with a Java push consumer and the benchmark Producer running: admin requests and answers."""
    return load("rocketmq-4.9.8-mqadmin-frames.jsonl")


def mqadmin_exchanges(request_code: int) -> list[tuple[dict, dict | None]]:
    """``(request row, response row or None)`` for every captured request with ``request_code``
    in the mqadmin capture (see :func:`exchanges`); each row has ``cmd``, its decoded
    RemotingCommand."""
    return exchanges(mqadmin_frames(), request_code)


def ha_frames() -> list[dict]:
    """Apache RocketMQ 4.9.8 master and slave with the Java name server: the slave's
    registrations and its metadata sync from the master (GET_ALL_TOPIC_CONFIG 21,
    GET_ALL_CONSUMER_OFFSET 43, GET_ALL_DELAY_OFFSET 45, GET_ALL_SUBSCRIPTIONGROUP_CONFIG 201,
    GET_BROKER_RUNTIME_INFO 28, ...), requests and answers."""
    return load("rocketmq-4.9.8-ha-frames.jsonl")


_REVERSE = {
    "client->broker": "broker->client",
    "client->namesrv": "namesrv->client",
    "broker->client": "client->broker",
    "namesrv->client": "client->namesrv",
}


def exchanges(rows: list[dict], request_code: int) -> list[tuple[dict, dict | None]]:
    """``(request row, response row or None)`` for every request with ``request_code`` in
    ``rows`` (a capture's rows): the answer is the first later response row on the reverse stream
    with the same opaque and (when the capture recorded it) the same ``request_code``. (Each
    mqadmin command runs in its own JVM and starts its opaques anew, so an opaque alone pairs a
    request with another command's answer.) Each row gets ``cmd``, its decoded RemotingCommand."""
    from rmq.remoting.codec import decode_frame

    for row in rows:
        row.setdefault("cmd", decode_frame(row["frame"]))
    out = []
    for i, row in enumerate(rows):
        if row["flag"] & 1 or row["code"] != request_code:
            continue
        answer = next(
            (
                r
                for r in rows[i + 1 :]
                if r["flag"] & 1
                and r["stream"] == _REVERSE[row["stream"]]
                and r["cmd"].opaque == row["cmd"].opaque
                and r.get("request_code", request_code) == request_code
            ),
            None,
        )
        out.append((row, answer))
    return out


def acl_frames() -> list[dict]:
    """A Java 4.9.8 broker with aclEnable=true (accounts RocketMQ and rocketmq2, secret
    ``12345678``): the benchmark Producer and Consumer signing, a wrong secret, a DENY topic and
    an unsigned client; each row has ``cmd``, its decoded RemotingCommand."""
    from rmq.remoting.codec import decode_frame

    rows = load("rocketmq-4.9.8-acl-frames.jsonl")
    for row in rows:
        row["cmd"] = decode_frame(row["frame"])
    return rows


def ha_stream() -> dict:
    """The HA connection of the same run, both directions as sent (``slave_to_master`` and
    ``master_to_slave`` bytes) with their decoding (``slave_reports``, ``master_transfers``:
    ``phy_offset``/``size`` per 12-byte header, each followed by that many CommitLog bytes)."""
    row = json.loads((GOLDEN / "rocketmq-4.9.8-ha-stream.json").read_text())[0]
    row["slave_to_master"] = base64.b64decode(row["slave_to_master_b64"])
    row["master_to_slave"] = base64.b64decode(row["master_to_slave_b64"])
    return row
