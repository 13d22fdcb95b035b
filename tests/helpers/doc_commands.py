"""The commands the README and the documentation pages show, read from
their Markdown (tests/test_readme_commands.py checks they parse,
tests/test_docs_commands_run.py runs them)."""
import re
import shlex
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
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
