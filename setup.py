"""Build logic for the one C extension, ``rmq._store``.

Everything else lives in pyproject.toml. Environment switches:

* ``RMQ_DEBUG=1``   build with line tracing, annotation and ``-O0 -g``.
* ``RMQ_NO_EXTENSIONS=1`` at *run* time (not a build switch) makes the JSON header codec and
  the record walker (``rmq.common.message.walk_records``) use their pure-Python references.
  The store itself has no pure-Python twin: ``rmq.store`` needs the extension.

The extension links zlib (``crc32`` from zlib.h, called on the buffers themselves).
"""
import os

from setuptools import Extension, setup

DEBUG = os.environ.get("RMQ_DEBUG") == "1"

compile_args = ["-O0", "-g"] if DEBUG else ["-O2"]
compile_args += ["-Wno-unused-function", "-Wno-unreachable-code"]
macros = [("RMQ_DEBUG", "1")] if DEBUG else []
directives = {"language_level": "3", "embedsignature": True}
if DEBUG:
    directives.update(linetrace=True, profile=True)
    macros.append(("CYTHON_TRACE_NOGIL", "1"))


def extensions():
    from Cython.Build import cythonize

    ext = Extension(
        "rmq._store",
        ["rmq/_store.pyx"],
        extra_compile_args=compile_args,
        define_macros=macros,
        libraries=["z"],
    )
    return cythonize([ext], compiler_directives=directives, annotate=DEBUG)


setup(ext_modules=extensions())
