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
