"""``rmq standalone --aclEnable=true``: a missing home or a bad plain_acl.yml stops the start with
exit 2 and one clear line (no traceback, and no secret in it)."""

import os
import subprocess
import sys

RMQ = [sys.executable, "-m", "rmq"]


def _standalone(tmp_path, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        RMQ
        + [
            "standalone",
            "--namesrv-port",
            "0",
            "--broker-port",
            "0",
            "--store-dir",
            str(tmp_path / "store"),
            "--aclEnable=true",
            *args,
        ],
        capture_output=True,
        text=True,
        timeout=60,
        env=env,
    )


def test_acl_without_a_home_exits_2(tmp_path):
    env = {k: v for k, v in os.environ.items() if k != "ROCKETMQ_HOME"}
    p = _standalone(tmp_path, env=env)
    assert p.returncode == 2, p.stderr
    assert "aclEnable=true needs the rocketmqHome property or the ROCKETMQ_HOME" in p.stderr
    assert "Traceback" not in p.stderr


def test_bad_plain_acl_exits_2_without_quoting_the_secret(tmp_path):
    conf = tmp_path / "home" / "conf"
    conf.mkdir(parents=True)
    (conf / "plain_acl.yml").write_text(
        "accounts:\n  - accessKey: RocketMQ\n    secretKey: hush-hush-99\n    whiteRemoteAddress: 999.1.1.1\n"
    )
    p = _standalone(tmp_path, f"--rocketmqHome={tmp_path / 'home'}")
    assert p.returncode == 2, p.stderr
    assert "account RocketMQ: Netaddress examine Exception netaddress is 999.1.1.1" in p.stderr
    assert "hush-hush-99" not in p.stderr and "Traceback" not in p.stderr
