"""Replication between a master's and a slave's store (Java ``org.apache.rocketmq.store.ha``).

* ``codec``: the HA protocol's bytes (offset reports, transfer headers), sans-IO;
* ``service``: the master: ``HAService`` (listener, slaves' acks, ``is_slave_ok``),
  ``HAConnection`` (one slave), ``GroupTransferService`` (SYNC_MASTER waiters);
* ``client``: the slave: ``HAClient`` (follows the master, appends at the same offsets).

``ha_state(store)`` reads either side's state as one typed ``HAState`` (admin, metrics).
``MessageStore`` owns one of them by role (``store.ha`` on a master, ``store.ha_client`` on a
slave) and adds their keys to ``runtime_info()``. Java 4.9.8 has no HA keys in its runtime
info (it only logs ``slaveFallBehindMuch``); these are ours:

master: ``haListenPort``, ``haConnectionCount``, ``haPush2SlaveMaxOffset`` (highest offset a
slave acknowledged), ``haSlaveFallBehindMuch`` (CommitLog end − that, bytes), ``haSlaves``
(``addr,ackOffset,lagBytes,lagMillis`` per slave, ``;``-separated), ``haTransferredBytes``,
``haSlaveTimeoutTimes``;
slave: ``haMasterAddress``, ``haMasterConnected``, ``haSlaveReportedOffset``,
``haReceivedBytes``, ``haConnectTimes``, ``haLastTransferMillisAgo``, ``haDiverged``, ``haLastError``.
"""

from rmq.store.ha.client import HAClient
from rmq.store.ha.service import GroupTransferService, HAConnection, HAService, SlaveState
from rmq.store.ha.state import HAState, ha_state

__all__ = ["GroupTransferService", "HAClient", "HAConnection", "HAService", "HAState", "SlaveState", "ha_state"]
