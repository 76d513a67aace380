"""``rmq admin`` refuses bad flags before sending anything: exit 2 naming the flag and the
allowed values (no daemon needed: nothing is sent)."""

import subprocess
import sys

import pytest

from rmq.cli import main

NS = ["-n", "127.0.0.1:1"]  # nobody listens: a flag that passed would end in "unreachable"

BAD = [
    (["updateTopic", *NS, "-t", "T", "-p", "9"], "-p/--perm", "2 write only, 4 read only, or 6"),
    (["updateTopic", *NS, "-t", "T", "-p", "7"], "-p/--perm", "6 read and write"),
    (["updateTopic", *NS, "-t", "T", "-p", "rw"], "-p/--perm", "not a permission"),
    (["updateTopic", *NS, "-t", "T", "-o", "maybe"], "-o/--order", "true or false"),
    (["updateTopic", *NS, "-t", "T", "-r", "0"], "-r/--readQueueNums", "1..1024"),
    (["updateTopic", *NS, "-t", "T", "-w", "1025"], "-w/--writeQueueNums", "1..1024"),
    (["updateTopic", *NS, "-t", "T", "-w", "2**70"], "-w/--writeQueueNums", "not an integer"),
    (["updateTopic", *NS, "-t", "bad topic!"], "-t/--topic", "illegal characters"),
    (["updateTopic", *NS, "-t", "T" * 128], "-t/--topic", "longer than topic max length"),
    (["updateTopic", *NS, "-t", "T", "-b", "nohost"], "-b/--brokerAddr", "host:port"),
    (["updateTopic", *NS, "-t", "T", "-c", ""], "-c/--clusterName", "not a name"),
    (["updateTopic", "-n", "1.2.3.4", "-t", "T"], "-n/--namesrvAddr", "host:port"),
    (["updateTopic", "-n", ";", "-t", "T"], "-n/--namesrvAddr", "no name server"),
    (["deleteTopic", *NS, "-t", ""], "-t/--topic", "blank"),
    (["updateSubGroup", *NS, "-g", "G", "-r", "-1"], "-r/--retryMaxTimes", "0..1000"),
    (["updateSubGroup", *NS, "-g", "G", "-s", "yes"], "-s/--consumeEnable", "true or false"),
    (["updateSubGroup", *NS, "-g", "G", "-d", "2"], "-d/--consumeBroadcastEnable", "true or false"),
    (["updateSubGroup", *NS, "-g", "bad group"], "-g/--groupName", "group name"),
    (["updateSubGroup", *NS, "-g", "G" * 256], "-g/--groupName", "1..255"),
    (["topicRoute", *NS, "-t", "a/b"], "-t/--topic", "illegal characters"),
    (["topicList", "-n", "host:99999"], "-n/--namesrvAddr", "host:port"),
    (["clusterList", "-n", ""], "-n/--namesrvAddr", "no name server"),
]


@pytest.mark.parametrize("argv,flag,allowed", BAD, ids=[" ".join(b[0])[:60] for b in BAD])
def test_bad_flag_exits_2_naming_flag_and_allowed_values(capsys, argv, flag, allowed):
    with pytest.raises(SystemExit) as exc:
        main(["admin", *argv])
    assert exc.value.code == 2
    err = capsys.readouterr()
    assert f"argument {flag}" in err.err and allowed in err.err, err.err
    assert "success" not in err.out and "unreachable" not in err.err  # nothing was sent


@pytest.mark.parametrize(
    "argv",
    [
        ["updateTopic", *NS, "-t", "T", "-p", "2", "-o", "TRUE", "-r", "1", "-w", "1024"],
        ["updateTopic", *NS, "-t", "%RETRY%G_1", "-p", "4", "-b", "127.0.0.1:1"],
        ["updateSubGroup", *NS, "-g", "GID-x|1", "-r", "0", "-s", "false", "-d", "False"],
        ["deleteTopic", *NS, "-t", "T", "-c", "DefaultCluster"],
        ["topicList", "-n", "127.0.0.1:1;127.0.0.1:2"],
    ],
)
def test_good_flags_reach_the_network(capsys, argv):
    """Accepted flags go on to connect (and fail there with status 2, since nobody listens)."""
    assert main(["admin", *argv]) == 2
    assert "connect to 127.0.0.1:" in capsys.readouterr().err


def test_update_topic_with_bad_perm_and_order_fails_as_a_process():
    r = subprocess.run(
        [sys.executable, "-m", "rmq", "admin", "updateTopic", *NS, "-t", "T", "-p", "9", "-o", "maybe"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert r.returncode == 2
    assert "-p/--perm" in r.stderr and "success" not in r.stdout and "Traceback" not in r.stderr
