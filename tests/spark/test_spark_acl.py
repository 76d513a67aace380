"""The Spark connector's ACL options (``accessKey``/``secretKey``): parsed with the others, and
the blocking client signing every request against ``rmq standalone --aclEnable=true``. No JVM,
no pyspark."""

from __future__ import annotations

import pytest

from rmq._testing import StandaloneProcess
from rmq.errors import BrokerResponseError
from rmq.spark._client import close_shared_clients, shared_client
from rmq.spark.options import OptionError, parse_sink_options, parse_source_options

# runs promtool / systemd-analyze / a child interpreter or binds a port: not a unit test
pytestmark = pytest.mark.integration

NS = {"nameServer": "127.0.0.1:9876"}


def test_credentials_options():
    src = parse_source_options(
        {**NS, "subscribe": "T", "accessKey": "RocketMQ", "secretKey": "12345678"}, streaming=False
    )
    assert src.credentials is not None and src.credentials.access_key == "RocketMQ"
    assert "12345678" not in repr(src)
    sink = parse_sink_options({**NS, "accessKey": "RocketMQ", "secretKey": "12345678"})
    assert sink.credentials == src.credentials
    assert parse_sink_options(NS).credentials is None
    with pytest.raises(OptionError, match="give both"):
        parse_sink_options({**NS, "accessKey": "RocketMQ"})


def test_blocking_client_signs(tmp_path):
    home = tmp_path / "home"
    (home / "conf").mkdir(parents=True)
    (home / "conf" / "plain_acl.yml").write_text(
        "accounts:\n  - accessKey: RocketMQ\n    secretKey: 12345678\n    defaultTopicPerm: PUB|SUB\n"
    )
    with StandaloneProcess(tmp_path / "store", extra_args=["--aclEnable=true", f"--rocketmqHome={home}"]) as p:
        try:
            opts = parse_sink_options({"nameServer": p.namesrv_addr, "accessKey": "RocketMQ", "secretKey": "12345678"})
            signed = shared_client(opts.name_servers, 5.0, credentials=opts.credentials)
            assert signed.max_offset(p.broker_addr, "TBW102", 0) == 0
            unsigned = shared_client(opts.name_servers, 5.0)
            with pytest.raises(BrokerResponseError, match="No accessKey is configured"):
                unsigned.max_offset(p.broker_addr, "TBW102", 0)
        finally:
            close_shared_clients()
