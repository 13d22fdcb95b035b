"""The documentation says what the code does and what was measured, not
when or in which piece of work: no issue numbers, no work sessions and no
possessive for the founding design document (it has a citable source,
Gupta 2010), in the README and in every Markdown page under docs/.

History belongs in CHANGELOG.md, which is not scanned (docs/changelog.md
only includes it).  Folders that Sphinx and sphinx-gallery generate at
build time (ignored by git) are not scanned either; docs/reference is
generated from the code too, but it is committed and published, so it is.
"""
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"
#: Build output of docs/conf.py, ignored by git (.gitignore).
GENERATED = ("_build", "auto_examples")
#: Words that date a page instead of explaining it.  Whitespace may be a
#: line break, so that a wrapped phrase is caught too.
HISTORY = re.compile(r"\bissue\s+#?\d+|\bsessions?\b|\bthe\s+seed['\u2019]s\b",
                     re.IGNORECASE)


def _pages():
    pages = [ROOT / "README.md"]
    for path in sorted(DOCS.rglob("*.md")):
        parts = path.relative_to(DOCS).parts[:-1]
        if any(p in GENERATED or p.startswith(".") for p in parts):
            continue
        pages.append(path)
    return pages


PAGES = _pages()


def _hits(text):
    """``[(line number, matched text)]`` of the history words in ``text``."""
    return [(text.count("\n", 0, m.start()) + 1, " ".join(m.group().split()))
            for m in HISTORY.finditer(text)]


def test_the_scanned_pages():
    names = {str(p.relative_to(ROOT)) for p in PAGES}
    assert {"README.md", "docs/index.md", "docs/performance_records.md",
            "docs/changelog.md"} <= names, sorted(names)
    assert "CHANGELOG.md" not in names
    assert not any(n.startswith(("docs/_build/", "docs/auto_examples/")) for n in names)
    include = (DOCS / "changelog.md").read_text(encoding="utf-8")
    assert "{include} ../CHANGELOG.md" in include


@pytest.mark.parametrize("text,expected", [
    ("Against the targets of issue 4 (4096^2)", [(1, "issue 4")]),
    ("changes of\nIssue 19 (b980f5e)", [(2, "Issue 19")]),
    ("measured this session.", [(1, "session")]),
    ("| session 12 | Sessions |", [(1, "session"), (1, "Sessions")]),
    ("solved as in\nthe seed's system", [(2, "the seed's")]),
    ("the issue's 30 ms; start_new_session; seeded; 14 issues", []),
])
def test_the_pattern(text, expected):
    assert _hits(text) == expected


def test_no_history_words_in_the_documentation():
    hits = [f"{path.relative_to(ROOT)}:{line}: {word!r}"
            for path in PAGES
            for line, word in _hits(path.read_text(encoding="utf-8"))]
    assert not hits, ("history words in the documentation (say what was measured "
                      "or changed, not in which issue or session):\n" + "\n".join(hits))
