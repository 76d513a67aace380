"""Loaders for the golden frames under tests/golden/remoting (copied from /work/shared/golden)."""
import base64
import json
from pathlib import Path

GOLDEN = Path(__file__).resolve().parent.parent / "golden" / "remoting"


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
    in the mqadmin capture; each row has ``cmd``, its decoded RemotingCommand. Responses are
    matched by opaque on the reverse stream."""
    from rmq.remoting.codec import decode_frame

    rows = mqadmin_frames()
    for row in rows:
        row["cmd"] = decode_frame(row["frame"])
    reverse = {"client->broker": "broker->client", "client->namesrv": "namesrv->client",
               "broker->client": "client->broker", "namesrv->client": "client->namesrv"}
    out = []
    for row in rows:
        if row["flag"] & 1 or row["code"] != request_code:
            continue
        answer = next((r for r in rows if r["flag"] & 1 and r["stream"] == reverse[row["stream"]]
                       and r["cmd"].opaque == row["cmd"].opaque), None)
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
