"""Name servers and store maintenance: getNamesrvConfig, updateNamesrvConfig, wipeWritePerm,
addWritePerm, deleteSubGroup, cleanExpiredCQ, deleteExpiredCommitLog, queryCq (Java
``tools/command/namesrv``, ``broker``, ``queue``)."""
from __future__ import annotations
