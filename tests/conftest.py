import asyncio
import os
import sys

import pytest
import uvloop


def pytest_report_header(config):
    import rmq._store  # noqa: F401  (the build must have produced the extension)

    mode = (
        "pure-Python references (RMQ_NO_EXTENSIONS=1)"
        if os.environ.get("RMQ_NO_EXTENSIONS") == "1"
        else "msgspec + Cython"
    )
    return f"rmq header codec and record walker: {mode}; store: Cython"


# --------------------------------------------------------------------------- event loops
# Async tests run on the loops RMQ_TEST_LOOPS names: "uvloop" (what production uses; the default
# locally), "asyncio" or "both" (the default when CI is set, as GitHub Actions does; `.ci/run`
# sets RMQ_TEST_LOOPS=both itself), so that in CI a protocol that only works on one loop shows up
# (pytest-asyncio >= 1.3 hook). Tests marked interop/slow/spark run on uvloop only whatever the
# setting: they are about the daemons, not the loop.
#
# Each loop reports anything that reaches its exception handler ("Task exception was never
# retrieved", errors in protocol callbacks, …) into _LOOP_ERRORS; the autouse guard below
# fails the test that produced them (uvloop's and asyncpg's tearDown do the same).

_LOOP_ERRORS: list[dict] = []


def _record_loop_error(loop, context):
    _LOOP_ERRORS.append(context)
    loop.default_exception_handler(context)


class _UnitUvloop(uvloop.Loop):
    """uvloop spawns children through libuv, which no audit hook sees: `--unit` refuses it here."""

    async def subprocess_exec(self, *args, **kwargs):
        raise _UnitGuardError("a unit test started a subprocess (uvloop subprocess_exec)")

    async def subprocess_shell(self, *args, **kwargs):
        raise _UnitGuardError("a unit test started a subprocess (uvloop subprocess_shell)")


def _asyncio_loop():
    loop = asyncio.new_event_loop()
    loop.set_exception_handler(_record_loop_error)
    return loop


def _uvloop_loop():
    loop = _UnitUvloop() if _UNIT_GUARD else uvloop.new_event_loop()
    loop.set_exception_handler(_record_loop_error)
    return loop


_ONE_LOOP_MARKS = ("interop", "slow", "spark")
_LOOP_CHOICES = {"uvloop": ("uvloop",), "asyncio": ("asyncio",), "both": ("asyncio", "uvloop")}
_LOOP_FACTORIES = {"asyncio": _asyncio_loop, "uvloop": _uvloop_loop}


def _test_loops() -> tuple[str, ...]:
    ci = os.environ.get("CI", "").lower() not in ("", "0", "false", "no")
    choice = os.environ.get("RMQ_TEST_LOOPS") or ("both" if ci else "uvloop")
    if choice not in _LOOP_CHOICES:
        raise pytest.UsageError(f"RMQ_TEST_LOOPS={choice!r}: allowed values are {', '.join(_LOOP_CHOICES)}")
    return _LOOP_CHOICES[choice]


def pytest_asyncio_loop_factories(config, item):
    if any(item.get_closest_marker(m) is not None for m in _ONE_LOOP_MARKS):
        return {"uvloop": _uvloop_loop}
    return {name: _LOOP_FACTORIES[name] for name in _test_loops()}


# ------------------------------------------------------------------------- unit / integration
# `integration` is added here, never by hand: to every test under a directory whose tests all
# talk to daemons, to every test using a fixture that starts one, and to every interop/slow/spark
# test. Test modules elsewhere that start servers themselves say so with
# `pytestmark = pytest.mark.integration`. `pytest --unit` (`make unit`) runs the rest and
# refuses, while they run, every bind of a socket and every child process (an audit hook, and
# the uvloop subclass above): a test that starts a daemon without being marked fails there,
# naming what it did, instead of slowing the unit loop down.

