"""The package says it is typed (PEP 561) and the wheel carries the marker."""

import pathlib
import tomllib

import rmq

REPO = pathlib.Path(__file__).resolve().parents[2]


def test_py_typed_marker_is_shipped():
    assert (pathlib.Path(rmq.__file__).parent / "py.typed").is_file()
    cfg = tomllib.loads((REPO / "pyproject.toml").read_text())
    assert "py.typed" in cfg["tool"]["setuptools"]["package-data"]["rmq"]
