"""Every ``bubbleflow`` command the README and the documentation pages show
parses with today's CLI, and every case file and script they name exists
(commands are checked, not run: the figures beside them come from the
machines they name).  The README stays short and opens with the two
commands of a fresh machine, the second the one CI runs."""
import re
import shlex
from pathlib import Path

import pytest

from bubbleflow.apps.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
#: The pages whose commands are checked: the README and the hand-written
#: documentation (tutorials, how-to guides, explanation, validation).
DOC_FOLDERS = ("tutorial", "howto", "explanation", "validation")
PAGES = [ROOT / "README.md"] + sorted(
    p for folder in DOC_FOLDERS for p in (ROOT / "docs" / folder).glob("*.md"))
#: The README's length limit: the rest belongs in docs/.
README_MAX_LINES = 150
#: Synopsis lines (``CASE.yaml [-o OUTDIR]``) describe, they are not commands.
PLACEHOLDER = re.compile(r"[\[\]|<>]|\.\.\.|\bCASE\b|CASE\.yaml|OUTDIR|FILE\b|RUN\.h5|STUDY|\bN\b|"
                         r"KEY=|\b[A-Z]{3,}\.(csv|h5|yaml)")
#: Fences whose lines are not shell commands (YAML, Python, program output).
NOT_SHELL = ("yaml", "python", "text", "bibtex", "{")


def _name(path):
    return str(path.relative_to(ROOT))


def code_blocks(text):
    """``[(info string, first line number, lines)]`` of the fenced blocks of
    a Markdown text."""
    blocks, current = [], None
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            if current is None:
                current = (line.lstrip()[3:].strip(), number + 1, [])
            else:
                blocks.append(current)
                current = None
        elif current is not None:
            current[2].append(line)
    return blocks


def page_commands(path):
    """``(page, line number, words)`` of each command of ``path``: in its
    shell code blocks (backslash continuations joined, comments and an
    ``mpiexec -n N`` prefix dropped), and quoted whole in its prose."""
    text = path.read_text(encoding="utf-8")
    out = []
    for info, first, lines in code_blocks(text):
        if info.startswith(NOT_SHELL):
            continue
        pending, start = "", 0
        for number, line in enumerate(lines, first):
            line = pending + line.split(" #")[0].rstrip()
            if line.endswith("\\"):
                pending, start = line[:-1] + " ", start or number
                continue
            pending, at = "", start or number
            start = 0
            for part in line.split("&&"):
                out += _command(path, at, part)
    # Commands quoted whole in the prose (a path, or options with
    # values); a span that names a command or an option is not one.
    inside = False
    for number, line in enumerate(text.splitlines(), 1):
        if line.lstrip().startswith("```"):
            inside = not inside
            continue
        if inside:
            continue
        for span in re.findall(r"`([^`]+)`", line):
            if span.startswith(("bubbleflow ", "mpiexec -n ", "python3 ")) and (
                    "/" in span or len(span.split()) >= 4):
                out += _command(path, number, span)
    return out


def _command(path, number, text):
    """``[(page, number, words)]`` for a command of ``text`` (a ``time``
    prefix dropped), or ``[]``."""
    try:
        words = shlex.split(text) if text.strip() else []
    except ValueError:                  # an unbalanced quote: not a command
        return []
    if words[:1] == ["time"]:
        words = words[1:]
    if words[:2] == ["mpiexec", "-n"]:
        words = words[3:]
    if words[:3] == ["python3", "-m", "bubbleflow"]:
        words = ["bubbleflow"] + words[3:]
    # A YAML list given as a value (``--set key=[8,8]``) is not a synopsis.
    bare = re.sub(r"=\[[^\]\s]*\]", "=LIST", text)
    if words and words[0] in ("bubbleflow", "python3") and not PLACEHOLDER.search(bare):
        return [(_name(path), number, words)]
    return []


COMMANDS = [c for page in PAGES for c in page_commands(page)]


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
    assert ci_command == 'python3 -m pip install -e ".[test]" && python3 -m pytest'


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
