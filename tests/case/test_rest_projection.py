"""A pressure case's system in either form of gravity: the dynamic part of
reduced gravity plus its hydrostatic part is the whole pressure of the
volumetric form (SciPy's direct solves, 2-D and 3-D, every face-density
rule, with and without a free surface); on a rank's planes the system is
the whole grid's; and the reduced form reaches a tolerance the whole
pressure's rounding floor stops above."""
import os

import numpy as np
import pytest
from scipy.sparse.linalg import spsolve

from bubbleflow.case.config import load_case
from bubbleflow.case.problem import build_pressure_problem
from bubbleflow.compute.backend import get_backend

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _problem(name, form, *overrides, planes=None):
    case = load_case(os.path.join(ROOT, "cases", name),
                     [f"momentum.gravity={form}", *overrides])
    return build_pressure_problem(case, get_backend("numpy"), planes=planes)


def _direct(prob):
    """The whole pressure of a direct solve (grounded at one cell), mean removed."""
    A = prob.A.to_scipy().tocsr()
    x = np.zeros(A.shape[0])
    x[1:] = spsolve(A[1:, 1:].tocsc(), np.ravel(prob.rhs)[1:])
    p = np.ravel(prob.whole_pressure(x.reshape(prob.rhs.shape)))
    return p - p.mean()


@pytest.mark.parametrize("name, grid", [
    ("bubbly_column.yaml", ["grid.nx=32", "grid.ny=32"]),
    ("bubbly_column_3d.yaml", ["grid.nx=12", "grid.ny=12", "grid.nz=12"])])
@pytest.mark.parametrize("rule", ["arithmetic", "harmonic", "levelset"])
@pytest.mark.parametrize("surface", ["case", "none"])
def test_the_dynamic_part_and_its_hydrostatic_part_are_the_whole_pressure(name, grid, rule,
                                                                         surface):
    more = grid + [f"operator.face_density={rule}", "fluids.gas.density=1.0"]
    if surface == "none":
        more.append("geometry.free_surface=null")
    whole, reduced = (_problem(name, form, *more) for form in ("volumetric", "reduced"))
    assert whole.hydrostatic is None and reduced.hydrostatic is not None
    # The reduced system is another one (its right-hand side is the
    # interface's) with the same answer.
    assert np.abs(reduced.rhs - whole.rhs).max() > 1e-3 * np.abs(whole.rhs).max()
    want, got = _direct(whole), _direct(reduced)
    assert np.abs(got - want).max() <= 1e-9 * np.abs(want).max()


def test_without_gas_the_answer_is_the_hydrostatic_part_alone():
    prob = _problem("bubbly_column.yaml", "reduced", "grid.nx=16", "grid.ny=16",
                    "geometry.free_surface=null", "geometry.bubble_lattice=null")
    assert np.abs(prob.rhs).max() == 0.0
    p = prob.whole_pressure(np.zeros(prob.rhs.shape))
    depth = 0.5 - np.asarray(prob.grid.centres[-1])          # below the mid-height
    assert np.allclose(p - p.mean(), (1000.0 * 9.81 * depth)[:, None] * np.ones((1, 16)))


@pytest.mark.parametrize("form", ["volumetric", "reduced"])
def test_a_ranks_planes_hold_the_whole_grids_system(form):
    """The inner planes of a rank's widened slab (its ghost planes border a
    plane not given) have the whole grid's right-hand side and hydrostatic part."""
    more = ["grid.nx=24", "grid.ny=32"]
    whole = _problem("bubbly_column.yaml", form, *more)
    for lo, hi in ((0, 17), (7, 25), (15, 32)):
        part = _problem("bubbly_column.yaml", form, *more, planes=(lo, hi))
        inner = slice(0 if lo == 0 else 1, (hi - lo) if hi == 32 else (hi - lo - 1))
        rows = slice(lo + inner.start, lo + inner.stop)
        assert np.array_equal(part.rhs[inner], whole.rhs[rows])
        if form == "reduced":
            assert np.array_equal(part.hydrostatic[inner], whole.hydrostatic[rows])


def test_the_dynamic_part_converges_where_the_whole_pressure_meets_its_floor(tmp_path):
    """The bubbly column at 512^2 and contrast 1e5 with the case's multigrid
    PCG and rtol 1e-8: the whole pressure stops at float64's floor above
    the tolerance, the dynamic part converges, and the two whole pressures
    agree to what the floor allows."""
    from bubbleflow.linalg.solver import PressureSolver

    answers = {}
    for form in ("volumetric", "reduced"):
        case = load_case(os.path.join(ROOT, "cases", "bubbly_column.yaml"),
                         [f"momentum.gravity={form}", "grid.nx=512", "grid.ny=512",
                          "fluids.gas.density=1e-2"])
        prob = build_pressure_problem(case, get_backend("numpy"))
        solver = PressureSolver.from_config(prob.A, case.solver, phi=prob.phi)
        x, record = solver.solve(prob.rhs)
        p = np.ravel(prob.whole_pressure(x))
        answers[form] = (record, p - p.mean())
    whole, reduced = answers["volumetric"], answers["reduced"]
    assert not whole[0].converged and whole[0].reason == "stagnation", whole[0]
    assert reduced[0].converged and reduced[0].residual <= 1e-8, reduced[0]
    assert np.abs(reduced[1] - whole[1]).max() <= 1e-6 * np.abs(whole[1]).max()


@pytest.mark.gpu
@pytest.mark.parametrize("name, grid", [
    ("bubbly_column.yaml", ["grid.nx=48", "grid.ny=40"]),
    ("bubbly_column_3d.yaml", ["grid.nx=12", "grid.ny=12", "grid.nz=16"])])
def test_the_system_on_the_gpu_is_numpys(cupy_backend, name, grid):
    """The right-hand side and the hydrostatic part built on CuPy (its
    kernels where they apply) are NumPy's."""
    backend = cupy_backend
    case = load_case(os.path.join(ROOT, "cases", name), grid)
    want = build_pressure_problem(case, get_backend("numpy"))
    got = build_pressure_problem(case, backend)
    for a, b in ((got.rhs, want.rhs), (got.hydrostatic, want.hydrostatic)):
        a = backend.to_host(a)
        assert np.allclose(a, b, rtol=1e-13, atol=1e-13 * np.abs(b).max())
