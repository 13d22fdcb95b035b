"""Hostile YAML at every door of the command line: one short error line, exit 2, fast.

Each door (a case file, ``--set``, the case stored in a restart file,
``sweep --values``, a study file) gets each hostile value: an alias bomb
(10**9 values once expanded), nesting 100,000 deep, a value that contains
itself, a huge value, a control character.  The command runs as a user runs
it; it must refuse in one ``error:`` line, without a traceback, within a
time limit, and write nothing.
"""
import os
import shutil
import time

import h5py
import pytest

from bubbleflow.apps.cli import main
from bubbleflow.apps.sweep import MAX_WORKERS
from bubbleflow.apps.sweep.values import MAX_RANGE_COUNT, MAX_RUNS
from bubbleflow.case.config import MAX_MESSAGE_CHARS
from bubbleflow.case.yaml_reader import MAX_OPTION_CHARS
from helpers.cli import ROOT, run_cli

COLUMN = os.path.join(ROOT, "cases", "bubbly_column.yaml")
TINY_FLOW = [os.path.join(ROOT, "cases", "two_phase.yaml"), "--backend", "numpy",
             "--no-progress", "--set", "grid.nx=16", "--set", "grid.ny=32",
             "--set", "output.interval=0.01"]
#: Seconds a refusal may take (a few interpreter starts on a busy machine;
#: unguarded, these inputs run for hours or exhaust the memory).
TIME_LIMIT = 30.0

_BOMB = "{" + ", ".join(["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"] + [
    f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]) + "}"

#: name -> (value in a file, value on the command line, what the error says).
#: A command-line argument is at most 128 KiB (the kernel's limit), so the
#: huge and deep ones there are long enough to pass the reader's limits.
HOSTILE = {
    "alias_bomb": (_BOMB, _BOMB, "more than 100000 values once aliases"),
    "deep": ("[" * 100_000, "[" * (MAX_OPTION_CHARS - 10), "nested more than 32 levels deep"),
    "recursive_alias": ("&a [*a]", "&a [*a]", "recursive alias"),
    "huge": ("x" * 10_000_000, "x" * 100_000, "characters"),
    "control_character": ("a\x1b[2Jb", "a\x1b[2Jb", "character '\\x1b' (U+001B)"),
}
HUGE_FILE = {"case_file": "larger than 512 KiB", "study_file": "larger than 512 KiB",
             "stored_case": "10000007 characters long"}


@pytest.fixture(scope="module")
def flow_result(tmp_path_factory):
    """A finished tiny flow run (restarts are crafted from copies of it)."""
    out = tmp_path_factory.mktemp("flow") / "out"
    assert main(["run", *TINY_FLOW, "--set", "time.end=0.02", "-o", str(out), "-q"]) == 0
    return out


def _case_file(tmp_path, value):
    path = tmp_path / "case.yaml"
    path.write_text(f"name: {value}\n")
    return ["run", str(path)]


def _study_file(tmp_path, value):
    path = tmp_path / "study.yaml"
    path.write_text(f"sweep:\n  parameters:\n    name: {value}\n")
    return ["sweep", str(path)]


def _set(tmp_path, value):
    return ["run", COLUMN, "--set", f"name={value}"]


def _values(tmp_path, value):
    return ["sweep", COLUMN, "--param", "name", "--values", value]


DOORS = {"case_file": _case_file, "study_file": _study_file, "set": _set, "values": _values}


def refused(res, elapsed, fragment):
    """The one error line of a refusal, checked."""
    assert "Traceback" not in res.stderr, res.stderr[-2000:]
    lines = res.stderr.splitlines()
    assert res.returncode == 2 and len(lines) == 1, res.stderr[:2000]
    line = lines[0]
    assert line.startswith("error: ") and len(line) <= len("error: ") + MAX_MESSAGE_CHARS, line
    assert "\x1b" not in line and fragment in line, line
    assert elapsed < TIME_LIMIT, elapsed
    return line


@pytest.mark.parametrize("hostile", sorted(HOSTILE))
@pytest.mark.parametrize("door", sorted(DOORS))
def test_hostile_value_at_a_door(tmp_path, door, hostile):
    in_file, on_line, fragment = HOSTILE[hostile]
    file_door = door.endswith("_file")
    value = in_file if file_door else on_line
    if hostile == "huge" and file_door:
        fragment = HUGE_FILE[door]
    out = tmp_path / "out"
    start = time.perf_counter()
    res = run_cli(*DOORS[door](tmp_path, value), "-o", str(out))
    line = refused(res, time.perf_counter() - start, fragment)
    if not file_door:
        # The option is named, its text cut to what identifies it.
        assert ("(--set name=" if door == "set" else "(--param name --values ") in line, line
    assert not out.exists()


