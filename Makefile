# Everything a fresh machine needs, from python3 and a C compiler.
#   make run     embedded name server + broker (ports 9876 / 10911, data in ./rmq-data)
#   make unit    the unit tests only (no daemons, sockets or subprocesses; about half a minute)
#   make test    the whole suite (builds the extension, installs test deps and real clients)
#   make lint    ruff and mypy (rules in pyproject.toml; mypy strict on every package)
#   make bench   short produce / pull benchmarks against a fresh `rmq standalone`
#   make fuzz    every atheris target in tests/fuzz for FUZZ_SECONDS (default 60) each
PYTHON ?= python3
VENV   ?= .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
STAMP  := $(VENV)/.rmq-installed

FUZZ_SECONDS ?= 60

.PHONY: all venv compile debug run lint unit test bench fuzz clean distclean

all: compile

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PIP) install -q --upgrade pip

# Reinstall when the build inputs change; the editable install builds the extensions in place.
NATIVE := $(wildcard rmq/*.pyx rmq/*.pxd rmq/*.pxi rmq/*/*.pyx rmq/*/*.pxd rmq/*/*/*.pyx rmq/*/*/*.pxd)
EXTENSIONS := rmq._store rmq.remoting._codec rmq.broker.processors._sendpath
$(STAMP): $(PY) pyproject.toml setup.py $(NATIVE)
	$(PIP) install -q -e '.[test,spark,console]'
	$(PY) -c 'import importlib; [importlib.import_module(m) for m in "$(EXTENSIONS)".split()]'
	touch $(STAMP)

venv compile: $(STAMP)

debug: $(PY)
	RMQ_DEBUG=1 $(PIP) install -q -e '.[test]'

run: $(STAMP)
	$(VENV)/bin/rmq standalone

lint: $(STAMP)
	$(VENV)/bin/ruff check rmq tests bench
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

# Async tests run on the loops RMQ_TEST_LOOPS names (uvloop, asyncio or both; both when CI is
# set, uvloop otherwise). PYTEST_ARGS passes more, e.g. PYTEST_ARGS='-x tests/store'.
# WORKERS=2 runs `make test` in two pytest-xdist processes, a test file per worker at a time
# (module fixtures stay single); free_port gives each worker its own ports.
PYTEST_ARGS ?=
WORKERS ?= 0
XDIST := $(if $(filter-out 0 1,$(WORKERS)),-n $(WORKERS) --dist loadfile)
UNIT_DIRS := tests/common tests/property tests/store tests/remoting tests/fuzz tests/spark/test_spark_units.py \
             tests/test_build.py

test: $(STAMP) | $(CHROMIUM)
	$(PY) -m pytest $(XDIST) $(if $(PYTEST_ARGS),$(PYTEST_ARGS),tests)

# Tests not marked integration (tests/conftest.py marks them), from the directories that hold
# such tests; --unit refuses any socket bind or child process while they run.
unit: $(STAMP)
	$(PY) -m pytest -q --unit $(if $(PYTEST_ARGS),$(PYTEST_ARGS),$(UNIT_DIRS))

bench: $(STAMP)
	$(PY) bench/run_all.py

# Prints executions, exec/s and distinct crashes per target; crash inputs go to build/fuzz/.
fuzz: $(STAMP)
	FUZZ_SECONDS=$(FUZZ_SECONDS) $(PY) tests/fuzz/run_all.py

clean:
	rm -rf build *.egg-info .pytest_cache
	rm -f $(patsubst %.pyx,%.c,$(filter %.pyx,$(NATIVE))) $(patsubst %.pyx,%*.so,$(filter %.pyx,$(NATIVE)))
	find rmq -name '*.html' -delete
	find . -name __pycache__ -prune -exec rm -rf {} +

distclean: clean
	rm -rf $(VENV) rmq-data
