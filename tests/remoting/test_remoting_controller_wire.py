"""The controller mode's wire without a controller: Java 5.3.3's request codes, header field names
and body JSON (what fastjson writes for ``SyncStateSet``, ``BrokerMemberGroup``,
``ElectMasterResponseBody``, ``BrokerReplicasInfo``, ``EpochEntryCache``), and the parsers'
handling of each answer code."""

import json

import pytest

from rmq import errors
from rmq.protocol.body import controller as body
from rmq.protocol.codes import RequestCode, ResponseCode
from rmq.protocol.command import RemotingCommand
from rmq.protocol.headers.controller import BrokerHeartbeatRequestHeader, ElectMasterRequestHeader
from rmq.protocol.requests import controller as wire


def test_codes_are_java_5s():
    assert RequestCode.BROKER_HEARTBEAT == 904
    assert list(range(1001, 1014)) == [
        RequestCode.CONTROLLER_ALTER_SYNC_STATE_SET,
        RequestCode.CONTROLLER_ELECT_MASTER,
        RequestCode.CONTROLLER_REGISTER_BROKER,
        RequestCode.CONTROLLER_GET_REPLICA_INFO,
        RequestCode.CONTROLLER_GET_METADATA_INFO,
        RequestCode.CONTROLLER_GET_SYNC_STATE_DATA,
        RequestCode.GET_BROKER_EPOCH_CACHE,
        RequestCode.NOTIFY_BROKER_ROLE_CHANGED,
        RequestCode.UPDATE_CONTROLLER_CONFIG,
        RequestCode.GET_CONTROLLER_CONFIG,
        RequestCode.CLEAN_BROKER_DATA,
        RequestCode.CONTROLLER_GET_NEXT_BROKER_ID,
        RequestCode.CONTROLLER_APPLY_BROKER_ID,
    ]
    assert ResponseCode.CONTROLLER_NOT_LEADER == 2007
    assert ResponseCode.CONTROLLER_BROKER_LIVE_INFO_NOT_EXISTS == 2016
    assert errors.for_code(2007) is errors.ControllerNotLeaderError and errors.ControllerNotLeaderError.retriable


def test_heartbeat_header_names_and_ranges():
    h = BrokerHeartbeatRequestHeader(
        cluster_name="C",
        broker_addr="127.0.0.1:10911",
        broker_name="b",
        broker_id=2,
        epoch=3,
        max_offset=1 << 40,
        confirm_offset=5,
        heartbeat_timeout_mills=10000,
        election_priority=1,
    )
    ext = h.to_ext_fields()
    assert ext == {
        "clusterName": "C",
        "brokerAddr": "127.0.0.1:10911",
        "brokerName": "b",
        "brokerId": "2",
        "epoch": "3",
        "maxOffset": str(1 << 40),
        "confirmOffset": "5",
        "heartbeatTimeoutMills": "10000",
        "electionPriority": "1",
    }
    assert BrokerHeartbeatRequestHeader.from_ext_fields(ext) == h
    # epoch is a Java Integer: a value past int32 is refused naming the field
    with pytest.raises(errors.RemotingCommandError, match="epoch"):
        BrokerHeartbeatRequestHeader.from_ext_fields({**ext, "epoch": str(1 << 31)})
    # brokerId may be absent (the controller answers CONTROLLER_INVALID_REQUEST, as Java)
    bare = BrokerHeartbeatRequestHeader.from_ext_fields({"clusterName": "C", "brokerAddr": "a", "brokerName": "b"})
    assert bare.broker_id is None and bare.heartbeat_timeout_mills is None


def test_elect_master_builders_mark_who_triggers():
    by_admin = wire.elect_master("b", 3, cluster_name="C", designate=True)
    assert by_admin.code == RequestCode.CONTROLLER_ELECT_MASTER
    assert by_admin.ext_fields["designateElect"] == "true" and by_admin.ext_fields["brokerId"] == "3"
    assert int(by_admin.ext_fields["invokeTime"]) > 0
    h = ElectMasterRequestHeader.from_ext_fields({"brokerName": "b"})
    assert (h.broker_id, h.designate_elect, h.cluster_name) == (-1, False, "")


def test_sync_state_set_json_is_fastjsons():
    s = body.SyncStateSet(frozenset({2, 1}), 4)
    assert json.loads(s.encode()) == {"syncStateSet": [1, 2], "syncStateSetEpoch": 4}
    assert body.SyncStateSet.decode(b'{"syncStateSet":[1,2],"syncStateSetEpoch":4}') == s
    with pytest.raises(ValueError):
        body.SyncStateSet.decode(b'{"syncStateSet":"x"}')
    with pytest.raises(ValueError, match="syncStateSetEpoch"):
        body.SyncStateSet.decode(b'{"syncStateSet":[1],"syncStateSetEpoch":99999999999}')


