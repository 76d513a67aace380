"""Finding messages: queryMsgByKey, queryMsgByUniqueKey, queryMsgById, queryMsgByOffset (Java
``tools/command/message``)."""
from __future__ import annotations
