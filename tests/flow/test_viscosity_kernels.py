"""The CUDA kernels of the implicit viscous solves (flow.viscosity_cuda)
against their array code (flow.viscosity, flow.viscosity_chebyshev).

Each CUDA variant registered on the n-D twins is called directly (so a
silent fall-back to the array code cannot pass for it) on one-process 2-D
systems of random viscosity and face densities, on non-square grids with
``hx != hy``, both components, every wall sign, and compared with its
reference run on the same CuPy arrays: the couplings, a Chebyshev step, the
sweep of both components (different step counts, one system alone, one
taking none) and the residual to the bit; the residual's norms to 1e-13
(sums in another order), its extremes to the bit.  A slab's system is
declined (the array code runs); the 3-D kernels have
``test_viscosity_kernels_3d.py``.  Each comparison prints its
largest difference (``pytest -rP`` shows them).
"""
import numpy as np
import pytest

from bubbleflow.compute.comm import SingleProcess
from bubbleflow.flow.slabs import SlabPadding
from bubbleflow.flow.viscosity_chebyshev import (chebyshev_step, chebyshev_sweep,
                                                 residual_scalars, viscous_residual)
from bubbleflow.flow.viscosity import ViscousSystem, solve_implicit, viscous_coefficients
from bubbleflow.mesh.ranks import rank_slab
from helpers.chebyshev import schedule_arrays

pytestmark = pytest.mark.gpu

SIGNS = [((-1.0, 1.0), (1.0, -1.0)), ((-1.0, -1.0), (-1.0, -1.0)), ((1.0, 1.0), (1.0, 1.0))]


def _inputs(cells, rng, stiff=False):
    """Host cell viscosity and the interior face densities of every component."""
    nd = len(cells)
    mu = (np.where(rng.random(cells[::-1]) < 0.5, 10.0, 0.1) if stiff
          else rng.uniform(0.1, 10.0, cells[::-1]))
    rho_faces = []
    for a in range(nd):
        shape = list(cells[::-1])
        shape[nd - 1 - a] -= 1
        rho_faces.append(rng.uniform(1.0, 1000.0, shape))
    return mu, rho_faces


def _systems(cp, cells, signs, rng, dt=0.02, stiff=False):
    mu, rho_faces = _inputs(cells, rng, stiff)
    spacing = (0.05, 0.04, 0.03)[:len(cells)]
    return [ViscousSystem(a, cp.asarray(mu), cp.asarray(r), dt, spacing, signs)
            for a, r in enumerate(rho_faces)]


def _same(a, b, what):
    print(what, float(abs(a - b).max()) if a.size else 0.0)
    return bool((a == b).all())


@pytest.mark.parametrize("signs", SIGNS)
@pytest.mark.parametrize("cells", [(13, 19), (31, 8), (2, 3)])
def test_coefficients_kernel_is_the_array_code(cp, cells, signs):
    rng = np.random.default_rng(4)
    mu, rho_faces = _inputs(cells, rng)
    variant = viscous_coefficients.variant("cupy")
    for a, r in enumerate(rho_faces):
        args = (a, cp.asarray(mu), cp.asarray(r), 0.02, (0.05, 0.04), signs)
        got, want = variant(*args), viscous_coefficients.reference(*args)
        assert got is not NotImplemented
        (couplings, ghosts, diag, inv), (couplings_r, ghosts_r, diag_r, inv_r) = got, want
        assert ghosts == ghosts_r
        for pair, pair_r in zip(couplings, couplings_r):
            assert all(_same(c, c_r, f"coupling {a}") for c, c_r in zip(pair, pair_r))
        assert _same(diag, diag_r, "diagonal") and _same(inv, inv_r, "inverse")


