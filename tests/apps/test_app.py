"""The main job end to end: case file -> HDF5, and atomic output."""
import os
import subprocess
import sys

import h5py
import numpy as np
import pytest
import yaml

from bubbleflow.io.atomic import atomic_h5

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_cli(*args, cwd=ROOT):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "bubbleflow.apps.cli", *args], cwd=cwd, env=env,
                          capture_output=True, text=True, timeout=600)


@pytest.mark.parametrize("case", ["bubbly_column", "seed_two_phase"])
def test_shipped_case_runs_and_writes_the_documented_layout(case, tmp_path, backend):
    res = run_cli("run", f"cases/{case}.yaml", "-o", str(tmp_path), "--backend", backend.name,
                  "--set", "grid.nx=64", "--set", "grid.ny=64",
                  "--set", "solver.deflation.subdomains=[8,8]", "--set", "solver.deflation.stripes=8")
    assert res.returncode == 0, res.stderr
    path = tmp_path / f"{case}.h5"
    assert path.exists() and "converged" in res.stdout
    assert not [p for p in os.listdir(tmp_path) if p.endswith(".tmp")]
    with h5py.File(path, "r") as fh:
        for attr in ("bubbleflow_version", "case", "backend", "device", "precision", "face_density"):
            assert attr in fh.attrs
        assert fh.attrs["backend"] == backend.name
        resolved = yaml.safe_load(fh.attrs["case"])
        assert resolved["grid"]["nx"] == 64 and resolved["name"] == case
        x, y = fh["grid/x"][()], fh["grid/y"][()]
        assert x.shape == (64,) and y.shape == (64,)
        assert fh["fields/p"].shape == fh["fields/phi"].shape == fh["fields/rho"].shape == (64, 64)
        assert bool(fh["solver/converged"][0])
        assert fh["solver/reason"][0].decode() == "converged"
        assert fh["solver/residual"][0] <= 1e-8
        assert fh["solver/iterations"][0] == len(fh["solver/residual_history"]) - 1
        assert fh["solver/setup_seconds"][0] > 0 and fh["solver/solve_seconds"][0] > 0
        p = fh["fields/p"][()]
        rho = fh["fields/rho"][()]
    assert abs(p.mean()) < 1e-9 * abs(p).max()
    assert rho.min() == 1.0 and rho.max() == 1000.0
    # The stored pressure solves the system rebuilt from the stored fields.
    # The case solves reduced gravity's dynamic part p_d = p + rho g (y - y0)
    # (momentum.gravity): A p - f (the whole system) is, face by face, its
    # residual A p_d - f_d, which the solve took below rtol ||f_d||.
    from bubbleflow.flow.rest_projection import rest_rhs
    from bubbleflow.mesh.grid import Grid
    from bubbleflow.mesh.levelset import PhaseFields
    from bubbleflow.operators.poisson import PoissonOperator, gravity_rhs

    grid = Grid(64, 64)
    rho_x, rho_y = (rho[:, 1:] + rho[:, :-1]) / 2, (rho[1:, :] + rho[:-1, :]) / 2
    A = PoissonOperator(1.0 / rho_x, 1.0 / rho_y, grid.hx, grid.hy)
    f = gravity_rhs(grid, 9.81)
    f_d = rest_rhs(grid, PhaseFields(rho, rho_x, rho_y, rho, "arithmetic"), 9.81, "reduced",
                   rho.max(), rho.min(), resolved["geometry"]["free_surface"])
    assert np.linalg.norm(A @ p - f) <= 2e-8 * np.linalg.norm(f_d)


def test_column_without_bubbles_is_hydrostatic(tmp_path):
    res = run_cli("run", "cases/bubbly_column.yaml", "-o", str(tmp_path), "--backend", "numpy",
                  "--set", "grid.nx=32", "--set", "grid.ny=64", "--set", "geometry.bubble_lattice=null",
                  "--set", "name=still")
    assert res.returncode == 0, res.stderr
    with h5py.File(tmp_path / "still.h5", "r") as fh:
        p, y = fh["fields/p"][()], fh["grid/y"][()]
    liquid = y < 0.85 - 1 / 64
    dp = np.diff(p[liquid], axis=0)
    np.testing.assert_allclose(dp, -1000 * 9.81 / 64, rtol=1e-6)


def test_failed_solve_still_writes_and_exits_1(tmp_path):
    res = run_cli("run", "cases/bubbly_column.yaml", "-o", str(tmp_path), "--backend", "numpy",
                  "--set", "grid.nx=32", "--set", "grid.ny=32",
                  "--set", "solver.maxiter=3", "--set", "solver.check_every=1")
    assert res.returncode == 1
    err = res.stderr.strip().splitlines()
    assert len(err) == 1 and "maxiter" in err[0] and "3 iterations" in err[0] and "Traceback" not in res.stderr
    with h5py.File(tmp_path / "bubbly_column.h5", "r") as fh:
        assert not bool(fh["solver/converged"][0])
        assert fh["solver/reason"][0].decode() == "maxiter"
        assert fh["solver/iterations"][0] == 3
        assert fh["solver/residual"][0] > 1e-8


def test_atomic_output_keeps_old_file_on_error(tmp_path):
    path = tmp_path / "run.h5"
    with atomic_h5(path) as fh:
        fh["a"] = np.arange(3)
    with pytest.raises(RuntimeError):
        with atomic_h5(path) as fh:
            fh["b"] = np.arange(5)
            raise RuntimeError("interrupted")
    with h5py.File(path, "r") as fh:
        assert list(fh) == ["a"]
    assert os.listdir(tmp_path) == ["run.h5"]
