"""Daemon logging (rmq.cli.logs): ``--log-file`` with size-based rotation written by a thread,
``--log-level`` and ``RMQ_LOG_LEVEL``, bad values stopping start-up. Real daemons as subprocesses."""

import os
import signal
import subprocess
import sys
import textwrap

import pytest

from rmq._testing import free_broker_port, free_port, terminate, wait_until_sync

RMQ = [sys.executable, "-m", "rmq"]


def _read(path):
    try:
        with open(path, encoding="utf-8") as f:
            return f.read()
    except FileNotFoundError:
        return ""


def test_standalone_logs_to_file_at_level(tmp_path):
    log_file = tmp_path / "logs" / "rmq.log"
    log_file.parent.mkdir()
    with open(tmp_path / "stderr.txt", "wb") as err:  # (the child has its own descriptor)
        proc = subprocess.Popen(
            [
                *RMQ,
                "standalone",
                "--namesrv-port",
                str(free_port()),
                "--broker-port",
                str(free_broker_port()),
                "--store-dir",
                str(tmp_path / "store"),
                "--metricsPort=0",
                "--consolePort=0",
                "--mappedFileSizeCommitLog=67108864",
                "--maxHashSlotNum=20000",
                "--maxIndexNum=80000",
                "--log-file",
                str(log_file),
                "--log-level",
                "debug",
            ],
            stdout=err,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )
    try:
        wait_until_sync(
            lambda: "rmq standalone listening" in _read(log_file) or proc.poll() is not None,
            timeout=60,
            what="the listening line in the log file",
        )
        assert proc.poll() is None, _read(tmp_path / "stderr.txt")
    finally:
        status = terminate(proc)
    text = _read(log_file)
    assert status == 0, text
    assert "rmq standalone stopping" in text  # written before exit: the queue is drained
    assert " DEBUG " in text  # --log-level debug reached the root logger
    assert "listening" not in _read(tmp_path / "stderr.txt")  # the file replaces stderr


def test_rotation_by_size_written_off_the_calling_thread(tmp_path):
    """In a fresh interpreter: records rotate at --log-max-bytes keeping --log-backups files,
    and the file is written by the listener's thread, not the thread that logs."""
    script = textwrap.dedent(f"""
        import logging, logging.handlers, threading
        from rmq.cli.logs import LogOptions, setup_logging
        writers = set()
        emit = logging.handlers.RotatingFileHandler.emit
        def probe(self, record):
            writers.add(threading.current_thread().name)
            emit(self, record)
        logging.handlers.RotatingFileHandler.emit = probe
        setup_logging(LogOptions({str(tmp_path / "r.log")!r}, max_bytes=2000, backups=2, level="INFO"))
        log = logging.getLogger("rmq.test")
        for i in range(300):
            log.info("record %04d %s", i, "x" * 40)
        log.debug("below the level")
        import rmq.cli.logs as logs
        logs._stop_listener()
        print(sorted(writers))
    """)
    out = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0, out.stderr
    assert "MainThread" not in out.stdout and out.stdout.strip() != "[]", out.stdout
    files = sorted(p.name for p in tmp_path.iterdir())
    assert files == ["r.log", "r.log.1", "r.log.2"]
    for name in files:
        assert 0 < os.path.getsize(tmp_path / name) <= 2000
    assert "record 0299" in _read(tmp_path / "r.log")  # the newest in the live file
    assert "below the level" not in "".join(_read(tmp_path / n) for n in files)


@pytest.mark.parametrize(
    ("args", "env", "named"),
    [
        (["--log-level", "LOUD"], {}, "--log-level"),
        ([], {"RMQ_LOG_LEVEL": "chatty"}, "RMQ_LOG_LEVEL"),
        (["--log-file", "/nonexistent-dir/rmq.log"], {}, "--log-file"),
        (["--log-file", "x.log", "--log-backups", "-1"], {}, "--log-backups"),
    ],
)
def test_bad_log_options_stop_start_up(tmp_path, args, env, named):
    out = subprocess.run(
        [*RMQ, "namesrv", "--port", str(free_port()), *args],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=tmp_path,
        env={**os.environ, **env},
    )
    assert out.returncode == 2, out.stderr
    assert named in out.stderr
    if "level" in named.lower():
        assert "CRITICAL, ERROR, WARNING, INFO, DEBUG" in out.stderr


@pytest.mark.parametrize("command", ["namesrv", "broker", "standalone", "console", "exporter"])
def test_every_daemon_takes_the_log_options(command):
    out = subprocess.run([*RMQ, command, "--help"], capture_output=True, text=True, timeout=60)
    assert out.returncode == 0
    for flag in ("--log-file", "--log-max-bytes", "--log-backups", "--log-level"):
        assert flag in out.stdout, (command, flag)


def test_namesrv_sigterm_with_log_file_flushes(tmp_path):
    log_file = tmp_path / "ns.log"
    port = free_port()
    proc = subprocess.Popen(
        [*RMQ, "namesrv", "--port", str(port), "--log-file", str(log_file)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        wait_until_sync(
            lambda: "listening" in _read(log_file) or proc.poll() is not None,
            timeout=60,
            what="the name server's listening line",
        )
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(30) == 0
    finally:
        terminate(proc)
    assert "rmq namesrv stopping" in _read(log_file)