@pytest.mark.parametrize("signs", SIGNS)
def test_step_and_residual_kernels_are_the_array_code(cp, signs):
    rng = np.random.default_rng(6)
    for S in _systems(cp, (13, 19), signs, rng):
        n = S.shape[0]
        args = [cp.asarray(rng.standard_normal(n)) for _ in range(3)]
        ref = [a.copy() for a in args] + [cp.empty(n)]
        out = [a.copy() for a in args] + [cp.empty(n)]
        chebyshev_step.reference(S, *ref, 0.7, 1.3)
        assert chebyshev_step.variant("cupy")(S, *out, 0.7, 1.3) is not NotImplemented
        assert all(_same(a, b, "step") for a, b in zip(ref, out))
        rhs, x = args[0], args[1]
        assert _same(viscous_residual.variant("cupy")(S, rhs, x),
                     viscous_residual.reference(S, rhs, x), "residual")


def test_sweep_and_scalars_kernels_match_the_array_code(cp, cupy_backend):
    """Both components' Chebyshev steps in one launch a step are the
    single-system steps to the bit; the residual's scalars match."""
    rng = np.random.default_rng(8)
    systems = _systems(cp, (14, 21), SIGNS[0], rng, dt=0.01, stiff=True)
    schedules = [[(0.3 + 0.01 * k, 1.1 - 0.02 * k) for k in range(n)] for n in (7, 4)]
    start = [[cp.asarray(rng.standard_normal(S.shape[0])) for _ in range(3)] for S in systems]
    ref = [[a.copy() for a in arrays] for arrays in start]
    out = [[a.copy() for a in arrays] for arrays in start]
    chebyshev_sweep.reference(systems, *zip(*ref), *schedule_arrays(cp, schedules))
    sweep = chebyshev_sweep.variant("cupy")
    assert sweep(systems, *zip(*out), *schedule_arrays(cp, schedules)) is not NotImplemented
    for a, b in zip(ref, out):
        assert _same(a[0], b[0], "x") and _same(a[1], b[1], "r")
    alone = [a.copy() for a in start[1]]
    assert sweep(systems[1:], *zip(alone), *schedule_arrays(cp, schedules[1:])) is not NotImplemented
    assert _same(alone[0], ref[1][0], "x alone") and _same(alone[1], ref[1][1], "r alone")
    idle = [[a.copy() for a in arrays] for arrays in start]
    sweep(systems, *zip(*idle), *schedule_arrays(cp, [[], schedules[1]]))
    assert _same(idle[0][0], start[0][0], "idle") and _same(idle[1][0], ref[1][0], "busy")
    scalars = residual_scalars.variant("cupy")
    for S, (rhs, x, _) in zip(systems, start):
        r_ref, sc_ref = residual_scalars.reference(S, rhs, x)
        r, sc = scalars(S, rhs, x)
        assert _same(r, r_ref, "scalars' residual")
        h = cupy_backend.to_host
        np.testing.assert_allclose(h(sc), h(sc_ref), rtol=1e-13, atol=0)
        assert _same(sc[2:], sc_ref[2:], "extremes")


def test_slab_systems_are_declined(cp):
    rng = np.random.default_rng(2)
    mu2, rho2 = _inputs((6, 7), rng)
    padding = SlabPadding(SingleProcess(), rank_slab(mu2.shape, 0, 1))
    slab = ViscousSystem(1, cp.asarray(mu2), cp.asarray(rho2[1]), 0.1, (0.1, 0.2),
                         ((-1.0, -1.0),) * 2, padding, (0, rho2[1].shape[0]))
    n = slab.shape[0]
    work = [cp.zeros(n) for _ in range(4)]
    assert chebyshev_step.variant("cupy")(slab, *work, 0.5, 0.5) is NotImplemented
    assert viscous_residual.variant("cupy")(slab, work[0], work[1]) is NotImplemented
    assert residual_scalars.variant("cupy")(slab, work[0], work[1]) is NotImplemented
    assert viscous_coefficients.variant("cupy")(
        1, cp.asarray(mu2), cp.asarray(rho2[1]), 0.1, (0.1, 0.2), ((-1.0, -1.0),) * 2,
        padding) is NotImplemented