@pytest.mark.parametrize("hostile", sorted(HOSTILE))
def test_hostile_case_stored_in_a_restart_file(tmp_path, flow_result, hostile):
    value = HOSTILE[hostile][0]
    fragment = HUGE_FILE["stored_case"] if hostile == "huge" else HOSTILE[hostile][2]
    source = tmp_path / "source"
    shutil.copytree(flow_result, source, symlinks=True)
    index = source / "two_phase.h5"
    with h5py.File(index, "r+") as fh:
        fh.attrs["case"] = f"name: {value}\n"
    out = tmp_path / "out"
    start = time.perf_counter()
    res = run_cli("run", *TINY_FLOW, "--set", "time.end=0.03", "-o", str(out),
                  "--restart", str(index))
    line = refused(res, time.perf_counter() - start, fragment)
    assert "two_phase.h5: cannot restart from it" in line and "stored case" in line
    # (The output folder's lock may stay: it is how a second run is told apart.)
    assert not out.exists() or [p for p in os.listdir(out) if not p.startswith(".")] == []


@pytest.mark.parametrize("args", [
    ["run", COLUMN, "--set", "name=" + "x" * 10_000_000],
    ["sweep", COLUMN, "--param", "name", "--values", "x" * 10_000_000],
    ["sweep", COLUMN, "--param", "contrast", "--values", "1", "--set", "x" * 10_000_000 + "=1"],
], ids=["set", "values", "sweep_set"])
def test_ten_megabyte_option_is_refused_unread(tmp_path, capsys, args):
    """Longer than a command line can be: given in-process, as a script would."""
    start = time.perf_counter()
    assert main([*args, "-o", str(tmp_path / "out")]) == 2
    elapsed = time.perf_counter() - start
    err = capsys.readouterr().err
    assert elapsed < 5.0 and len(err.splitlines()) == 1 and len(err) < 450, err[:1000]
    assert f"at most {MAX_OPTION_CHARS}" in err and "characters)" in err
    assert not (tmp_path / "out").exists()


# --------------------------------------------------------------------------
# The sweep's bounds
# --------------------------------------------------------------------------

def _sweep_error(tmp_path, capsys, *args):
    assert main(["sweep", COLUMN, "-o", str(tmp_path / "out"), *args]) == 2
    err = capsys.readouterr().err
    assert len(err.splitlines()) == 1 and not (tmp_path / "out").exists(), err
    return err


@pytest.mark.parametrize("workers", ["0", "-1", str(MAX_WORKERS + 1), "9" * 5000, "two"],
                         ids=["zero", "negative", "above", "5000_digits", "word"])
def test_workers_bounded(tmp_path, capsys, workers):
    err = _sweep_error(tmp_path, capsys, "--param", "contrast", "--values", "1",
                       "--workers", workers)
    assert f"expected an integer from 1 to {MAX_WORKERS}" in err and len(err) < 300, err


def test_the_api_bounds_the_workers_too(tmp_path):
    from bubbleflow.apps.sweep import prepare_study, run_study
    from bubbleflow.case.config import CaseError

    study = prepare_study(os.path.join(ROOT, "cases", "bubbly_column.yaml"),
                          params=["contrast"], values=["1"], output=str(tmp_path), name="s")
    for workers in (0, MAX_WORKERS + 1):
        with pytest.raises(CaseError, match=f"an integer from 1 to {MAX_WORKERS}"):
            run_study(study, workers=workers)
    assert not (tmp_path / "s" / "run_0000.h5").exists()


def test_range_count_bounded(tmp_path, capsys):
    start = time.perf_counter()
    for count in (str(MAX_RANGE_COUNT + 1), "9" * 5000):
        err = _sweep_error(tmp_path, capsys, "--param", "solver.rtol",
                           "--values", f"1e-8:1e-6:{count}:log")
        assert f"is not an integer from 1 to {MAX_RANGE_COUNT}" in err, err
        assert len(err.rstrip("\n")) <= len("error: ") + MAX_MESSAGE_CHARS
    assert time.perf_counter() - start < 5.0


def test_study_runs_bounded_before_any_point_is_built(tmp_path, capsys):
    start = time.perf_counter()
    err = _sweep_error(tmp_path, capsys, "--param", "solver.rtol", "--values", "1e-8:1e-6:200",
                       "--param", "contrast", "--values", "1:1000:200:log")
    assert f"40000 runs (200 x 200 values); expected at most {MAX_RUNS} runs" in err, err
    assert time.perf_counter() - start < 5.0
