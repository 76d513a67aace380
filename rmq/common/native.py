"""The one switch between rmq's C extensions and their pure-Python twins.

``RMQ_NO_EXTENSIONS=1`` in the environment when rmq is imported makes every part that has a
twin use it: the record walker (``rmq.common.message.walk_records``), the JSON and ROCKETMQ
header codecs (``rmq.remoting.codec``), the typed-header reader (``rmq.protocol.headers``) and
the compressed RegisterBrokerBody's topic-line reader (``rmq.protocol.body.register``).
It is for A/B measurements and for running the references; every install builds the
extensions. The store and the broker's SEND fast path have no twin (``rmq._store`` is
required; ``sendFastPath=false`` keeps SENDs on the Python path).

Each part asks :data:`ENABLED` once, at import, and reports what it took with :func:`chose`;
:data:`IMPLEMENTATIONS` then says which one runs (a test asserts it both ways).
"""

from __future__ import annotations

import os
from typing import Literal

__all__ = ["ENABLED", "IMPLEMENTATIONS", "chose"]

#: True unless ``RMQ_NO_EXTENSIONS=1`` (read once, at import).
ENABLED: bool = os.environ.get("RMQ_NO_EXTENSIONS") != "1"

#: ``{part: "cython" | "python"}`` for every part with a twin, as it was chosen at import.
IMPLEMENTATIONS: dict[str, Literal["cython", "python"]] = {}


def chose(part: str, cython: bool) -> bool:
    """Record that ``part`` runs its Cython implementation (``cython``) or its Python twin;
    returns ``cython``."""
    IMPLEMENTATIONS[part] = "cython" if cython else "python"
    return cython
