"""Build logic for the C extensions: every ``rmq/**/*.pyx`` becomes one extension named by its
path, so splitting or moving a Cython module needs no change here. Today, one per layer that
has native code:

* ``rmq._store``                       records, ConsumeQueue, getMessage (SQL92 filter), dispatch,
                                       index, the store's one writer (``Appender``);
* ``rmq.protocol._codec``              the header codec and the SEND reply frame;
* ``rmq.broker.processors._sendpath``  the plain SEND in one call (cimports the other two).

Each has a ``.pxd``; ``rmq/common/_bytes.pxd`` (byte order, CRC) and
``rmq/common/slots.pxd`` (``__slots__`` read at their offsets) are header only. Everything
else lives in pyproject.toml. Environment switches:

* ``RMQ_DEBUG=1``   build with line tracing, annotation and ``-O0 -g``.
* ``RMQ_QUICK_BUILD=1`` build with ``-O0 -g0``: gcc takes a fifth of the CPU of the release
  flags (``-O2`` and Python's ``-g``), for a build that must work but need not be fast
  (tests/test_packaging.py builds the sdist and the wheel this way).
* ``RMQ_NO_EXTENSIONS=1`` at *run* time (not a build switch; read by ``rmq.common.native``)
  makes the header codec and the record walker use their pure-Python references. The store
  itself has no pure-Python twin: ``rmq.store`` needs the extension.

The extensions link zlib (``crc32`` from zlib.h, called on the buffers themselves). Cython
comes from the build requirements (pyproject.toml), so an sdist builds them from the sources
it carries (MANIFEST.in) rather than from a generated C file.
"""
import glob
import os

from setuptools import Extension, setup

DEBUG = os.environ.get("RMQ_DEBUG") == "1"
QUICK = os.environ.get("RMQ_QUICK_BUILD") == "1"
JOBS = os.cpu_count() or 1  # Cython, then gcc (setuptools build_ext --parallel), on modules side by side

compile_args = ["-O0", "-g"] if DEBUG else ["-O0", "-g0"] if QUICK else ["-O2"]
compile_args += ["-Wno-unused-function", "-Wno-unreachable-code"]
macros = [("RMQ_DEBUG", "1")] if DEBUG else []
directives = {"language_level": "3", "embedsignature": True}
if DEBUG:
    directives.update(linetrace=True, profile=True)
    macros.append(("CYTHON_TRACE_NOGIL", "1"))


def extensions():
    from Cython.Build import cythonize

    exts = [
        Extension(
            os.path.splitext(path)[0].replace(os.sep, "."),
            [path],
            extra_compile_args=compile_args,
            define_macros=macros,
            libraries=["z"],
        )
        for path in sorted(glob.glob(os.path.join("rmq", "**", "*.pyx"), recursive=True))
    ]
    return cythonize(exts, compiler_directives=directives, annotate=DEBUG, nthreads=JOBS)


setup(ext_modules=extensions(), options={"build_ext": {"parallel": JOBS}})
