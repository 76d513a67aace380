"""rmq.broker: the broker (BrokerController, request processors, managers, long polling).

See ``controller.py`` for how it is assembled; processors live in ``processors/`` (one module
per family of request codes), persisted tables in ``managers/``.
"""

from rmq.broker.controller import BrokerController

__all__ = ["BrokerController"]
