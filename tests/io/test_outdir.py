"""Output locations are checked before any work; a liquid-only flow runs."""
import os

import h5py
import numpy as np
import pytest

from bubbleflow.apps.cli import main

SMALL = ["--backend", "numpy", "--no-progress", "--set", "grid.nx=32", "--set", "grid.ny=32"]


def run(capsys, *args):
    rc = main(["run", "cases/bubbly_column.yaml", *SMALL, *args])
    out, err = capsys.readouterr()
    return rc, out, err.strip()


@pytest.fixture(autouse=True)
def _no_solve(monkeypatch):
    """A refused location must be refused before the solve: the solve fails the test."""
    import bubbleflow.apps.run as app_mod

    monkeypatch.setattr(app_mod, "build_pressure_problem",
                        lambda *a, **k: pytest.fail("the problem was built"))


def test_folder_that_is_a_file(capsys, tmp_path):
    f = tmp_path / "results"
    f.write_text("x")
    rc, out, err = run(capsys, "-o", str(f))
    assert rc == 2 and len(err.splitlines()) == 1 and "output.directory" in err
    assert "is a file" in err and "Traceback" not in err


def test_path_under_a_file(capsys, tmp_path):
    f = tmp_path / "results"
    f.write_text("x")
    rc, _, err = run(capsys, "-o", str(f / "a" / "b"))
    assert rc == 2 and "is a file" in err and str(f) in err


def test_folder_where_no_file_can_be_created(capsys, tmp_path, monkeypatch):
    """(Root writes anywhere, so the refusal of the file system is simulated.)"""
    import bubbleflow.io.outdir as outdir_mod

    real_open = outdir_mod.os.open

    def refusing(path, flags, mode=0o777, **kw):
        if str(path).endswith(".tmp") and (flags & os.O_CREAT):
            raise PermissionError(13, "Permission denied")
        return real_open(path, flags, mode, **kw)

    monkeypatch.setattr(outdir_mod.os, "open", refusing)
    rc, _, err = run(capsys, "-o", str(tmp_path))
    assert rc == 2 and "cannot write" in err and "Permission denied" in err


def test_name_too_long(capsys, tmp_path):
    rc, _, err = run(capsys, "-o", str(tmp_path), "--set", "name=" + "n" * 240)
    assert rc == 2 and len(err.splitlines()) == 1 and "name" in err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("name", ["a/b", "..", "with\0nul"])
def test_name_that_is_not_a_file_name(capsys, tmp_path, name):
    rc, _, err = run(capsys, "-o", str(tmp_path), "--set", f"name={name!s}")
    assert rc == 2 and len(err.splitlines()) == 1 and "name" in err
    assert not list(tmp_path.iterdir())


def test_existing_pressure_result_kept_unless_overwrite(capsys, tmp_path, monkeypatch):
    target = tmp_path / "bubbly_column.h5"
    target.write_bytes(b"an earlier result")
    rc, _, err = run(capsys, "-o", str(tmp_path))
    assert rc == 2 and "--overwrite" in err and target.read_bytes() == b"an earlier result"


def test_liquid_only_flow_runs_without_bubble_diagnostics(tmp_path, capsys, monkeypatch):
    monkeypatch.undo()              # this one solves
    rc = main(["run", "cases/two_phase.yaml", "--backend", "numpy", "--no-progress",
               "--set", "grid.nx=16", "--set", "grid.ny=32",
               "--set", "geometry.bubbles=[]",
               "--set", "time.end=0.05", "-o", str(tmp_path)])
    out, err = capsys.readouterr()
    assert rc == 0, err
    assert "no gas" in out and "blew up" not in err
    with h5py.File(tmp_path / "two_phase.h5") as fh:
        assert fh.attrs["run_status"] == "finished"
        assert (fh["diagnostics/area"][()] == 0).all()
        assert np.isfinite(fh["fields/p"][-1]).all()


def test_pressure_progress_on_a_terminal(capsys, tmp_path, monkeypatch):
    """A terminal sees the iterations and residual while a pressure solve runs."""
    import sys

    monkeypatch.undo()
    monkeypatch.setattr(sys.stderr, "isatty", lambda: True, raising=False)
    rc = main(["run", "cases/bubbly_column.yaml", "--backend", "numpy", "--set", "grid.nx=64",
               "--set", "grid.ny=64", "--set", "solver.deflation.subdomains=[8,8]",
               "-o", str(tmp_path)])
    err = capsys.readouterr().err
    assert rc == 0
    assert "iteration" in err and "relative residual" in err and "rtol 1e-08" in err
