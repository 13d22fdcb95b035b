"""Every ``bubbleflow`` command the README and the documentation pages show
runs, as written except for its size: the grid shrunk to a few cells a
side, a flow's end time to a few steps, a benchmark to its smallest size
and one repeat, and the backend the one under test.  So an option, a case
key or a file a page names cannot go stale without a test failing.

The commands run in page order, each in a folder of its own (a page's
commands are alternatives as often as a sequence): a file a command reads
(``--restart FILE``, a plot's input) is copied in from the command that
last wrote it; a command shown twice runs once.  Paths under ``/tmp`` are
taken inside the folder, so nothing outside the test's folder is written.
The ``python3`` commands are the test suite, its installation and the
documentation build (``.ci/run`` and tests/test_docs_build.py run those)
or validation scripts of minutes to hours (marked ``slow`` below).
"""
import shutil
import sys
from pathlib import Path

import pytest
import yaml

from bubbleflow.apps.cli import main
from helpers.doc_commands import COMMANDS, ROOT
from helpers.launcher import mpiexec

#: A flow's end time: a few steps on the shrunk grid (twice it for a restart).
FLOW_END = 0.01
#: The shrunk grid's shortest side: pressure (2-D, 3-D), flow (2-D, 3-D).
SHORTEST = {("pressure", 2): 64, ("pressure", 3): 16, ("flow", 2): 16, ("flow", 3): 8}
#: Benchmark sizes: pressure 2-D and 3-D (cells a side), flow 2-D and 3-D (NX).
BENCH_SIZES = {(False, 2): "64", (False, 3): "16", (True, 2): "32", (True, 3): "8"}
#: Scripts whose documented runs take minutes to hours (run by test_validation_scripts_run).
SLOW_SCRIPTS = ("scripts/validate_hysing.py", "scripts/validate_rising_3d.py",
                "scripts/still_bubble_study.py")


def _without(argv, flag):
    """``argv`` less ``flag`` and the values after it."""
    out, skipping = [], False
    for word in argv:
        if word == flag:
            skipping = True
            continue
        if skipping and not word.startswith("--") and not (word.startswith("-") and
                                                            word[1:2].isalpha()):
            continue
        skipping = False
        out.append(word)
    return out


def _option(argv, flag, *values):
    """``argv`` with ``flag`` set to ``values`` (appended, any earlier one dropped)."""
    return _without(argv, flag) + [flag, *values]


def _case_grid(path):
    """``(mode, ndim, sides)`` of a case or study file, read from its YAML."""
    data = yaml.safe_load((ROOT / path).read_text(encoding="utf-8"))
    grid = data.get("grid", {})
    sides = [grid[k] for k in ("nx", "ny", "nz") if k in grid]
    return data.get("mode", "pressure"), len(sides), sides


def _shrunk_grid(path):
    """``--set`` words that shrink the case's grid by a power of two, its
    aspect kept, to about :data:`SHORTEST` cells on its shortest side."""
    mode, ndim, sides = _case_grid(path)
    factor = 1
    while min(sides) // (2 * factor) >= SHORTEST[mode, ndim]:
        factor *= 2
    words = []
    for key, n in zip(("nx", "ny", "nz"), sides):
        words += ["--set", f"grid.{key}={n // factor}"]
    if mode == "flow":
        words += ["--set", f"time.end={FLOW_END}"]
    return mode, words


def shrunk(words, backend):
    """The argument list (less ``bubbleflow``) that runs ``words`` small
    on ``backend``, or None where it cannot run here (and why)."""
    argv = ["tmp/" + w[5:] if w.startswith("/tmp/") else w for w in words[1:]]
    command = argv[0]
    if command in ("plot", "compile"):
        return argv, None
    if "--backend" in argv or command in ("run", "sweep", "bench"):
        argv = _option(argv, "--backend", backend)
    if command == "run":
        mode, grid = _shrunk_grid(argv[1])
        argv += grid + ["--no-progress"]
        if "--restart" in argv and mode == "flow":
            argv += ["--set", f"time.end={2 * FLOW_END}"]
        return argv, None
    if command == "sweep":
        _, grid = _shrunk_grid(argv[1])
        return argv + grid + ["--no-progress"], None
    if command == "bench":
        flow = "--flow" in argv
        if "--scaling" in argv and mpiexec() is None:
            return None, "no mpiexec"
        if flow:
            cases = argv[argv.index("--cases") + 1] if "--cases" in argv else "hysing"
            ndim = 3 if "3d" in cases else 2
            argv = _option(_option(argv, "--steps", "3"), "--skip", "1")
        else:
            ndim = int(argv[argv.index("--dim") + 1]) if "--dim" in argv else 2
            argv = _option(_option(argv, "--repeat", "1"), "--peer-repeat", "1")
        argv = _option(argv, "--sizes", BENCH_SIZES[flow, ndim])
        if "--rounds" in argv:
            argv = _option(argv, "--rounds", "2")
        if "--weak-sizes" in argv:
            argv = _option(argv, "--weak-sizes", BENCH_SIZES[flow, ndim])
        return argv + ["--no-progress"], None
    return None, f"no rule for 'bubbleflow {command}'"