_INTEGRATION_DIRS = frozenset(
    {
        "admin",
        "bench",
        "broker",
        "cli",
        "client",
        "console",
        "grpc",
        "ha",
        "interop",
        "namesrv",
        "semantics",
    }
)
_DAEMON_FIXTURES = frozenset(
    {
        "env",
        "cluster",
        "daemon",
        "namesrv_addr",
        "console",
        "broker",
        "rmq_server",
        "wire",
        "spark",
        "real_clients",
    }
)
_UNIT_GUARD = False
_TESTS_DIR = os.path.dirname(os.path.abspath(__file__))


class _UnitGuardError(RuntimeError):
    pass


def pytest_addoption(parser):
    parser.addoption(
        "--unit",
        action="store_true",
        default=False,
        help="run only the tests not marked integration (no daemons, no sockets bound, no "
        "subprocesses: each is refused while a test runs)",
    )


def pytest_collection_modifyitems(config, items):
    # heavy files first, longest first: the order `make test` hands files to its xdist workers
    from rmq._testing.order import heavy_files_first  # (the test modules imported it already)

    try:
        heavy_files_first(items)
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None
    for item in items:
        rel = os.path.relpath(str(item.path), _TESTS_DIR).split(os.sep)
        if (
            (len(rel) > 1 and rel[0] in _INTEGRATION_DIRS)
            or _DAEMON_FIXTURES.intersection(item.fixturenames)
            or any(item.get_closest_marker(m) is not None for m in _ONE_LOOP_MARKS)
        ):
            item.add_marker(pytest.mark.integration)
    if config.getoption("--unit"):
        keep = [i for i in items if i.get_closest_marker("integration") is None]
        config.hook.pytest_deselected(items=[i for i in items if i.get_closest_marker("integration") is not None])
        items[:] = keep
        for item in items:
            _scale_examples(item)
        global _guard_active
        _guard_active = True  # from here on: every module is imported, only tests and fixtures run


# The unit loop runs every randomized test at a tenth of its depth (hypothesis examples, and the
# loops of differential tests that ask for `depth`); `make test` runs them in full.
UNIT_DEPTH = 0.1


def _scale_examples(item) -> None:
    test = getattr(item, "obj", None)
    given = getattr(test, "hypothesis", None)
    inner = getattr(given, "inner_test", None)
    current = getattr(test, "_hypothesis_internal_use_settings", None)
    if inner is None or current is None:
        return
    from hypothesis import settings

    test._hypothesis_internal_use_settings = settings(
        current, max_examples=max(10, int(current.max_examples * UNIT_DEPTH))
    )


@pytest.fixture
def depth(request) -> float:
    """How much of its full work a randomized test does: 1.0, or UNIT_DEPTH under `--unit`."""
    return UNIT_DEPTH if request.config.getoption("--unit") else 1.0


_GUARDED_EVENTS = ("socket.bind", "subprocess.Popen", "os.posix_spawn", "os.fork", "os.exec", "os.system")
_guard_active = False


# A started MessageStore (master role) listens for slaves (Java HAService.AcceptSocketService) on
# an ephemeral port nobody connects to in a unit test: that one bind is part of the store.
_STORE_HA_SERVICE = os.path.join("rmq", "store", "ha", "service.py")


def _store_ha_listener() -> bool:
    frame = sys._getframe(2)
    while frame is not None:
        if frame.f_code.co_name == "start" and frame.f_code.co_filename.endswith(_STORE_HA_SERVICE):
            return True
        frame = frame.f_back
    return False


def _unit_audit_hook(event, args):
    if _guard_active and event in _GUARDED_EVENTS and not (event == "socket.bind" and _store_ha_listener()):
        raise _UnitGuardError(
            f"a unit test did {event}{args!r}: mark it integration (the module's "
            "`pytestmark` or the test's decorator; see tests/conftest.py)"
        )


def pytest_configure(config):
    global _UNIT_GUARD
    if config.getoption("--unit"):
        _UNIT_GUARD = True
        sys.addaudithook(_unit_audit_hook)  # cannot be removed: only a --unit session installs it


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
