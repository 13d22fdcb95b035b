"""``bubbleflow compile``: small copies of the cases run ahead, so a first run
on a GPU finds its kernels compiled in CuPy's cache."""
import math
import os
import subprocess
import sys

import pytest

from bubbleflow.apps import compile_ahead
from bubbleflow.apps.cli import main
from bubbleflow.case.config import CaseError
from bubbleflow.case.time_step import initial_dt_limits
from bubbleflow.compute.backend import BackendUnavailable, get_backend
from bubbleflow.flow.warm_up import WARM_UP_CELLS

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def bubbleflow(*args, env=None, timeout=600):
    env = dict(os.environ, **(env or {}))
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    return subprocess.run([sys.executable, "-m", "bubbleflow.apps.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_the_default_plan_covers_both_dimensions_interface_methods_and_viscous_schemes():
    runs = compile_ahead.plan()
    cases = [r.case for r in runs]
    assert {c.grid.ndim for c in cases} == {2, 3}
    for ndim in (2, 3):
        of_dim = [c for c in cases if c.grid.ndim == ndim]
        assert {c.levelset.method for c in of_dim} == {"clsvof", "levelset"}
        assert "implicit" in {c.momentum.viscosity for c in of_dim}
    for run in runs:
        assert math.prod(run.case.grid.cells) <= 4 * WARM_UP_CELLS
        # A level set alone is reinitialised within the run's steps.
        if run.case.levelset.method == "levelset":
            assert run.steps > run.case.levelset.reinit_every
        assert run.steps >= compile_ahead.MIN_STEPS


def test_a_large_case_file_is_compiled_on_a_small_copy_for_a_few_steps():
    sets = ["grid.nx=256", "grid.ny=256", "grid.nz=512"]
    (run,) = compile_ahead.plan(["cases/rising_bubble_3d.yaml"], sets)
    assert run.case.grid.cells == (32, 32, 64)
    assert math.prod(run.case.grid.cells) <= WARM_UP_CELLS
    # The end is the run's steps at the small copy's limits at rest.
    dt = min(dt for dt, _ in initial_dt_limits(run.case).values())
    assert run.case.time.end == pytest.approx(run.steps * dt, rel=1e-12)
    assert run.case.time.end < 0.5


def test_deflation_subdomains_follow_the_small_copy():
    sets = ["grid.nx=640", "grid.ny=1280"]
    (run,) = compile_ahead.plan(["cases/two_phase.yaml"], sets)
    assert run.case.grid.cells == (160, 320)
    d = run.case.solver.deflation
    counts = d.subdomain_counts(*run.case.grid.cells) if d.subdomains is None else d.subdomains
    assert all(n % p == 0 for n, p in zip(run.case.grid.cells, counts))


def test_a_pressure_case_is_refused_before_any_run(capsys):
    with pytest.raises(CaseError, match="mode"):
        compile_ahead.plan(["cases/bubbly_column.yaml"])
    assert main(["compile", "cases/bubbly_column.yaml"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "bubbly_column.yaml" in err


def test_an_unknown_case_or_override_is_one_line():
    proc = bubbleflow("compile", "no_such_case.yaml", timeout=120)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.splitlines()) == 1 and "no_such_case.yaml" in proc.stderr
    proc = bubbleflow("compile", "hysing", "--set", "grid.nx=-3", timeout=120)
    assert proc.returncode == 2 and "grid.nx" in proc.stderr and "Traceback" not in proc.stderr


def test_without_a_gpu_there_is_nothing_to_compile(monkeypatch, capsys):
    import bubbleflow.compute.backend as backend_module

    def unavailable(name):
        raise BackendUnavailable("no CUDA device")

    monkeypatch.setattr(backend_module, "get_backend", unavailable)
    assert main(["compile", "hysing"]) == 0
    out, _ = capsys.readouterr()
    assert "nothing to compile" in out and "no CUDA device" in out


def test_the_runs_write_only_to_a_temporary_folder_they_remove(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    monkeypatch.chdir(tmp_path)
    lines = []
    failed = compile_ahead.run_plan(compile_ahead.plan(["hysing"]), get_backend("numpy"),
                                    say=lines.append)
    assert failed == [] and len(lines) == 1 and lines[0].endswith("done")
    assert os.listdir(tmp_path) == []


def test_a_failing_run_is_said_and_the_others_still_run(monkeypatch):
    from bubbleflow.apps import run as run_module

    calls = []

    def run_case(case, backend, **kwargs):
        calls.append(case.name)
        if len(calls) == 1:
            raise FloatingPointError("the velocity is not finite\nat t = 0")
        return 0

    monkeypatch.setattr(run_module, "run_case", run_case)
    lines = []
    runs = compile_ahead.plan(["hysing", "rising3d"])
    failed = compile_ahead.run_plan(runs, get_backend("numpy"), say=lines.append)
    assert len(calls) == 2
    assert failed == [("hysing", "FloatingPointError: the velocity is not finite")]
    assert "failed: FloatingPointError" in lines[0] and lines[1].endswith("done")


def test_a_gpu_run_on_an_empty_kernel_cache_says_so(tmp_path, monkeypatch, capsys):
    from bubbleflow.apps.run import first_gpu_run_note, run_case
    from bubbleflow.compute import cuda

    class Device:
        on_device = True

    cache = tmp_path / "cache"
    monkeypatch.setenv("CUPY_CACHE_DIR", str(cache))
    assert cuda.cache_directory() == str(cache) and cuda.cache_is_empty()
    note = first_gpu_run_note(Device())
    assert str(cache) in note and "bubbleflow compile" in note
    cache.mkdir()
    assert first_gpu_run_note(Device()) is not None
    (cache / "kernel.cubin").write_bytes(b"")
    assert not cuda.cache_is_empty() and first_gpu_run_note(Device()) is None
    # A run on the host says nothing of it, whatever the cache.
    (cache / "kernel.cubin").unlink()
    numpy = get_backend("numpy")
    assert first_gpu_run_note(numpy) is None
    (run,) = compile_ahead.plan(["hysing"])
    assert run_case(run.case, numpy, outdir=str(tmp_path / "out"), progress=False) == 0
    assert "kernel cache" not in capsys.readouterr().out


@pytest.mark.gpu
@pytest.mark.parametrize("name, case", [("hysing", "cases/two_phase.yaml"),
                                        ("rising3d", "cases/rising_bubble_3d.yaml")])
def test_a_run_after_compile_compiles_nothing(name, case, tmp_path):
    env = {"CUPY_CACHE_DIR": str(tmp_path / "cache")}
    proc = bubbleflow("compile", name, env=env)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert str(tmp_path / "cache") in proc.stdout

    def cached():
        return sorted(os.listdir(tmp_path / "cache"))

    before = cached()
    assert before
    proc = bubbleflow("run", case, "-o", str(tmp_path / "out"), "--backend", "cupy",
                      "--set", "time.end=0.02", "--no-progress", env=env)
    assert proc.returncode == 0, proc.stderr
    assert cached() == before
