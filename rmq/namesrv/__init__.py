"""rmq.namesrv: the name server (NamesrvController, RouteInfoManager, request processor)."""

from rmq.namesrv.controller import NamesrvController
from rmq.namesrv.route_manager import RouteInfoManager

__all__ = ["NamesrvController", "RouteInfoManager"]
