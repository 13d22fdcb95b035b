"""Every ``bubbleflow`` command the README shows parses with today's CLI,
and every case file and script it names exists (commands are checked, not
run: the figures beside them come from the machines they name)."""
import re
import shlex
from pathlib import Path

import pytest

from bubbleflow.apps.cli import build_parser

ROOT = Path(__file__).resolve().parents[1]
#: Synopsis lines (``CASE.yaml [-o OUTDIR]``) describe, they are not commands.
PLACEHOLDER = re.compile(r"[\[\]|<>]|\.\.\.|\bCASE\b|CASE\.yaml|OUTDIR|FILE\b|RUN\.h5|STUDY|\bN\b|KEY=|\b[A-Z]{3,}\.(csv|h5|yaml)")


def readme_commands():
    """``(line number, words)`` of each command in the README's code blocks,
    backslash continuations joined, comments and an ``mpiexec -n N`` prefix
    dropped."""
    lines = (ROOT / "README.md").read_text().splitlines()
    out, inside, pending, start = [], False, "", 0
    for number, line in enumerate(lines, 1):
        if line.startswith("```"):
            inside, pending = not inside, ""
            continue
        if not inside:
            continue
        text = pending + line.split(" #")[0].rstrip()
        if text.endswith("\\"):
            pending, start = text[:-1] + " ", start or number
            continue
        pending, first = "", start or number
        start = 0
        for part in text.split("&&"):
            out += _command(first, part)
    # Commands quoted whole in the prose (a path, or options with
    # values); a span that names a command or an option is not one.
    for number, line in enumerate(lines, 1):
        for span in re.findall(r"`([^`]+)`", line):
            if span.startswith(("bubbleflow ", "mpiexec -n ")) and (
                    "/" in span or len(span.split()) >= 4):
                out += _command(number, span)
    return out


def _command(number, text):
    """``[(number, words)]`` for a command of ``text``, or ``[]``."""
    words = shlex.split(text) if text.strip() else []
    if words[:2] == ["mpiexec", "-n"]:
        words = words[3:]
    if words[:3] == ["python3", "-m", "bubbleflow"]:
        words = ["bubbleflow"] + words[3:]
    if words and words[0] in ("bubbleflow", "python3") and not PLACEHOLDER.search(text):
        return [(number, words)]
    return []


COMMANDS = readme_commands()


def test_the_readme_shows_commands():
    kinds = {w[1] for _, w in COMMANDS if w[0] == "bubbleflow"}
    assert {"run", "bench", "sweep", "plot"} <= kinds, kinds


@pytest.mark.parametrize("line,words", [c for c in COMMANDS if c[1][0] == "bubbleflow"],
                         ids=lambda v: str(v) if isinstance(v, int) else None)
def test_each_bubbleflow_command_parses(line, words):
    try:
        args = build_parser().parse_args(words[1:])
    except SystemExit as exc:
        pytest.fail(f"README.md:{line}: {' '.join(words)}: the CLI refuses it (exit {exc.code})")
    for name in ("case", "cases"):
        value = getattr(args, name, None)
        for path in (value if isinstance(value, list) else [value]):
            if isinstance(path, str) and path.endswith((".yaml", ".yml")):
                assert (ROOT / path).exists(), f"README.md:{line}: {path} does not exist"


@pytest.mark.parametrize("line,words", [c for c in COMMANDS if c[1][0] == "python3"],
                         ids=lambda v: str(v) if isinstance(v, int) else None)
def test_each_script_the_readme_runs_exists(line, words):
    script = next((w for w in words[1:] if w.endswith(".py")), None)
    if script is not None:
        assert (ROOT / script).exists(), f"README.md:{line}: {script} does not exist"