def _inputs(argv):
    """The files ``argv`` reads that an earlier command writes."""
    if argv[0] == "plot":
        return argv[1:2]
    if "--restart" in argv:
        return [argv[argv.index("--restart") + 1]]
    return []


def _succeeded(argv, code, out):
    """Whether a command did its work: exit 0, or a study that ran every
    point and records some as not converged (exit 1 on purpose, as
    docs/tutorial/contrast_study.md says)."""
    if code in (0, None):
        return True
    return argv[0] == "sweep" and code == 1 and ", 0 failed of " in out


def test_every_documented_command_runs(tmp_path, backend, monkeypatch, capsys):
    written = {}            # relative path -> the folder of the command that last wrote it
    ran, failures, skipped = set(), [], []
    commands = [c for c in COMMANDS if c[2][0] == "bubbleflow"]
    # What the commands write first, then the plots of it.
    ordered = [c for c in commands if c[2][1] != "plot"] + \
        [c for c in commands if c[2][1] == "plot"]
    for number, (page, line, words) in enumerate(ordered):
        if tuple(words) in ran:
            continue
        ran.add(tuple(words))
        argv, why = shrunk(words, backend.name)
        where = f"{page}:{line}: {' '.join(words)}"
        if argv is None:
            skipped.append(f"{where} ({why})")
            continue
        folder = tmp_path / f"{number:03d}"
        folder.mkdir()
        (folder / "cases").symlink_to(ROOT / "cases")
        missing = [name for name in _inputs(argv) if name not in written]
        if missing:
            failures.append(f"{where}: reads {missing[0]}, which no command shown writes")
            continue
        for name in _inputs(argv):
            source, stem = written[name], Path(name).with_suffix("")
            (folder / name).parent.mkdir(parents=True, exist_ok=True)
            for path in source.glob(f"{stem}.*"):          # with its snapshots folder
                copy = shutil.copytree if path.is_dir() else shutil.copy2
                copy(path, folder / path.relative_to(source))
        before = set(folder.rglob("*"))
        monkeypatch.chdir(folder)
        try:
            code = main(argv)
        except SystemExit as exc:
            code = exc.code
        out = capsys.readouterr()
        if not _succeeded(argv, code, out.out + out.err):
            tail = (out.err.strip().splitlines() or out.out.strip().splitlines() or [""])[-1]
            failures.append(f"{where}: exit {code} as `bubbleflow {' '.join(argv)}`: {tail}")
            continue
        for path in folder.rglob("*"):
            if path not in before and path.is_file() and path.parts[len(folder.parts)] != "cases":
                written[str(path.relative_to(folder))] = folder
    monkeypatch.chdir(ROOT)
    assert not failures, "\n".join(failures)
    assert len(ran) - len(skipped) >= 30, skipped


def _script_commands():
    """The pages' runs of the slow scripts, each once."""
    seen, out = set(), []
    for page, line, words in COMMANDS:
        if words[0] == "python3" and len(words) > 1 and words[1] in SLOW_SCRIPTS \
                and tuple(words) not in seen:
            seen.add(tuple(words))
            out.append((page, line, words))
    return out


@pytest.mark.slow
@pytest.mark.parametrize("page,line,words", _script_commands(),
                         ids=lambda v: None if isinstance(v, list) else str(v))
def test_validation_scripts_run(page, line, words, backend, tmp_path):
    """The validation scripts as the pages show them, with their output
    folder inside the test's; a run the page shows on a GPU runs in the GPU
    suite.  A validation ends 0 (within the published bounds) or 1 (outside
    them, as the pages say where that is so) once it has printed its table
    and plot; any other end fails."""
    import subprocess

    argv = words[1:]
    if "--backend" in argv and argv[argv.index("--backend") + 1] != backend.name:
        pytest.skip(f"shown with --backend {argv[argv.index('--backend') + 1]}")
    if argv[0] != "scripts/still_bubble_study.py":          # (it writes only with --csv)
        argv = _option(argv, "--outdir", str(tmp_path / "out"))
    (tmp_path / "cases").symlink_to(ROOT / "cases")
    proc = subprocess.run([sys.executable, str(ROOT / argv[0]), *argv[1:]], cwd=tmp_path,
                          capture_output=True, text=True)
    ended = proc.returncode == 0 or (proc.returncode == 1 and "\nplot: " in proc.stdout)
    assert ended, f"{page}:{line}: exit {proc.returncode}: {proc.stderr[-2000:]}"
