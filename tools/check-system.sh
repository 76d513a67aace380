#!/bin/sh
# The first step of `make`: what building rmq needs from the system, checked before pip runs,
# each missing piece named with the Debian package that provides it (pip cannot install them).
#   usage: tools/check-system.sh [python]      (default python3)
PY=${1:-python3}
missing=""
note() { missing="$missing  - $1\n"; }

if ! command -v "$PY" >/dev/null 2>&1; then
    printf 'make: %s not found: install Debian packages python3 python3-venv python3-dev (Python 3.11 or later)\n' "$PY" >&2
    exit 1
fi
if ! "$PY" -c 'import sys; sys.exit(sys.version_info < (3, 11))'; then
    note "Python 3.11 or later (found $("$PY" -V 2>&1)); set PYTHON=python3.11 or newer"
fi
VER=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
# Debian splits venv support (ensurepip) out of python3: `python3 -m venv` fails without it.
if ! "$PY" -c 'import ensurepip, venv' >/dev/null 2>&1; then
    note "venv support for $PY: Debian package python3-venv (or python$VER-venv)"
fi
CC=${CC:-cc}
if ! command -v "$CC" >/dev/null 2>&1; then
    note "a C compiler ($CC): Debian package gcc"
else
    INC=$("$PY" -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
    if [ ! -f "$INC/Python.h" ]; then
        note "Python's headers ($INC/Python.h): Debian package python3-dev (or python$VER-dev)"
    fi
    # The extension calls zlib's crc32 (setup.py links -lz): header and library both.
    if ! printf '#include <zlib.h>\nint main(void){return (int)crc32(0, 0, 0);}\n' \
            | "$CC" -x c - -o /dev/null -lz >/dev/null 2>&1; then
        note "zlib's header and library (zlib.h, -lz): Debian package zlib1g-dev"
    fi
fi
if [ -n "$missing" ]; then
    printf 'make: cannot build rmq, missing:\n%b' "$missing" >&2
    printf 'On Debian/Ubuntu: apt-get install gcc python3-dev python3-venv zlib1g-dev\n' >&2
    exit 1
fi
