# Everything a fresh machine needs, from python3, a C compiler and the headers the extension
# builds against (tools/check-system.sh checks them first and names the Debian packages:
# gcc python3-dev python3-venv zlib1g-dev).
#   make run     embedded name server + broker (ports 9876 / 10911, data in ./rmq-data), the
#                console and the gRPC endpoint for the 5.x clients (8081): installs rmq and its
#                console and grpc extras. Options: make run ARGS='--metricsPort=0'
#   make unit    the unit tests only (no daemons, sockets or subprocesses; about half a minute)
#   make test    the whole suite (installs the test, spark, compression, grpc and controller extras too,
#                promtool, chromium and etcd-server)
#   make lint    ruff and mypy (rules in pyproject.toml; mypy strict on every package)
#   make dist    sdist and wheel in dist/ (python -m build)
#   make bench   short produce / pull benchmarks against a fresh `rmq standalone`
#   make fuzz    every atheris target in tests/fuzz for FUZZ_SECONDS (default 60) each
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
ARGS   ?=
# Two stamps: `make run` needs rmq and its console and grpc extras only; `make test` (after it or not)
# adds the test and spark extras to the same venv.
STAMP_RUN  := $(VENV)/.rmq-run
STAMP_TEST := $(VENV)/.rmq-test
# Build inputs, found by globs: the Cython modules may be split, moved or gain .pxd files.
CYTHON_SOURCES := $(shell find rmq -name '*.pyx' -o -name '*.pxd' -o -name '*.pxi' 2>/dev/null)
# The test, spark, compression, grpc and controller extras' requirements, read from pyproject.toml (one list of them).
# One per line into a requirements file (a command substitution would keep shell quotes literally).
EXTRAS_REQS = $(PY) -c 'import tomllib; d = tomllib.load(open("pyproject.toml", "rb"))["project"]["optional-dependencies"]; print("\n".join(d["test"] + d["spark"] + d["compression"] + d["grpc"] + d["controller"]))'

FUZZ_SECONDS ?= 60

.PHONY: all venv compile debug run lint unit test bench fuzz dist clean distclean

all: compile

$(PY):
	@sh tools/check-system.sh $(PYTHON)
	$(PYTHON) -m venv $(VENV)

# Reinstall when the build inputs change; the editable install builds the extensions in place.
$(STAMP_RUN): $(PY) pyproject.toml setup.py $(CYTHON_SOURCES)
	@sh tools/check-system.sh $(PY)
	$(PIP) install -q -e '.[console,grpc]'
	$(PY) -c 'import importlib, pathlib; [importlib.import_module(str(p.with_suffix("")).replace("/", ".")) for p in pathlib.Path("rmq").rglob("*.pyx")]'
	touch $(STAMP_RUN)

$(STAMP_TEST): $(STAMP_RUN)
	$(EXTRAS_REQS) > $(VENV)/.rmq-test-requirements.txt
	$(PIP) install -q -r $(VENV)/.rmq-test-requirements.txt
	touch $(STAMP_TEST)

venv compile: $(STAMP_RUN)

debug: $(PY)
	RMQ_DEBUG=1 $(PIP) install -q -e '.[test]'

run: $(STAMP_RUN)
	$(VENV)/bin/rmq standalone $(ARGS)

lint: $(STAMP_TEST)
	$(VENV)/bin/ruff check rmq tests bench
	$(VENV)/bin/ruff format --check rmq tests bench
	$(VENV)/bin/mypy

# The console's browser tests drive Debian's chromium through Playwright: a system package pip
# cannot install, so `make test` installs it when it is missing (as root, or through sudo -n).
CHROMIUM ?= /usr/bin/chromium
$(CHROMIUM):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get install -y -q chromium >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q chromium >/dev/null; }; \
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then \
	    sudo -n apt-get install -y -q chromium >/dev/null || { sudo -n apt-get update -q >/dev/null && sudo -n apt-get install -y -q chromium >/dev/null; }; \
	else \
	    echo "make test: could not install Debian's chromium (apt-get install chromium): the console's browser tests will fail until it is there"; \
	fi