@pytest.mark.parametrize("cells", [(12, 9), (9, 8, 10)], ids=["2d", "3d"])
def test_slab_sweeps_replay_from_a_graph_and_equal_the_array_code(cp, cells):
    """A rank's slab systems (one rank here) swept again and again with the
    same step counts: the first sweep launched, the second captured into a
    CUDA graph and replayed, the next replayed, each equal to the array code
    on the same inputs; other step counts take a graph of their own."""
    from bubbleflow.flow import viscosity_cuda

    rng = np.random.default_rng(4)
    nd = len(cells)
    mu, rho_faces = _inputs(cells, rng)
    spacing, signs = (0.05, 0.04, 0.03)[:nd], SIGNS[0] + ((-1.0, -1.0),)
    comm = SingleProcess()
    systems = []
    for a, r in enumerate(rho_faces):
        padding = SlabPadding(comm, rank_slab(mu.shape, 0, 1))
        systems.append(ViscousSystem(a, cp.asarray(mu), cp.asarray(r), 0.02, spacing,
                                     signs[:nd], padding, (0, r.shape[0])))
    sweep = chebyshev_sweep.variant("cupy")

    def one(lengths):
        schedules = [[(0.3 + 0.01 * k, 1.1 - 0.02 * k) for k in range(n)] for n in lengths]
        start = [[cp.asarray(rng.standard_normal(S.shape[0])) for _ in range(3)] for S in systems]
        ref = [[a.copy() for a in arrays] for arrays in start]
        out = [[a.copy() for a in arrays] for arrays in start]
        chebyshev_sweep.reference(systems, *zip(*ref), *schedule_arrays(cp, schedules))
        assert sweep(systems, *zip(*out), *schedule_arrays(cp, schedules)) is not NotImplemented
        for a, b in zip(ref, out):
            for name, u, v in (("x", a[0], b[0]), ("r", a[1], b[1])):
                print(name, float(abs(u - v).max()))
                assert float(abs(u - v).max()) <= 1e-13 * float(abs(u).max()), name

    lengths = (7, 4, 5)[:nd]
    for _ in range(4):
        one(lengths)
    counts = viscosity_cuda._SLAB_GRAPHS[comm].counts
    assert counts == {"launched": 1, "captured": 1, "replayed": 3}, counts
    one((3,) * nd)
    one((3,) * nd)
    assert counts == {"launched": 2, "captured": 2, "replayed": 4}, counts
    graphs = viscosity_cuda._SLAB_GRAPHS[comm]
    for n in (4, 5, 6):                 # past GRAPHS_KEPT: the oldest step counts go
        one((n,) * nd)
    assert len(graphs._entries) == 4 and (7, 4, 5)[:nd] not in graphs._entries
    one(lengths)                        # launched again, its graph gone
    assert counts["launched"] == 6, counts


@pytest.mark.parametrize("cells", [(16, 24), (5, 6, 7)], ids=["2d", "3d"])
def test_solves_on_the_gpu_are_numpys(cp, cupy_backend, cells):
    """The solves through the kernels (2-D and 3-D) against NumPy's: the
    same steps, the solutions to 1e-12."""
    rng = np.random.default_rng(11)
    nd = len(cells)
    mu, rho_faces = _inputs(cells, rng, stiff=True)
    velocity, rhss = [], []
    for a, r in enumerate(rho_faces):
        shape = list(r.shape)
        shape[nd - 1 - a] += 2
        velocity.append(rng.standard_normal(shape))
        rhss.append(rng.standard_normal(r.shape) * r)
    spacing, signs = tuple(1 / n for n in cells), SIGNS[0] + ((-1.0, -1.0),)
    host = solve_implicit(velocity, mu, rho_faces, rhss, 0.01, spacing, signs[:nd], 1e-10)
    dev = solve_implicit([cp.asarray(u) for u in velocity], cp.asarray(mu),
                         [cp.asarray(r) for r in rho_faces], [cp.asarray(f) for f in rhss], 0.01,
                         spacing, signs[:nd], 1e-10)
    for (x, rec), (y, rec_d) in zip(host, dev):
        assert rec.converged and rec_d.converged
        assert abs(rec.iterations - rec_d.iterations) <= 1
        y = cupy_backend.to_host(y)
        print("solution", float(abs(x - y).max() / abs(x).max()))
        np.testing.assert_allclose(y, x, rtol=0, atol=1e-12 * abs(x).max())
