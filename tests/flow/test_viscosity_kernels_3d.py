"""The 3-D CUDA kernels of the implicit viscous path (flow.viscosity3_cuda,
flow.momentum3_cuda's implicit twins) against their array code
(flow.viscosity, flow.viscosity_chebyshev, flow.momentum).

Each CUDA variant registered on the twins is called directly (a silent
fall-back to the array code cannot pass for it) on one-process 3-D systems
of random viscosity (contrast 100) and face densities (contrast 1000) --
thin and non-cubic grids, non-cubic cells, every component, no-slip,
free-slip and mixed walls -- and compared with its reference run on the same
CuPy arrays: the couplings, a Chebyshev step, the sweep of the three
components (different step counts, one system alone, one taking none), the
residual, the momentum side's advection, right-hand sides and last touch to
the bit; the residual's norms to 1e-12 (sums in another order), its extremes
to the bit.  ``solve_implicit`` through the kernels takes NumPy's steps and
its solutions to 1e-12.  float32, a slab's systems, grids below the
stencil and strided work arrays are declined.  Each comparison prints its
largest difference (``pytest -rP`` shows them).
"""
import numpy as np
import pytest
from helpers.chebyshev import schedule_arrays
from helpers.twins import check_variant, variant

from bubbleflow.compute.comm import SingleProcess
from bubbleflow.flow import momentum, viscosity3_cuda
from bubbleflow.flow.slabs import SlabPadding
from bubbleflow.flow.viscosity import ViscousSystem, solve_implicit, viscous_coefficients
from bubbleflow.flow.viscosity_chebyshev import (chebyshev_step, chebyshev_sweep,
                                                 residual_scalars, viscous_residual)
from bubbleflow.mesh.ranks import rank_slab

pytestmark = pytest.mark.gpu

#: (nx, ny, nz) and the spacing: thin, non-cubic cells, larger.
GRIDS = [((3, 4, 5), (0.3, 0.07, 0.11)), ((2, 6, 3), (0.1, 0.1, 0.1)),
         ((9, 7, 12), (1 / 9, 0.2, 0.05)), ((24, 17, 20), (0.04, 0.05, 0.06))]
SIGNS = {"no-slip": ((-1.0, -1.0),) * 3, "free-slip": ((1.0, 1.0),) * 3,
         "mixed": ((-1.0, 1.0), (1.0, -1.0), (-1.0, 1.0))}
DT = 0.0137


def grid_id(g):
    return "x".join(str(n) for n in g[0])


def _inputs(cells, rng, stiff=False):
    """Host cell viscosity (contrast 100; two phases with ``stiff``) and the
    interior face densities of every component (contrast 1000)."""
    shape = cells[::-1]
    mu = (np.where(rng.random(shape) < 0.5, 10.0, 0.1) if stiff
          else 10.0 ** rng.uniform(-1.0, 1.0, shape))
    rho_faces = []
    for a in range(3):
        faces = list(shape)
        faces[2 - a] -= 1
        rho_faces.append(10.0 ** rng.uniform(0.0, 3.0, faces))
    return mu, rho_faces


def _systems(cp, grid, signs, rng, stiff=False):
    cells, spacing = grid
    mu, rho_faces = _inputs(cells, rng, stiff)
    return [ViscousSystem(a, cp.asarray(mu), cp.asarray(r), DT, spacing, signs)
            for a, r in enumerate(rho_faces)]


def _same(a, b, what):
    print(what, float(abs(a - b).max()) if a.size else 0.0)
    return bool((a == b).all())


@pytest.mark.parametrize("walls", list(SIGNS))
@pytest.mark.parametrize("grid", GRIDS, ids=grid_id)
def test_coefficients_kernel_is_the_array_code(cp, grid, walls):
    rng = np.random.default_rng(4)
    cells, spacing = grid
    mu, rho_faces = _inputs(cells, rng)
    for a, r in enumerate(rho_faces):
        host = (a, mu, r, DT, spacing, SIGNS[walls])
        args = (a, cp.asarray(mu), cp.asarray(r), DT, spacing, SIGNS[walls])
        got = variant(viscous_coefficients)(*args)
        assert got is not NotImplemented
        (couplings, ghosts, diag, inv) = got
        for ref in (viscous_coefficients.reference(*args), viscous_coefficients.reference(*host)):
            couplings_r, ghosts_r, diag_r, inv_r = ref
            assert ghosts == ghosts_r
            for pair, pair_r in zip(couplings, couplings_r):
                assert all(_same(cp.asnumpy(c), cp.asnumpy(c_r), f"coupling {a}")
                           for c, c_r in zip(pair, pair_r))
            assert _same(cp.asnumpy(diag), cp.asnumpy(diag_r), "diagonal")
            assert _same(cp.asnumpy(inv), cp.asnumpy(inv_r), "inverse")


