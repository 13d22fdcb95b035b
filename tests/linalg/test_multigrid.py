"""The multigrid preconditioner (linalg.precond.multigrid): its Galerkin
hierarchy against SciPy's P^T A P, its symmetry, and CG with it at high
density contrast, against a direct solve."""
import numpy as np
import pytest
import scipy.sparse as sp
import scipy.sparse.linalg as spla

from bubbleflow.linalg.precond import make_preconditioner
from bubbleflow.linalg.precond.multigrid import (COARSE_MOVE_CELLS, COARSE_MOVE_FRACTION,
                                                Multigrid, auto_w_levels, coarsen_couplings,
                                                level_shapes, prolong, restrict)
from bubbleflow.linalg.solver import PressureSolver
from bubbleflow.case.problem import bubbly_column
from bubbleflow.operators.poisson import PoissonOperator, apply_faces
from helpers.operators import bubbly_operator


def piecewise_constant_P(shape):
    """The prolongation of 2-per-axis aggregation as a SciPy matrix (C order)."""
    coarse = tuple((n + 1) // 2 for n in shape)
    fine_index = np.indices(shape).reshape(len(shape), -1)
    cols = np.ravel_multi_index(tuple(i // 2 for i in fine_index), coarse)
    n = int(np.prod(shape))
    return sp.csr_matrix((np.ones(n), (np.arange(n), cols)), shape=(n, int(np.prod(coarse))))


def laplacian_from_couplings(couplings, shape):
    """The flux-form operator of the couplings as a SciPy matrix (independent assembly)."""
    n = int(np.prod(shape))
    index = np.arange(n).reshape(shape)
    A = sp.lil_matrix((n, n))
    ndim = len(shape)
    for axis, c in enumerate(couplings):
        a = ndim - 1 - axis
        lo = [slice(None)] * ndim
        hi = [slice(None)] * ndim
        lo[a], hi[a] = slice(None, -1), slice(1, None)
        for p, q, w in zip(index[tuple(lo)].ravel(), index[tuple(hi)].ravel(), c.ravel()):
            A[p, p] += w
            A[q, q] += w
            A[p, q] -= w
            A[q, p] -= w
    return A.tocsr()


@pytest.mark.parametrize("shape", [(6, 8), (7, 5), (9, 9), (4, 5, 7)])
def test_coarse_couplings_are_galerkin(shape):
    """P^T A P from the summed couplings equals SciPy's product, odd sizes and 3-D too."""
    rng = np.random.default_rng(3)
    ndim = len(shape)
    couplings = []
    for axis in range(ndim):
        s = list(shape)
        s[ndim - 1 - axis] -= 1
        couplings.append(10.0 ** rng.uniform(-6, 0, size=s))
    A = laplacian_from_couplings(couplings, shape)
    P = piecewise_constant_P(shape)
    coarse = tuple((n + 1) // 2 for n in shape)
    Ac = laplacian_from_couplings(coarsen_couplings(couplings, np), coarse)
    # (A coarse diagonal is the fine block's sum, whose inner couplings cancel
    # to rounding: the absolute tolerance is relative to the largest entry.)
    np.testing.assert_allclose((P.T @ A @ P).toarray(), Ac.toarray(), rtol=1e-13,
                               atol=1e-14 * abs(Ac).max())
    # Restriction and prolongation are P^T and P.
    r, xc = rng.standard_normal(shape), rng.standard_normal(coarse)
    np.testing.assert_allclose(restrict(r, np).ravel(), P.T @ r.ravel(), rtol=1e-13)
    np.testing.assert_array_equal(prolong(xc, shape, np).ravel(), P @ xc.ravel())


@pytest.mark.parametrize("precision, tol", [("float64", 1e-11), ("float32", 1e-5)])
@pytest.mark.parametrize("contrast", [1.0, 1e6])
def test_cycle_is_symmetric_and_positive(contrast, precision, tol, backend):
    A = bubbly_operator(48, contrast, backend, ny=40)
    M = Multigrid(A, cycle_precision=precision)
    xp = backend.xp
    rng = np.random.default_rng(0)
    x, y = (rng.standard_normal(48 * 40) for _ in range(2))
    x -= x.mean()
    y -= y.mean()
    Mx = backend.to_host(M.apply(xp.asarray(x)))
    My = backend.to_host(M.apply(xp.asarray(y)))
    assert abs(x @ My - y @ Mx) <= tol * np.linalg.norm(x) * np.linalg.norm(Mx)
    assert x @ Mx > 0 and y @ My > 0
    assert [lv.shape for lv in M.levels] == [(40, 48), (20, 24)]    # 480 <= 512 cells


@pytest.mark.parametrize("contrast", [1.0, 1e3, 1e6])
def test_cg_with_multigrid_solves_the_system(contrast, backend):
    """CG + multigrid at 128^2: few iterations whatever the contrast, and the
    direct solve's answer."""
    n = 128
    A = bubbly_operator(n, contrast, backend)
    # (At contrast 1e6 the float64 floor of this system is near 1e-8.)
    rtol = 1e-10 if contrast < 1e6 else 1e-8
    solver = PressureSolver(A, method="pcg", preconditioner="multigrid", deflation="none",
                            rtol=rtol)
    rng = np.random.default_rng(1)
    b = rng.standard_normal(n * n)
    b -= b.mean()
    x, rec = solver.solve(backend.xp.asarray(b))
    assert rec.converged
    print(f"contrast {contrast:g}: {rec.iterations} iterations")
    assert rec.iterations <= 25                       # measured 13, 17, 18
    # The pinned direct solve, gauged to zero mean.
    K = A.to_scipy().tolil()
    K[0, :] = 0.0
    K[0, 0] = 1.0
    rhs = b.copy()
    rhs[0] = 0.0
    ref = spla.spsolve(K.tocsc(), rhs)
    ref -= ref.mean()
    got = backend.to_host(x).ravel()
    got -= got.mean()
    err = np.linalg.norm(got - ref) / np.linalg.norm(ref)
    print(f"relative error against the direct solve {err:.1e}")
    assert err <= 1e-6


def test_a_float32_cycle_inside_float64_cg(backend):
    """The cycle in float32 (half the bytes): CG in float64 still reaches
    rtol 1e-9 at contrast 1e3, in about the float64 cycle's iterations."""
    n = 128
    A = bubbly_operator(n, 1e3, backend)
    b = np.random.default_rng(5).standard_normal(n * n)
    b -= b.mean()
    its = {}
    for precision in ("float64", "float32"):
        solver = PressureSolver(A, method="pcg", preconditioner="multigrid", deflation="none",
                                rtol=1e-9, preconditioner_options={"cycle_precision": precision})
        assert solver.M.levels[1].couplings[0].dtype == np.dtype(precision)
        x, rec = solver.solve(backend.xp.asarray(b))
        assert rec.converged and x.dtype == np.float64
        its[precision] = rec.iterations
    print(its)
    assert its["float32"] <= its["float64"] + 3


def test_w_levels_cut_the_iterations(backend):
    """Two coarse visits on the top two levels: fewer iterations than the
    V-cycle (measured 15 -> 11 here; 17-19 -> 10-11 on the bubbly column at
    512^2-2048^2)."""
    n = 256
    A = bubbly_operator(n, 1e3, backend)
    b = np.random.default_rng(6).standard_normal(n * n)
    b -= b.mean()
    its = {}
    for w in (0, 2):
        solver = PressureSolver(A, method="pcg", preconditioner="multigrid", deflation="none",
                                rtol=1e-8, preconditioner_options={"w_levels": w})
        _, rec = solver.solve(backend.xp.asarray(b))
        assert rec.converged
        its[w] = rec.iterations
    print(its)
    assert its[2] <= 0.8 * its[0]


def test_deflated_cg_takes_it_too(backend):
    """DPCG with the level-set subdomain deflation and multigrid: converged,
    in fewer iterations than the default preconditioner."""
    n = 128
    A = bubbly_operator(n, 1e3, backend)
    h = 1.0 / n
    X, Y = np.meshgrid((np.arange(n) + 0.5) * h, (np.arange(n) + 0.5) * h)
    phi = backend.xp.asarray(0.8 - Y)
    b = np.random.default_rng(2).standard_normal(n * n)
    b -= b.mean()
    its = {}
    for name in ("multigrid", "incomplete_poisson_scaled"):
        solver = PressureSolver(A, method="dpcg", preconditioner=name, phi=phi, rtol=1e-8)
        _, rec = solver.solve(backend.xp.asarray(b))
        assert rec.converged
        its[name] = rec.iterations
    print(its)
    assert its["multigrid"] * 3 < its["incomplete_poisson_scaled"]


def test_options_are_checked_and_passed():
    A = bubbly_operator(16, 10.0, "numpy")
    M = make_preconditioner("multigrid", A, degree=3, scale=1.5, coarsest=16, min_side=1)
    assert (M.degree, M.scale) == (3, 1.5) and M.levels[-1].shape == (4, 4)
    # The default min_side keeps the 16 x 16 grid whole (its levels would be narrower).
    assert make_preconditioner("multigrid", A, coarsest=16).levels[-1].shape == (16, 16)
    for bad in ({"degree": 0}, {"ratio": 1.0}, {"scale": 2.0}, {"cycle_precision": "float16"},
                {"w_levels": -1}, {"w_levels": "W"}, {"w_levels": True}, {"min_side": 0},
                {"coarsest": 0}):
        with pytest.raises(ValueError, match="multigrid"):
            make_preconditioner("multigrid", A, **bad)
    with pytest.raises(ValueError, match="no option"):
        make_preconditioner("multigrid", A, block_lines=2)


def test_a_level_of_one_cell_and_the_apply_of_its_operator():
    """A 1 x 1 grid: the coarsest level is the whole grid, its inverse a number."""
    A = PoissonOperator(np.zeros((1, 0)), np.zeros((0, 1)), 1.0, 1.0)
    M = Multigrid(A)
    assert len(M.levels) == 1
    assert np.isfinite(M.apply(np.ones(1))).all()
    y = apply_faces((np.ones((2, 2)), np.ones((1, 3))), np.arange(6.0).reshape(2, 3), np.zeros((2, 3)))
    assert y.sum() == pytest.approx(0.0)


def test_refresh_takes_a_new_operator_in_place(backend):
    """``refresh`` rewrites the hierarchy in place (the cycle's buffers and
    graph stay) and gives what a new instance gives, bit for bit, where the
    coarsest inverse is recomputed at every refresh; another grid is
    refused.  A solver's update after ``renew`` keeps its refreshed
    preconditioner and solves as a new solver does."""
    xp = backend.xp
    A1, A2 = bubbly_operator(64, 1e3, backend, seed=1), bubbly_operator(64, 1e6, backend, seed=2)
    r = np.random.default_rng(7).standard_normal(64 * 64)
    r = xp.asarray(r - r.mean())
    M = Multigrid(A1, coarsest=64, min_side=1, w_levels=1, coarse_refresh=1)
    first = backend.to_host(M.apply(r))
    arrays = [id(c) for lv in M.levels for c in lv.couplings]
    runner = M.runner
    assert M.refresh(A2)
    assert [id(c) for lv in M.levels for c in lv.couplings] == arrays and M.runner is runner
    got = backend.to_host(M.apply(r))
    assert np.array_equal(got, backend.to_host(Multigrid(A2, coarsest=64, min_side=1, w_levels=1).apply(r)))
    assert not np.array_equal(got, first)
    assert not M.refresh(bubbly_operator(32, 1e3, backend))

    solver = PressureSolver(A1, method="pcg", preconditioner="multigrid", deflation="none")
    kept = solver.M
    solver.renew()
    solver.update(A2)
    assert solver.M is kept
    x, rec = solver.solve(r)
    x_new, rec_new = PressureSolver(A2, method="pcg", preconditioner="multigrid",
                                    deflation="none").solve(r)
    assert rec.converged and rec.iterations == rec_new.iterations
    assert np.array_equal(backend.to_host(x), backend.to_host(x_new))


@pytest.mark.gpu
@pytest.mark.parametrize("storage", ["diagonals", "matrix_free"])
def test_refreshes_from_operators_replayed_are_new_hierarchies(storage, cp):
    """Refreshes from operators on a GPU (the couplings taken from the
    operator's arrays and the levels written in one replayed graph, the
    coarsest inverse in another) give, refresh after refresh, what a new
    hierarchy of each operator gives, bit for bit."""
    from bubbleflow.compute.backend import get_backend

    backend = get_backend("cupy")
    ops = [bubbly_operator(48, 10.0 ** (3 + k % 3), backend, seed=k) for k in range(5)]
    if storage == "matrix_free":
        ops = [PoissonOperator.from_faces(A.couplings(), A.grid,
                                          backend=backend, storage=storage) for A in ops]
    r = np.random.default_rng(3).standard_normal(48 * 48)
    r = cp.asarray(r - r.mean())
    M = Multigrid(ops[0], coarsest=64, min_side=1, w_levels=1, coarse_refresh=1)
    for A in ops[1:]:
        assert M.refresh(A)
        new = Multigrid(A, coarsest=64, min_side=1, w_levels=1)
        assert cp.array_equal(M.apply(r), new.apply(r))
    assert M.replays.counts["replayed"] == len(ops) - 2     # (the first refresh launched)


def moved_bubble_operator(n, contrast, backend, shift):
    """A bubble of radius 0.15 risen ``shift`` cells from (0.5, 0.3) in
    liquid ``contrast`` times denser, its density smoothed over 1.5 cells
    either side as a flow's is, arithmetic face densities."""
    h = 1.0 / n
    X, Y = np.meshgrid((np.arange(n) + 0.5) * h, (np.arange(n) + 0.5) * h)
    phi = (np.hypot(X - 0.5, Y - 0.3 - shift * h) - 0.15) / (1.5 * h)
    H = np.clip(0.5 * (1 + phi + np.sin(np.pi * phi) / np.pi), 0.0, 1.0)
    rho = 1.0 + (contrast - 1.0) * H
    rx, ry = 0.5 * (rho[:, 1:] + rho[:, :-1]), 0.5 * (rho[1:, :] + rho[:-1, :])
    return PoissonOperator(1.0 / rx, 1.0 / ry, h, h, backend=backend)


def test_the_coarsest_inverse_is_recomputed_on_its_schedule(backend):
    """The coarsest inverse: with ``coarse_refresh=3`` kept for two
    refreshes (the levels above it refreshed), recomputed at the third;
    with ``"auto"`` recomputed at every refresh nobody tells the motion
    of, kept while the motion told adds up to less than half a cell and
    for at most 16 refreshes; recomputed at the first refresh after
    ``renew`` and after a solve that took clearly more iterations than the
    first with it; a hierarchy of one level recomputes it at every
    refresh; bad values are one clear line."""
    ops = [moved_bubble_operator(64, 1e3, backend, s) for s in range(4)]

    def fresh(A):
        return backend.to_host(Multigrid(A, coarse_refresh=1).coarse_inverse)

    def inverse(M):
        return backend.to_host(M.coarse_inverse).copy()

    M = Multigrid(ops[0], coarse_refresh=3)
    built = inverse(M)
    above = backend.to_host(M.levels[1].couplings[0]).copy()
    for k in (1, 2):
        M.refresh(ops[k])
        assert np.array_equal(inverse(M), built)
    assert not np.array_equal(backend.to_host(M.levels[1].couplings[0]), above)
    M.refresh(ops[3])
    assert np.array_equal(inverse(M), fresh(ops[3]))
    M.renew()
    M.refresh(ops[0])
    assert np.array_equal(inverse(M), fresh(ops[0]))

    M = Multigrid(ops[0])
    M.refresh(ops[1])                               # nobody told: recomputed
    assert np.array_equal(inverse(M), fresh(ops[1]))
    for k in (2, 3):
        M.interface_moved(0.2)                      # 0.2, then 0.4 cells: kept
        M.refresh(ops[k])
        assert np.array_equal(inverse(M), fresh(ops[1]))
    M.interface_moved(0.2)                          # 0.6: recomputed
    M.refresh(ops[0])
    assert np.array_equal(inverse(M), fresh(ops[0]))
    for k in range(15):
        M.interface_moved(0.0)
        M.refresh(ops[1 + k % 3])
    assert np.array_equal(inverse(M), fresh(ops[0]))
    M.interface_moved(0.0)                          # the 16th refresh
    M.refresh(ops[1])
    assert np.array_equal(inverse(M), fresh(ops[1]))
    M.solved(10)
    M.solved(12)                        # within two of the first: kept
    M.interface_moved(0.0)
    M.refresh(ops[2])
    assert np.array_equal(inverse(M), fresh(ops[1]))
    M.solved(13)                        # three more than the first: recomputed
    M.interface_moved(0.0)
    M.refresh(ops[2])
    assert np.array_equal(inverse(M), fresh(ops[2]))
    small = [moved_bubble_operator(16, 1e3, backend, s) for s in (0, 1)]
    one = Multigrid(small[0])                       # one level: the operator's inverse
    assert len(one.levels) == 1
    one.interface_moved(0.0)
    one.refresh(small[1])
    assert np.array_equal(inverse(one), fresh(small[1]))
    for bad in (0, -2, 1.5, "often", True):
        with pytest.raises(ValueError, match="coarse_refresh"):
            Multigrid(ops[0], coarse_refresh=bad)


def along_the_path(solver, n, contrast, move, updates, backend, rng):
    """``solver`` updated along a bubble's path on ``n``^2 (``move`` cells an
    update, told the motion), a random right-hand side of zero mean solved
    at each update by it and by a new solver: per update ``(step, its
    record, the new solver's, its coarsest inverse on the host)``."""
    xp = backend.xp
    for step in range(1, updates + 1):
        A = moved_bubble_operator(n, contrast, backend, move * step)
        r = rng.standard_normal(n * n)
        r = xp.asarray(r - r.mean())
        solver.interface_moved(move)
        _, rec = solver.update(A).solve(r)
        _, rec_new = PressureSolver(A, method="pcg", preconditioner="multigrid",
                                    deflation="none", rtol=1e-8).solve(r)
        yield step, rec, rec_new, backend.to_host(solver.M.coarse_inverse)


def test_a_kept_coarsest_inverse_still_solves_to_the_tolerance(backend):
    """A solver updated along a bubble's path (a tenth of a cell an
    update), told the motion, meets the tolerance at every solve.  At
    contrast 1e3 it keeps its coarsest inverse for five updates at a time
    and takes at most two iterations more than a new solver at each; at
    1e6 a solve can take more (a gas cell's coupling changes by a large
    factor where the interface's smoothed edge enters it) and renews the
    inverse, and the solves take at most 15 % more in all."""
    rng = np.random.default_rng(3)
    for contrast in (1e3, 1e6):
        solver = PressureSolver(moved_bubble_operator(64, contrast, backend, 0), method="pcg",
                                preconditioner="multigrid", deflation="none", rtol=1e-8)
        inverses = {float(backend.to_host(solver.M.coarse_inverse).sum())}
        kept = new = 0
        for step, rec, rec_new, inverse in along_the_path(solver, 64, contrast, 0.1, 20,
                                                          backend, rng):
            inverses.add(float(inverse.sum()))
            assert rec.converged and rec.residual <= 1e-8, (contrast, step, rec.residual)
            kept, new = kept + rec.iterations, new + rec_new.iterations
            if contrast == 1e3:
                assert rec.iterations <= rec_new.iterations + 2, (step, rec.iterations,
                                                                  rec_new.iterations)
        print(contrast, "iterations kept / new", kept, new, "inverses", len(inverses))
        assert kept <= 1.15 * new
        if contrast == 1e3:
            assert len(inverses) == 5, inverses     # the first, at steps 5, 10, 15 and 20


def test_a_deep_hierarchy_keeps_its_coarsest_inverse_for_an_eighth_of_a_coarsest_cell(backend):
    """``coarse_refresh="auto"`` keeps the coarsest inverse while the
    interface moves less than an eighth of a coarsest cell, and at least
    half a finest one: on 64^2 (coarsest 16^2, 4 finest cells across) half
    a cell, on 256^2 (16 across) two cells, on a gathered part two levels
    below 64^2 two cells.  Along a bubble's path on 256^2 (a quarter of a
    cell an update) it keeps the inverse for eight updates at a time, meets
    the tolerance at every solve and takes at most two iterations more than
    a new solver at each."""
    small = Multigrid(moved_bubble_operator(64, 1e3, backend, 0))
    assert small.coarse_move_limit == max(COARSE_MOVE_CELLS, 4 * COARSE_MOVE_FRACTION) == 0.5
    part = Multigrid.from_couplings(small.levels[0].couplings, (64, 64), levels_above=2)
    assert part.coarse_move_limit == 16 * COARSE_MOVE_FRACTION == 2.0
    rng = np.random.default_rng(5)
    solver = PressureSolver(moved_bubble_operator(256, 1e3, backend, 0), method="pcg",
                            preconditioner="multigrid", deflation="none", rtol=1e-8)
    assert solver.M.coarse_move_limit == 16 * COARSE_MOVE_FRACTION == 2.0
    inverses = [backend.to_host(solver.M.coarse_inverse).copy()]
    for step, rec, rec_new, inverse in along_the_path(solver, 256, 1e3, 0.25, 16, backend,
                                                      rng):
        assert rec.converged and rec.residual <= 1e-8, (step, rec.residual)
        assert rec.iterations <= rec_new.iterations + 2, (step, rec.iterations,
                                                          rec_new.iterations)
        if not np.array_equal(inverse, inverses[-1]):
            inverses.append(inverse.copy())
            assert step % 8 == 0, step          # recomputed at 2 and 4 cells only
    assert len(inverses) == 3


def test_the_bytes_model_follows_the_options():
    """``bytes_per_apply``: on a 4 x 4 grid over a 2 x 2 coarsest level,
    down moves the couplings (2 x 12 faces), b, x (16 each) and the coarse
    b (4); up the same and its result (16); the coarsest its 4 x 4 inverse
    and two vectors.  A float32 cycle halves the levels' own bytes, W levels add."""
    A = bubbly_operator(4, 10.0, "numpy")
    M = Multigrid(A, coarsest=4, min_side=1, cycle_precision="float64", w_levels=0)
    assert [lv.shape for lv in M.levels] == [(4, 4), (2, 2)]
    assert M.bytes_per_apply() == 8 * ((24 + 16 + 16 + 4) + (24 + 16 + 16 + 4 + 16) + (16 + 8))
    big = bubbly_operator(256, 1e3, "numpy")
    v = Multigrid(big, cycle_precision="float64", w_levels=0).bytes_per_apply()
    assert Multigrid(big, w_levels=0).bytes_per_apply() < 0.65 * v      # its b in float64
    assert Multigrid(big, cycle_precision="float64", w_levels=2).bytes_per_apply() > 1.2 * v


@pytest.mark.parametrize("n, w", [(512, 0), (1024, 1), (2048, 2)])
def test_w_levels_auto_where_the_coarse_level_is_large(n, w):
    """The default: W on the levels whose coarse level has 2^18 cells or more."""
    M = Multigrid(bubbly_operator(n, 1e3, "numpy"))
    assert M.w_levels == w and M.dtype == np.float32


@pytest.mark.parametrize("shape, large, w", [((4096, 4096), 3, 3), ((8192, 8192), 4, 3),
                                             ((16384, 16384), 5, 3), ((4096, 2048), 2, 2),
                                             ((256, 256, 256), 2, 2), ((512, 512, 512), 3, 3)])
def test_w_levels_auto_are_at_most_three(shape, large, w):
    """Of the ``large`` levels whose coarse level has 2^18 cells or more,
    the top three at most are W levels."""
    shapes = level_shapes(shape, 512, 16)
    assert sum(1 for s in shapes[1:-1] if np.prod(s) >= 2 ** 18) == large
    assert auto_w_levels(shapes) == w


def test_a_float32_cycle_takes_any_scale_of_the_right_hand_side(backend):
    """The cycle's input is scaled by a power of two from ``max |b|``
    (``Multigrid.prepare``): a right-hand side of 1e-36 or 1e30 (units)
    solves in the iterations of one of order 1 (unscaled, a float32 cycle
    underflows: on the GPU already at 1e-30, which ran to maxiter), and the
    scales change no bit of ``M r``."""
    n = 128
    A = bubbly_operator(n, 1e3, backend)
    b = np.random.default_rng(9).standard_normal(n * n)
    b -= b.mean()
    its = {}
    for scale in (1.0, 1e-36, 1e30):
        x, rec = PressureSolver(A, rtol=1e-9, maxiter=200).solve(backend.xp.asarray(b * scale))
        assert rec.converged, (scale, rec.reason)
        its[scale] = rec.iterations
    print(its)
    assert len(set(its.values())) == 1
    M = Multigrid(A)
    r = backend.xp.asarray(b)
    M.prepare(r)
    plain = backend.to_host(M.apply(r))
    M.prepare(r * 2.0 ** -100)
    assert np.array_equal(backend.to_host(M.apply(r * 2.0 ** -100)), plain * 2.0 ** -100)


@pytest.mark.parametrize("banded", [True, False], ids=["band", "sparse LU"])
@pytest.mark.parametrize("shape", [(24, 24), (20, 40), (6, 5, 9)], ids=str)
def test_host_coarse_solve_equals_the_dense_inverse(shape, banded, monkeypatch):
    """The host's sparse coarsest solve (Sherman-Morrison-Woodbury on the
    grounded factorisation, as a band or by a sparse LU) is the dense
    inverse's operator, in 2-D and 3-D, at contrast 1e6."""
    from bubbleflow.linalg.precond import coarsest_solve
    from bubbleflow.linalg.precond.coarsest_solve import HostCoarseSolve, dense_inverse

    rng = np.random.default_rng(3)
    couplings = []
    for a in range(len(shape)):
        s = list(shape)
        s[len(shape) - 1 - a] -= 1
        couplings.append(10.0 ** rng.uniform(-6, 0, size=s))
    couplings = tuple(couplings)
    dense, flags = dense_inverse(couplings, shape)
    assert flags == []
    if not banded:
        monkeypatch.setattr(coarsest_solve, "BANDED_WORK", 0)
    host = HostCoarseSolve(couplings, shape)
    assert hasattr(host.factor, "lu") != banded
    b = rng.standard_normal(int(np.prod(shape)))
    b -= b.mean()
    np.testing.assert_allclose(host @ b, dense @ b, rtol=1e-8, atol=1e-8 * np.abs(dense @ b).max())


@pytest.mark.parametrize("n", [192, 240])
def test_non_power_of_two_grids_keep_wide_coarse_levels(n):
    """Grids whose halvings reach 12 or 15 cells: the coarsest level keeps at
    least 16 per side, and the solve stays within the iterations of the
    power-of-two sizes (40-73 iterations before, contrast 1e6)."""
    A, b, phi = bubbly_column(n, 1e6)
    M = make_preconditioner("multigrid", A)
    assert min(M.levels[-1].shape) >= 16
    x, rec = PressureSolver(A, phi=phi, rtol=1e-6).solve(b)
    assert rec.converged and rec.iterations <= 20, rec.iterations


def test_a_refreshed_3d_hierarchy_is_a_new_one(backend):
    """In 3-D too, ``refresh_couplings`` leaves the levels' arrays where
    they are and gives the bits a new hierarchy of the new couplings has."""
    xp = backend.xp
    rng = np.random.default_rng(5)
    shape = (12, 10, 16)

    def couplings():
        out = []
        for a in range(3):
            s = list(shape)
            s[2 - a] -= 1
            out.append(xp.asarray(10.0 ** rng.uniform(-4, 0, size=s)))
        return tuple(out)

    first, second = couplings(), couplings()
    M = Multigrid.from_couplings(first, shape, coarsest=32, min_side=1, coarse_refresh=1)
    arrays = [id(c) for lv in M.levels for c in lv.couplings + (lv.inv_diagonal,)]
    assert M.refresh_couplings(second)
    assert [id(c) for lv in M.levels for c in lv.couplings + (lv.inv_diagonal,)] == arrays
    fresh = Multigrid.from_couplings(second, shape, coarsest=32, min_side=1)
    assert len(M.levels) == len(fresh.levels) > 2
    for lv, fv in zip(M.levels, fresh.levels):
        for a, b in zip(lv.couplings + (lv.inv_diagonal,), fv.couplings + (fv.inv_diagonal,)):
            assert np.array_equal(backend.to_host(a), backend.to_host(b))
    assert np.array_equal(backend.to_host(M.coarse_inverse), backend.to_host(fresh.coarse_inverse))


def test_an_indefinite_coarsest_level_raises_on_the_host():
    """Negative couplings make the coarsest level's matrix indefinite: its
    Cholesky factorisation fails and says so, at once on the host."""
    from bubbleflow.linalg.precond.multigrid import Multigrid

    shape = (5, 6)
    rng = np.random.default_rng(7)
    bad = (-rng.uniform(0.5, 1.0, (5, 5)), -rng.uniform(0.5, 1.0, (4, 6)))
    with pytest.raises(np.linalg.LinAlgError, match=r"coarse matrix \(30 x 30\) is not positive"):
        Multigrid.from_couplings(bad, shape, coarsest=64, min_side=1)
    good = Multigrid.from_couplings(tuple(-c for c in bad), shape, coarsest=64, min_side=1)
    assert good.check_flags() == []
    good.check()
