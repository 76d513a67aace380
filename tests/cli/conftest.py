"""Shared set-up of the CLI tests: one real daemon (``python -m rmq standalone``) per test
module. A module passes extra daemon flags with ``DAEMON_ARGS = [...]``."""

from __future__ import annotations

import pytest

from rmq._testing import StandaloneProcess


@pytest.fixture(scope="module")
def daemon(request, tmp_path_factory):
    extra = list(getattr(request.module, "DAEMON_ARGS", ()))
    with StandaloneProcess(
        tmp_path_factory.mktemp(request.module.__name__.rpartition(".")[2]) / "store", extra_args=extra
    ) as p:
        yield p