@pytest.mark.parametrize("walls", list(SIGNS))
@pytest.mark.parametrize("grid", GRIDS, ids=grid_id)
def test_step_and_residual_kernels_are_the_array_code(cp, grid, walls):
    rng = np.random.default_rng(6)
    for S in _systems(cp, grid, SIGNS[walls], rng):
        n = S.shape[0]
        args = [cp.asarray(rng.standard_normal(n)) for _ in range(3)]
        ref = [a.copy() for a in args] + [cp.empty(n)]
        out = [a.copy() for a in args] + [cp.empty(n)]
        chebyshev_step.reference(S, *ref, 0.7, 1.3)
        assert variant(chebyshev_step)(S, *out, 0.7, 1.3) is not NotImplemented
        assert all(_same(a, b, "step") for a, b in zip(ref, out))
        rhs, x = args[0], args[1]
        assert _same(variant(viscous_residual)(S, rhs, x), viscous_residual.reference(S, rhs, x),
                     "residual")


@pytest.mark.parametrize("grid", GRIDS[::2], ids=grid_id)
def test_sweep_and_scalars_kernels_match_the_array_code(cp, cupy_backend, grid):
    """The three components' Chebyshev steps in one launch a step are the
    single-system steps to the bit; the residual's scalars match."""
    rng = np.random.default_rng(8)
    systems = _systems(cp, grid, SIGNS["mixed"], rng, stiff=True)
    schedules = [[(0.3 + 0.01 * k, 1.1 - 0.02 * k) for k in range(n)] for n in (7, 4, 5)]
    start = [[cp.asarray(rng.standard_normal(S.shape[0])) for _ in range(3)] for S in systems]
    ref = [[a.copy() for a in arrays] for arrays in start]
    out = [[a.copy() for a in arrays] for arrays in start]
    chebyshev_sweep.reference(systems, *zip(*ref), *schedule_arrays(cp, schedules))
    sweep = variant(chebyshev_sweep)
    assert sweep(systems, *zip(*out), *schedule_arrays(cp, schedules)) is not NotImplemented
    for a, b in zip(ref, out):
        assert _same(a[0], b[0], "x") and _same(a[1], b[1], "r")
    alone = [a.copy() for a in start[2]]
    assert sweep(systems[2:], *zip(alone), *schedule_arrays(cp, schedules[2:])) is not NotImplemented
    assert _same(alone[0], ref[2][0], "x alone") and _same(alone[1], ref[2][1], "r alone")
    idle = [[a.copy() for a in arrays] for arrays in start]
    assert sweep(systems, *zip(*idle), *schedule_arrays(cp, [[], schedules[1], []])) is not NotImplemented
    assert _same(idle[0][0], start[0][0], "idle") and _same(idle[1][0], ref[1][0], "busy")
    assert _same(idle[2][1], start[2][1], "idle r")
    scalars = variant(residual_scalars)
    for S, (rhs, x, _) in zip(systems, start):
        r_ref, sc_ref = residual_scalars.reference(S, rhs, x)
        r, sc = scalars(S, rhs, x)
        assert _same(r, r_ref, "scalars' residual")
        h = cupy_backend.to_host
        print("norms", h(sc)[:2] / h(sc_ref)[:2] - 1.0)
        np.testing.assert_allclose(h(sc)[:2], h(sc_ref)[:2], rtol=1e-12, atol=0)
        assert _same(sc[2:], sc_ref[2:], "extremes")


def test_residual_scalars_past_one_stride(cp, cupy_backend):
    """A grid of more cells than the first pass's threads (1,024 blocks of
    256: each thread walks several cells, its (k, j, i) carried from cell to
    cell): the residual the array code's bits, its scalars within 1e-12."""
    rng = np.random.default_rng(9)
    grid = ((70, 66, 62), (1 / 62, 1 / 66, 1 / 70))
    S = _systems(cp, grid, SIGNS["mixed"], rng, stiff=True)[2]
    assert S.shape[0] > 1024 * 256
    rhs, x = (cp.asarray(rng.standard_normal(S.shape[0])) for _ in range(2))
    r_ref, sc_ref = residual_scalars.reference(S, rhs, x)
    r, sc = variant(residual_scalars)(S, rhs, x)
    assert _same(r, r_ref, "residual")
    h = cupy_backend.to_host
    np.testing.assert_allclose(h(sc)[:2], h(sc_ref)[:2], rtol=1e-12, atol=0)
    assert _same(sc[2:], sc_ref[2:], "extremes")


