"""Comments and docstrings in rmq/ cite Java's classes and methods, never documents outside the
repository (a specification's section numbers, seeds, issue numbers, reference notes): a
reader of the code cannot follow those, and they go stale silently."""

import pathlib
import re

import rmq

ROOT = pathlib.Path(rmq.__file__).parent

CITATION = re.compile(
    "|".join(
        [
            r"\bSPEC\b",  # "SPEC S3", "(SPEC B6-B8)"
            r"\b[Ii]ssue \d",  # "issue 5"
            r"wire-contract",  # "wire-contract §9"
            r"\b[Ss]eed (?:\d|'s)",  # "seed 001", "the seed's algorithm"
            r"\bseed's\b",
            r"§\s?\d",  # "§4", "docs/design.md §2"
            r"\breference/[\w.-]+\.md",  # "reference/spark.md"
        ]
    )
)

SOURCES = ("*.py", "*.pyx", "*.pxi", "*.pxd", "*.pyi")


def find_citations(root: pathlib.Path = ROOT) -> list[str]:
    """``path:line: text`` of every line under ``root`` that cites an outside document."""
    hits = []
    for pattern in SOURCES:
        for path in sorted(root.rglob(pattern)):
            text = path.read_text(encoding="utf-8")
            if not CITATION.search(text):  # one pass over the file; lines only where it hits
                continue
            for n, line in enumerate(text.splitlines(), 1):
                if CITATION.search(line):
                    hits.append(f"{path.relative_to(root.parent)}:{n}: {line.strip()[:120]}")
    return hits


def test_the_patterns_catch_each_form(tmp_path):
    pkg = tmp_path / "rmq"
    pkg.mkdir()
    (pkg / "a.py").write_text(
        '"""X (SPEC S3).\n\nAs in issue 5."""\n# wire-contract rule\n'
        "# seed 001 says\n# (§4)\n# see reference/spark.md\n"
        "# Java PullMessageProcessor.processRequest: fine\n"
    )
    (pkg / "b.pxi").write_text("# the seed's algorithm\n")
    hits = find_citations(pkg)
    assert [h.split(":")[0:2] for h in hits] == [
        ["rmq/a.py", "1"],
        ["rmq/a.py", "3"],
        ["rmq/a.py", "4"],
        ["rmq/a.py", "5"],
        ["rmq/a.py", "6"],
        ["rmq/a.py", "7"],
        ["rmq/b.pxi", "1"],
    ]


def test_no_citations_of_outside_documents():
    hits = find_citations()
    if hits:
        print(f"{len(hits)} citations of documents outside the repository:\n" + "\n".join(hits))
    assert not hits, f"{len(hits)} citations of outside documents (cite Java classes/methods instead):\n" + "\n".join(
        hits
    )
