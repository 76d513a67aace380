"""``rmq admin``: mqadmin-style commands run as a real CLI process against a real daemon."""

import json

import pytest
from cli_support import admin

pytestmark = [pytest.mark.slow, pytest.mark.heavy(50)]


def test_update_topic_creates_a_routed_topic(daemon):
    ns = daemon.namesrv_addr
    assert admin("topicRoute", "-n", ns, "-t", "AdminT").returncode == 1  # unknown before
    r = admin("updateTopic", "-n", ns, "-t", "AdminT", "-r", "3", "-w", "2")
    assert r.returncode == 0, r.stderr
    assert f"create topic to {daemon.broker_addr} success." in r.stdout
    route = admin("topicRoute", "-n", ns, "-t", "AdminT")
    assert route.returncode == 0, route.stderr
    qd = json.loads(route.stdout)["queueDatas"]
    assert [(q["readQueueNums"], q["writeQueueNums"], q["perm"]) for q in qd] == [(3, 2, 6)]
    assert "AdminT" in admin("topicList", "-n", ns).stdout.split()


def test_update_topic_to_a_cluster_and_delete_it(daemon):
    ns = daemon.namesrv_addr
    assert admin("updateTopic", "-n", ns, "-t", "AdminDel", "-c", "DefaultCluster").returncode == 0
    assert "AdminDel" in admin("topicList", "-n", ns).stdout.split()
    r = admin("deleteTopic", "-n", ns, "-t", "AdminDel", "-c", "DefaultCluster")
    assert r.returncode == 0, r.stderr
    assert "AdminDel" not in admin("topicList", "-n", ns).stdout.split()
    r = admin("updateTopic", "-n", ns, "-t", "AdminX", "-c", "NoSuchCluster")
    assert r.returncode == 1 and "NoSuchCluster" in r.stderr


def test_cluster_list_and_sub_group(daemon):
    ns = daemon.namesrv_addr
    r = admin("clusterList", "-n", ns)
    assert r.returncode == 0
    rows = [line.split()[:4] for line in r.stdout.splitlines()]
    assert ["DefaultCluster", "broker-a", "0", daemon.broker_addr] in rows
    r = admin("updateSubGroup", "-n", ns, "-g", "GID_admin", "-r", "3")
    assert r.returncode == 0 and "success" in r.stdout, r.stderr


def test_refusals_and_bad_arguments_are_clear(daemon):
    r = admin("updateTopic", "-n", daemon.namesrv_addr, "-t", "bad topic!")
    assert r.returncode == 2 and "illegal characters" in r.stderr  # refused before sending
    r = admin("topicList", "-n", "127.0.0.1:1")  # nobody listens there
    assert r.returncode == 2 and "rmq admin topicList:" in r.stderr
    r = admin("updateTopic", "-n", daemon.namesrv_addr)  # -t missing
    assert r.returncode == 2 and "-t" in r.stderr
    r = admin("updateTopic", "-n", daemon.namesrv_addr, "-t", "AdminBadFlags", "-p", "9", "-o", "maybe")
    assert r.returncode == 2 and "-p/--perm" in r.stderr and "success" not in r.stdout
    assert "AdminBadFlags" not in admin("topicList", "-n", daemon.namesrv_addr).stdout.split()