def test_member_group_reads_fastjsons_unquoted_long_keys():
    java = b'{"brokerAddrs":{1:"127.0.0.1:30911",2:"127.0.0.1:30921"},"brokerName":"b","cluster":"C"}'
    g = body.BrokerMemberGroup.decode(java)
    assert g == body.BrokerMemberGroup("C", "b", {1: "127.0.0.1:30911", 2: "127.0.0.1:30921"})
    assert body.BrokerMemberGroup.decode(g.encode()) == g
    e = body.ElectMasterResponseBody(frozenset({2}), g)
    assert json.loads(e.encode())["syncStateSet"] == [2]
    assert body.ElectMasterResponseBody.decode(e.encode()) == e
    assert body.ElectMasterResponseBody.decode(b'{"syncStateSet":[1]}').broker_member_group is None


def test_replicas_info_round_trip_and_javas_tostring():
    r = body.ReplicaIdentity("b", 1, "127.0.0.1:30911", True)
    info = body.BrokerReplicasInfo({"b": body.ReplicasInfo(1, "127.0.0.1:30911", 2, 3, (r,), ())})
    d = json.loads(info.encode())
    assert d["replicasInfoTable"]["b"]["inSyncReplicas"][0] == {
        "alive": True,
        "brokerAddress": "127.0.0.1:30911",
        "brokerId": 1,
        "brokerName": "b",
    }
    assert body.BrokerReplicasInfo.decode(info.encode()) == info
    assert str(r) == "ReplicaIdentity{brokerName='b', brokerId=1, brokerAddress='127.0.0.1:30911', alive=true}"


def test_epoch_cache_round_trip():
    c = body.EpochEntryCache("C", "b", 1, (body.EpochEntry(1, 0, 100), body.EpochEntry(2, 100)), 150)
    d = json.loads(c.encode())
    assert d["epochList"][1] == {"endOffset": (1 << 63) - 1, "epoch": 2, "startOffset": 100}
    assert body.EpochEntryCache.decode(c.encode()) == c
    assert str(c.epoch_list[0]) == "EpochEntry{epoch=1, startOffset=0, endOffset=100}"


def test_broker_names_body_bounds():
    assert body.decode_broker_names(body.broker_names_body(["a", "b"]), limit=2) == ["a", "b"]
    with pytest.raises(ValueError, match="at most 1"):
        body.decode_broker_names(b'["a","b"]', limit=1)
    with pytest.raises(ValueError):
        body.decode_broker_names(b'{"a":1}', limit=5)


def _reply(code, ext=None, b=None):
    return RemotingCommand.request(RequestCode.CONTROLLER_ELECT_MASTER, {}).response(code, "r", ext or {}, b)


def test_parse_elect_master_reads_success_and_still_exist_and_raises_otherwise():
    ext = {"masterBrokerId": "2", "masterAddress": "a:1", "masterEpoch": "5", "syncStateSetEpoch": "6"}
    b = body.ElectMasterResponseBody(frozenset({2})).encode()
    h, eb, elected = wire.parse_elect_master(_reply(ResponseCode.SUCCESS, ext, b))
    assert (h.master_broker_id, h.master_epoch, eb.sync_state_set, elected) == (2, 5, frozenset({2}), True)
    assert wire.parse_elect_master(_reply(ResponseCode.CONTROLLER_MASTER_STILL_EXIST, ext, b))[2] is False
    with pytest.raises(errors.ControllerElectMasterFailedError):
        wire.parse_elect_master(_reply(ResponseCode.CONTROLLER_ELECT_MASTER_FAILED))
    with pytest.raises(errors.ControllerNotLeaderError):
        wire.parse_replica_info(_reply(ResponseCode.CONTROLLER_NOT_LEADER))
    with pytest.raises(errors.RemotingCommandError, match="SyncStateSet"):
        wire.parse_replica_info(_reply(ResponseCode.SUCCESS, {}, b"[1]"))


def test_notify_role_changed_is_oneway_with_the_set():
    cmd = wire.notify_broker_role_changed("a:1", 2, 5, body.SyncStateSet(frozenset({2}), 6))
    assert cmd.flag & 2  # RPC_ONEWAY
    assert cmd.ext_fields == {
        "masterAddress": "a:1",
        "masterEpoch": "5",
        "syncStateSetEpoch": "6",
        "masterBrokerId": "2",
    }
    assert body.SyncStateSet.decode(cmd.body_bytes()) == body.SyncStateSet(frozenset({2}), 6)