# promtool (Debian's prometheus package) checks and unit-tests docs/prometheus-rules.yml
# (tests/test_alert_rules.py); installed the same way.
PROMTOOL ?= /usr/bin/promtool
$(PROMTOOL):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get install -y -q prometheus >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q prometheus >/dev/null; }; \
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then \
	    sudo -n apt-get install -y -q prometheus >/dev/null || { sudo -n apt-get update -q >/dev/null && sudo -n apt-get install -y -q prometheus >/dev/null; }; \
	else \
	    echo "make test: could not install Debian's prometheus (apt-get install prometheus, for promtool): the alert-rule tests will fail until it is there"; \
	fi

# The controller tests (tests/controller) run `rmq controller` on a real etcd: Debian's
# etcd-server (3.4, its JSON gateway is what rmq.controller.etcd speaks), installed the same way.
ETCD ?= /usr/bin/etcd
$(ETCD):
	@if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	    apt-get install -y -q etcd-server >/dev/null || { apt-get update -q >/dev/null && apt-get install -y -q etcd-server >/dev/null; }; \
	elif command -v sudo >/dev/null 2>&1 && sudo -n true 2>/dev/null; then \
	    sudo -n apt-get install -y -q etcd-server >/dev/null || { sudo -n apt-get update -q >/dev/null && sudo -n apt-get install -y -q etcd-server >/dev/null; }; \
	else \
	    echo "make test: could not install Debian's etcd-server (apt-get install etcd-server): the controller tests will be skipped until it is there"; \
	fi

# Async tests run on the loops RMQ_TEST_LOOPS names (uvloop, asyncio or both; both when CI is
# set, uvloop otherwise). PYTEST_ARGS passes more, e.g. PYTEST_ARGS='-x tests/store'.
# `make test` runs in WORKERS pytest-xdist processes (default 2: much of the suite waits on the
# daemons it starts, so two workers use a 2-core machine better than one), a test file per
# worker at a time (module fixtures stay single); free_port gives each worker its own ports.
# Files go out in collection order, which tests/conftest.py makes longest first (the modules
# marked heavy); xdist's own reordering, by number of tests per file, would undo that.
# WORKERS=0 runs it in one process.
PYTEST_ARGS ?=
WORKERS ?= 2
XDIST := $(if $(filter-out 0 1,$(WORKERS)),-n $(WORKERS) --dist loadfile --no-loadscope-reorder)
UNIT_DIRS := tests/common tests/property tests/store tests/remoting tests/fuzz tests/faults tests/spark/test_spark_units.py \
             tests/test_build.py tests/controller/test_controller_state.py

test: $(STAMP_TEST) | $(CHROMIUM) $(PROMTOOL) $(ETCD)
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest $(XDIST) $(if $(PYTEST_ARGS),$(PYTEST_ARGS),tests)

# Tests not marked integration (tests/conftest.py marks them), from the directories that hold
# such tests; --unit refuses any socket bind or child process while they run. The unit loop
# keeps Python's bytecode and pytest's rewritten test modules in __pycache__ even where the
# environment sets PYTHONDONTWRITEBYTECODE: recompiling and rewriting every module at each run
# was a fifth of the loop's CPU.
unit: $(STAMP_TEST)
	PYTHONDONTWRITEBYTECODE= $(PY) -m pytest -q --unit $(if $(PYTEST_ARGS),$(PYTEST_ARGS),$(UNIT_DIRS))

bench: $(STAMP_TEST)
	$(PY) bench/run_all.py

# Prints executions, exec/s and distinct crashes per target; crash inputs go to build/fuzz/.
fuzz: $(STAMP_TEST)
	FUZZ_SECONDS=$(FUZZ_SECONDS) $(PY) tests/fuzz/run_all.py

dist: $(STAMP_TEST)
	$(PY) -m build --outdir dist .

clean:
	rm -rf build dist *.egg-info .pytest_cache
	find rmq \( -name '*.c' -o -name '*.so' -o -name '*.html' \) -not -path 'rmq/console/static/*' -delete
	find . -name __pycache__ -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) rmq-data
