"""The controller of RocketMQ 5's controller mode (RIP-44) on etcd: ``rmq controller``.

Brokers of one broker name report to it; it keeps, per broker name, the master, the epoch,
the SyncStateSet and the replicas, and elects a new master among the in-sync replicas when
the master dies. Several controller processes share one etcd; one leads at a time (an etcd
lease and a create-if-absent key), and every state change is a compare-and-swap in etcd that
fails for a deposed leader. See docs/design.md "Controller mode".

Modules: ``etcd`` (an asyncio etcd v3 client over the JSON gateway), ``config``
(``ControllerConfig``), ``state`` (the record of a broker name and the decisions on it, no
I/O), ``manager`` (leadership, liveness, elections), ``processor`` (the request codes),
``metrics``. This package sits beside the broker and the name server and imports neither.
"""

from rmq.controller.config import ControllerConfig

__all__ = ["ControllerConfig"]
