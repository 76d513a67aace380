"""``rmq admin clusterList`` and ``brokerStatus`` with a master and its slave (Java
ClusterListSubCommand prints one row per broker id; brokerStatus prints the runtime table,
here with the slave's role and its metadata-sync state)."""

import pytest
from cli_support import admin_async

from rmq._testing import run_broker, run_namesrv, wait_until

pytestmark = pytest.mark.timeout(120)


async def test_cluster_list_and_broker_status_show_master_and_slave(tmp_path):
    async with (
        run_namesrv() as ns,
        run_broker(tmp_path / "m", ns) as master,
        run_broker(tmp_path / "s", ns, broker_id=1, broker_role="SLAVE", slave_sync_interval_ms=200) as slave,
    ):
        nsaddr = f"127.0.0.1:{ns.port}"
        await wait_until(lambda: slave.slave_synchronize.last_sync_timestamp > 0, what="a first copy")
        code, out, err = await admin_async("clusterList", "-n", nsaddr)
        assert code == 0, err
        header, *rows = [line for line in out.splitlines() if line.strip()]
        assert "#BID" in header and "#Hour" in header and "#SPACE" in header
        cells = [r.split() for r in rows]
        assert [(c[1], c[2], c[3]) for c in cells] == [
            ("broker-a", "0", master.broker_addr),
            ("broker-a", "1", slave.broker_addr),
        ]
        assert all(c[4] == "V4_9_8" for c in cells)  # both answered their runtime info
        code, out, err = await admin_async("brokerStatus", "-n", nsaddr, "-b", slave.broker_addr)
        assert code == 0, err
        status = dict(line.split(":", 1) for line in out.splitlines() if ":" in line)
        status = {k.strip(): v.strip() for k, v in status.items()}
        assert status["brokerRole"] == "SLAVE"
        assert status["slaveSyncMasterAddr"] == master.broker_addr
        assert int(status["slaveSyncLastTimestamp"]) > 0 and status["slaveSyncFailedRounds"] == "0"
        assert "msgPutTotalTodayNow" in status
        code, out, err = await admin_async("brokerStatus", "-n", nsaddr, "-b", master.broker_addr)
        assert code == 0, err
        assert "slaveSyncMasterAddr" not in out and "brokerRole" in out