@pytest.mark.parametrize("walls", ["no-slip", "mixed"])
@pytest.mark.parametrize("grid", GRIDS[1:], ids=grid_id)
def test_solves_through_the_kernels_are_numpys(cp, cupy_backend, monkeypatch, grid, walls):
    """``solve_implicit`` on CuPy (its sweep through the 3-D kernels)
    against NumPy's: the same steps, the solutions to 1e-12."""
    swept = []
    kernels_sweep = viscosity3_cuda.chebyshev_sweep

    def counted(*args):
        out = kernels_sweep(*args)
        swept.append(out is not NotImplemented)
        return out

    monkeypatch.setattr(viscosity3_cuda, "chebyshev_sweep", counted)
    rng = np.random.default_rng(11)
    cells, spacing = grid
    mu, rho_faces = _inputs(cells, rng, stiff=True)
    velocity, rhss = [], []
    for a, r in enumerate(rho_faces):
        shape = list(r.shape)
        shape[2 - a] += 2
        velocity.append(rng.standard_normal(shape))
        rhss.append(rng.standard_normal(r.shape) * r)
    args = (DT, spacing, SIGNS[walls], 1e-10)
    host = solve_implicit(velocity, mu, rho_faces, rhss, *args)
    dev = solve_implicit([cp.asarray(u) for u in velocity], cp.asarray(mu),
                         [cp.asarray(r) for r in rho_faces], [cp.asarray(f) for f in rhss], *args)
    assert swept == [True]
    for (x, rec), (y, rec_d) in zip(host, dev):
        assert rec.converged and rec_d.converged
        assert rec.engine == rec_d.engine
        assert rec.iterations == rec_d.iterations
        y = cupy_backend.to_host(y)
        print("solution", float(abs(x - y).max() / abs(x).max()))
        np.testing.assert_allclose(y, x, rtol=0, atol=1e-12 * abs(x).max())


def _momentum_inputs(grid, rng):
    """Host velocity, cell viscosity and Heaviside, face densities, advection
    and interface coefficients of a 3-D grid."""
    cells, _ = grid
    shape = cells[::-1]
    mu, rho_faces = _inputs(cells, rng)
    velocity, adv, coef = [], [], []
    for a, r in enumerate(rho_faces):
        faces = list(shape)
        faces[2 - a] += 1
        u = rng.standard_normal(faces)
        u[(slice(None),) * (2 - a) + ([0, -1],)] = 0.0
        velocity.append(u)
        adv.append(rng.standard_normal(r.shape))
        coef.append(rng.standard_normal(r.shape))
    H = rng.uniform(0.0, 1.0, shape)
    return tuple(velocity), mu, H, tuple(rho_faces), tuple(adv), tuple(coef)


def _run_planes(monkeypatch, planes):
    """Every BF_CELLS3_RUNS launch in runs of ``planes`` (None: as shipped)."""
    from bubbleflow.compute import cuda

    if planes is not None:
        monkeypatch.setattr(cuda, "MIN_BLOCKS_3D", 1)
        monkeypatch.setattr(cuda, "RUN_PLANES", planes)


@pytest.mark.parametrize("planes", [None, 3, 16], ids=lambda p: f"runs{p}")
@pytest.mark.parametrize("walls", list(SIGNS))
@pytest.mark.parametrize("grid", GRIDS, ids=grid_id)
def test_momentum_implicit_kernels_match_their_reference(cp, grid, walls, planes, monkeypatch):
    """The advection, the solves' right-hand sides and the implicit ``u*``
    (with and without interface forces, reduced or volumetric gravity);
    their threads in runs of a few planes, or of more than the grid has."""
    _run_planes(monkeypatch, planes)
    rng = np.random.default_rng(13)
    _, spacing = grid
    velocity, mu, H, faces, adv, coef = _momentum_inputs(grid, rng)
    signs = SIGNS[walls]
    xs = tuple(rng.standard_normal(r.size) for r in faces)
    reduced = momentum.ReducedGravity(9.81, 1.2, 1000.0)
    calls = [
        ("advection_terms", momentum.advection_terms, (velocity, faces, mu, spacing, signs)),
        ("implicit_rhs", momentum.implicit_rhs, (velocity, mu, faces, adv, DT, spacing)),
        ("implicit_velocity", momentum.implicit_velocity,
         (xs, velocity, H, faces, coef, DT, spacing, 9.81, None)),
        ("implicit_velocity-reduced", momentum.implicit_velocity,
         (xs, velocity, H, faces, coef, DT, spacing, 0.0, reduced)),
        ("implicit_velocity-reduced-no-forces", momentum.implicit_velocity,
         (xs, velocity, H, faces, None, DT, spacing, 0.0, reduced)),
        ("implicit_velocity-bare", momentum.implicit_velocity,
         (xs, velocity, H, faces, None, DT, spacing, 0.0, None)),
    ]
    for label, concept, args in calls:
        check_variant(walls, label, concept, args, cp, set(), 1e-12, same=np.array_equal)


