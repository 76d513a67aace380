import asyncio
import os

import pytest
import uvloop


def pytest_report_header(config):
    import rmq._store  # noqa: F401  (the build must have produced the extension)

    mode = ("pure-Python references (RMQ_NO_EXTENSIONS=1)" if os.environ.get("RMQ_NO_EXTENSIONS") == "1"
            else "msgspec + Cython")
    return f"rmq header codec and record walker: {mode}; store: Cython"


# --------------------------------------------------------------------------- event loops
# Every async test runs on both asyncio's loop and uvloop (pytest-asyncio >= 1.3 hook), so a
# protocol that only works on one of them shows up. Tests marked interop/slow/spark run on
# uvloop only (what production uses) to keep the suite's run time modest.
#
# Each loop reports anything that reaches its exception handler ("Task exception was never
# retrieved", errors in protocol callbacks, …) into _LOOP_ERRORS; the autouse guard below
# fails the test that produced them (uvloop's and asyncpg's tearDown do the same).

_LOOP_ERRORS: list[dict] = []


def _record_loop_error(loop, context):
    _LOOP_ERRORS.append(context)
    loop.default_exception_handler(context)


def _asyncio_loop():
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(_record_loop_error)
    return loop


def _uvloop_loop():
    loop = uvloop.new_event_loop()
    loop.set_exception_handler(_record_loop_error)
    return loop


_ONE_LOOP_MARKS = ("interop", "slow", "spark")


def pytest_asyncio_loop_factories(config, item):
    if any(item.get_closest_marker(m) is not None for m in _ONE_LOOP_MARKS):
        return {"uvloop": _uvloop_loop}
    return {"asyncio": _asyncio_loop, "uvloop": _uvloop_loop}


@pytest.fixture(autouse=True)
def _fail_on_loop_errors():
    """Fail the test if anything reached an event loop's exception handler during it."""
    del _LOOP_ERRORS[:]
    yield
    if _LOOP_ERRORS:
        errors = list(_LOOP_ERRORS)
        del _LOOP_ERRORS[:]
        lines = []
        for ctx in errors:
            exc = ctx.get("exception")
            lines.append(f"{ctx.get('message')}: {exc!r}" if exc is not None else str(ctx.get("message")))
        pytest.fail("event loop exception handler was called:\n  " + "\n  ".join(lines), pytrace=False)
