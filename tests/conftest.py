import os

import pytest


def pytest_report_header(config):
    import rmq._store  # noqa: F401  (the build must have produced the extension)

    mode = "pure-Python (RMQ_NO_EXTENSIONS=1)" if os.environ.get("RMQ_NO_EXTENSIONS") == "1" else "Cython"
    return f"rmq store implementation: {mode}"