def test_fallbacks(cp):
    """float32, a slab's systems, grids below the stencil and strided work
    arrays: the variants decline (the array code runs), except a slab's
    whole sweep, which runs the kernel on its planes and equals the array
    code; 2-D systems still reach the 2-D kernels."""
    rng = np.random.default_rng(2)
    cells, spacing = GRIDS[0]
    mu, rho_faces = _inputs(cells, rng)
    signs = SIGNS["no-slip"]
    coefficients = variant(viscous_coefficients)
    assert coefficients(0, cp.asarray(mu, dtype=cp.float32), cp.asarray(rho_faces[0]), DT,
                        spacing, signs) is NotImplemented
    assert coefficients(0, cp.asarray(mu), cp.asarray(rho_faces[0], dtype=cp.float32), DT,
                        spacing, signs) is NotImplemented
    thin, thin_faces = _inputs((4, 1, 5), rng)                  # one cell along y
    assert coefficients(0, cp.asarray(thin), cp.asarray(thin_faces[0]), DT, spacing,
                        signs) is NotImplemented
    padding = SlabPadding(SingleProcess(), rank_slab(mu.shape, 0, 1))
    assert coefficients(2, cp.asarray(mu), cp.asarray(rho_faces[2]), DT, spacing, signs,
                        padding) is NotImplemented
    slab = ViscousSystem(2, cp.asarray(mu), cp.asarray(rho_faces[2]), DT, spacing, signs,
                         padding, (0, rho_faces[2].shape[0]))
    S = ViscousSystem(1, cp.asarray(mu), cp.asarray(rho_faces[1]), DT, spacing, signs)
    for system, dtype, stride in [(slab, cp.float64, 1), (S, cp.float32, 1), (S, cp.float64, 2)]:
        n = system.shape[0]
        work = [cp.zeros(n * stride, dtype=dtype)[::stride] for _ in range(4)]
        assert variant(chebyshev_step)(system, *work, 0.5, 0.5) is NotImplemented
        assert variant(viscous_residual)(system, work[0], work[1]) is NotImplemented
        assert variant(residual_scalars)(system, work[0], work[1]) is NotImplemented
        if system is slab:
            continue
        assert variant(chebyshev_sweep)([system], [work[0]], [work[1]], [work[2]],
                                        *schedule_arrays(cp, [[(0.5, 0.5)]])) is NotImplemented
    n = slab.shape[0]
    start = [cp.asarray(rng.standard_normal(n)) for _ in range(3)]
    ref, out = [a.copy() for a in start], [a.copy() for a in start]
    schedule = [[(0.3 + 0.01 * k, 1.1 - 0.02 * k) for k in range(5)]]
    chebyshev_sweep.reference([slab], *([a] for a in ref), *schedule_arrays(cp, schedule))
    assert variant(chebyshev_sweep)([slab], *([a] for a in out), *schedule_arrays(cp, schedule)) is not NotImplemented
    for a, b in zip(ref[:2], out[:2]):
        assert float(abs(a - b).max()) <= 1e-13 * float(abs(a).max())
    velocity, mu3, H, faces, adv, coef = _momentum_inputs(GRIDS[0], rng)
    f32 = tuple(cp.asarray(u, dtype=cp.float32) for u in velocity)
    assert variant(momentum.implicit_rhs)(
        f32, cp.asarray(mu3), tuple(cp.asarray(r) for r in faces),
        tuple(cp.asarray(r) for r in adv), DT, spacing) is NotImplemented
    mu2 = cp.asarray(rng.uniform(0.1, 10.0, (6, 7)))
    plane = ViscousSystem(0, mu2, cp.asarray(rng.uniform(1.0, 1000.0, (6, 6))), DT, (0.1, 0.2),
                          ((-1.0, -1.0),) * 2)
    n = plane.shape[0]
    assert variant(viscous_residual)(plane, cp.ones(n), cp.ones(n)) is not NotImplemented
