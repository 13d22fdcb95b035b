"""Every ``bubbleflow`` command the README and the documentation pages show
parses with today's CLI, and every case file and script they name exists
(tests/test_docs_commands_run.py runs them on small grids).  The README stays short and opens with the two
commands of a fresh machine, the second the one CI runs."""
import re

import pytest

from bubbleflow.apps.cli import build_parser
from helpers.doc_commands import (COMMANDS, DOC_FOLDERS, PAGES, README_MAX_LINES, ROOT, _name,
                                  code_blocks)


def _id(value):
    return None if isinstance(value, list) else str(value)


def test_the_pages_exist_and_show_commands():
    assert len(PAGES) > 1 + len(DOC_FOLDERS), [_name(p) for p in PAGES]
    kinds = {w[1] for _, _, w in COMMANDS if w[0] == "bubbleflow" and len(w) > 1}
    assert {"run", "bench", "sweep", "plot"} <= kinds, kinds
    readme = {w[1] for page, _, w in COMMANDS if page == "README.md" and w[0] == "bubbleflow"}
    assert "run" in readme


def test_readme_is_short():
    lines = (ROOT / "README.md").read_text(encoding="utf-8").splitlines()
    assert len(lines) <= README_MAX_LINES, (
        f"README.md has {len(lines)} lines (at most {README_MAX_LINES}): move detail to docs/")


def test_readme_opens_with_the_two_setup_commands():
    """The first two code blocks are the main job's and the tests'
    commands, the second exactly the one ``.ci/run`` runs."""
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    ci_command = [line for line in ci if line.strip() and not line.startswith("#")][-1].strip()
    blocks = code_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    assert [b[2] for b in blocks[:2]] == [
        ["python3 -m pip install -e . && bubbleflow run cases/two_phase.yaml"],
        [ci_command]]
    assert ci_command == 'python3 -m pip install -e ".[test]" && python3 -m pytest -n auto'


@pytest.mark.parametrize("page,line,words", [c for c in COMMANDS if c[2][0] == "bubbleflow"],
                         ids=_id)
def test_each_bubbleflow_command_parses(page, line, words):
    try:
        args = build_parser().parse_args(words[1:])
    except SystemExit as exc:
        pytest.fail(f"{page}:{line}: {' '.join(words)}: the CLI refuses it (exit {exc.code})")
    for name in ("case", "cases"):
        value = getattr(args, name, None)
        for path in (value if isinstance(value, list) else [value]):
            if isinstance(path, str) and path.endswith((".yaml", ".yml")):
                assert (ROOT / path).exists(), f"{page}:{line}: {path} does not exist"


@pytest.mark.parametrize("page,line,words", [c for c in COMMANDS if c[2][0] == "python3"],
                         ids=_id)
def test_each_script_the_pages_run_exists(page, line, words):
    script = next((w for w in words[1:] if w.endswith((".py", ".sh"))), None)
    if script is not None:
        assert (ROOT / script).exists(), f"{page}:{line}: {script} does not exist"


def test_case_files_named_in_prose_exist():
    """Every ``cases/...yaml`` a page names exists."""
    missing = [(_name(page), name) for page in PAGES
               for name in re.findall(r"\bcases/[\w.-]+\.ya?ml\b", page.read_text(encoding="utf-8"))
               if not (ROOT / name).exists()]
    assert not missing


def test_scripts_named_in_prose_exist():
    """Every ``scripts/...`` a page names exists."""
    missing = [(_name(page), name) for page in PAGES
               for name in re.findall(r"\bscripts/[\w.-]+\.(?:py|sh)\b",
                                      page.read_text(encoding="utf-8"))
               if not (ROOT / name).exists()]
    assert not missing
