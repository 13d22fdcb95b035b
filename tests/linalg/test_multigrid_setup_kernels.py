"""The multigrid set-up's CUDA kernels (linalg.precond.multigrid_setup_cuda)
against their array-code twins: the coarse couplings, a level's arrays in
both cycle precisions (alone, and with the coarser level's couplings in the
same pass) and the coarsest level's dense matrix, the same bits,
in 2-D and 3-D, on even and odd grids, grids one cell wide and couplings
spanning six decades (some zero); and the coarsest inverse's failure,
deferred on the GPU to the solver's checks.
Each variant is called directly, so a silent fall-back to the array code
cannot pass for it.  Run with ``pytest --backend cupy`` on a GPU machine.
"""
import numpy as np
import pytest
from helpers.twins import variant

from bubbleflow.linalg.precond.coarsest_solve import coarsest_shift, shifted_dense
from bubbleflow.linalg.precond.multigrid import (Multigrid, coarsen_couplings, level_and_coarser,
                                                 level_arrays)
from bubbleflow.operators.poisson import centre_from_couplings
from bubbleflow.mesh.grid import array_axis

pytestmark = pytest.mark.gpu

SHAPES = [(8, 8), (9, 13), (1, 7), (6, 1), (4, 6, 8), (5, 7, 9), (1, 3, 4), (3, 1, 5),
          (2, 2, 1), (17, 10, 6)]


def couplings(shape, seed=0):
    """Face couplings per grid axis (x first) of a grid of ``shape`` cells
    (array order): six decades, a few exact zeros."""
    rng = np.random.default_rng(seed)
    nd = len(shape)
    out = []
    for a in range(nd):
        s = list(shape)
        s[array_axis(nd, a)] -= 1
        c = 10.0 ** rng.uniform(-6, 0, size=s)
        c[rng.random(s) < 0.05] = 0.0
        out.append(c)
    return tuple(out)


def same(got, ref):
    assert len(got) == len(ref)
    for g, r in zip(got, ref):
        g = g.get()
        assert g.shape == r.shape and g.dtype == r.dtype
        np.testing.assert_array_equal(g, r)


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_coarsen_couplings_kernel(shape, cp):
    c = couplings(shape)
    got = variant(coarsen_couplings)(tuple(cp.asarray(x) for x in c), cp)
    assert got is not NotImplemented
    same(got, coarsen_couplings.reference(c, np))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_level_arrays_kernel(shape, dtype, cp):
    c = couplings(shape, seed=1)
    ref_c = tuple(np.empty(x.shape, dtype=dtype) for x in c)
    ref_inv = np.empty(shape, dtype=dtype)
    level_arrays.reference(c, ref_c, ref_inv)
    out_c = tuple(cp.full(x.shape, np.nan, dtype=dtype) for x in c)
    out_inv = cp.full(shape, np.nan, dtype=dtype)
    assert variant(level_arrays)(tuple(cp.asarray(x) for x in c), out_c, out_inv) \
        is not NotImplemented
    same(out_c + (out_inv,), ref_c + (ref_inv,))


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_level_and_coarser_kernel(shape, dtype, cp):
    """One pass writes the level's arrays and returns the coarser level's
    couplings: the bits of the array code's two steps."""
    c = couplings(shape, seed=5)
    ref_c = tuple(np.empty(x.shape, dtype=dtype) for x in c)
    ref_inv = np.empty(shape, dtype=dtype)
    ref_coarse = level_and_coarser.reference(c, ref_c, ref_inv)
    out_c = tuple(cp.full(x.shape, np.nan, dtype=dtype) for x in c)
    out_inv = cp.full(shape, np.nan, dtype=dtype)
    got = variant(level_and_coarser)(tuple(cp.asarray(x) for x in c), out_c, out_inv)
    assert got is not NotImplemented
    same(out_c + (out_inv,), ref_c + (ref_inv,))
    same(got, coarsen_couplings.reference(c, np))
    same(got, ref_coarse)

def test_a_hierarchy_on_the_gpu_is_the_array_codes(cp):
    """A 3-D hierarchy built and refreshed with the kernels holds the bits
    NumPy's array code gives (every level, the coarsest inverse to rounding:
    the libraries' inverses differ)."""
    shape = (20, 12, 16)
    first, second = couplings(shape, seed=2), couplings(shape, seed=3)
    M = Multigrid.from_couplings(tuple(cp.asarray(x) for x in first), shape, coarsest=64,
                                 min_side=1)
    assert M.refresh_couplings(tuple(cp.asarray(x) for x in second))
    ref = Multigrid.from_couplings(second, shape, coarsest=64, min_side=1)
    assert len(M.levels) == len(ref.levels) > 2
    for lv, rv in zip(M.levels, ref.levels):
        same(lv.couplings + (lv.inv_diagonal,), rv.couplings + (rv.inv_diagonal,))
    np.testing.assert_allclose(M.coarse_inverse.get(), ref.coarse_inverse, rtol=1e-4,
                               atol=1e-4 * np.abs(ref.coarse_inverse).max())


@pytest.mark.parametrize("shape", [(33, 48), (20, 12, 16)], ids=str)
def test_refreshes_replayed_from_a_graph_are_the_array_codes(shape, cp):
    """A hierarchy's refreshes: the first (the build's) launched, the second
    captured and replayed, the later ones replayed from one CUDA graph;
    after each, every level holds the bits of a new hierarchy built by
    NumPy's array code from the same couplings, and the coarsest inverse is
    computed from the array code's coarsest couplings."""
    first = couplings(shape, seed=4)
    M = Multigrid.from_couplings(tuple(cp.asarray(x) for x in first), shape, coarsest=16,
                                 min_side=1)
    assert len(M.levels) > 2
    for seed in range(5, 10):
        c = couplings(shape, seed=seed)
        assert M.refresh_couplings(tuple(cp.asarray(x) for x in c))
        ref = Multigrid.from_couplings(c, shape, coarsest=16, min_side=1)
        for lv, rv in zip(M.levels, ref.levels):
            same(lv.couplings + (lv.inv_diagonal,), rv.couplings + (rv.inv_diagonal,))
        np.testing.assert_allclose(M.coarse_inverse.get(), ref.coarse_inverse, rtol=1e-4,
                                   atol=1e-4 * np.abs(ref.coarse_inverse).max())
    # (the hierarchy's build is its first refresh: the loop's first captures)
    assert M.replays.counts == {"run": 1, "captured": 1, "replayed": 5}


def test_a_refresh_that_does_not_capture_runs_the_array_code(cp, monkeypatch):
    """Where the refresh's launches do not capture, it launches them from
    then on, with the same bits."""
    shape = (24, 40)
    M = Multigrid.from_couplings(tuple(cp.asarray(x) for x in couplings(shape, seed=4)), shape,
                                 coarsest=16, min_side=1)

    def refuse(self, *args, **kwargs):
        raise RuntimeError("no capture here")

    monkeypatch.setattr(cp.cuda.Stream, "begin_capture", refuse)
    for seed in (5, 6, 7, 8):
        c = couplings(shape, seed=seed)
        assert M.refresh_couplings(tuple(cp.asarray(x) for x in c))
        ref = Multigrid.from_couplings(c, shape, coarsest=16, min_side=1)
        for lv, rv in zip(M.levels, ref.levels):
            same(lv.couplings + (lv.inv_diagonal,), rv.couplings + (rv.inv_diagonal,))
    assert M.replays.counts["replayed"] == 0 and M.replays.failed == M.replays.failures


@pytest.mark.parametrize("case", ["random", "powers", "zero", "nan", "inf", "tiny", "one"])
def test_cycle_scales_kernels(case, cp):
    """The cycle's input and output scales from max |b|: the two kernels'
    peak and scales are the array code's bits (a NaN or inf among the values,
    all zeros, exact powers of two, values far below one, a single value)."""
    from bubbleflow.linalg.precond.multigrid import abs_peak, write_io_scale

    rng = np.random.default_rng(8)
    b = rng.standard_normal(100_003) * 1e3
    if case == "powers":
        b[:] = 0.25
        b[77] = -1024.0
    elif case == "zero":
        b[:] = 0.0
    elif case == "nan":
        b[5000] = np.nan
    elif case == "inf":
        b[99_999] = -np.inf
    elif case == "tiny":
        b *= 1e-300
    elif case == "one":
        b = np.array([-3.0])
    peak = variant(abs_peak)(cp.asarray(b))
    ref_peak = abs_peak.reference(b)
    same((peak,), (ref_peak,))
    got, ref = cp.zeros(2), np.zeros(2)
    assert variant(write_io_scale)(peak, got) is None
    write_io_scale.reference(ref_peak, ref)
    same((got,), (ref,))
    assert variant(abs_peak)(cp.asarray(b, dtype=cp.float32)) is NotImplemented
    if b.size > 1:
        assert variant(abs_peak)(cp.asarray(b)[::2]) is NotImplemented


def test_calls_the_kernels_do_not_cover(cp):
    c = couplings((4, 5, 6))
    d = tuple(cp.asarray(x) for x in c)
    assert variant(coarsen_couplings)(tuple(x.astype(cp.float32) for x in d), cp) \
        is NotImplemented
    assert variant(coarsen_couplings)(d[::-1], cp) is NotImplemented
    out_c = tuple(cp.empty(x.shape, dtype=cp.float16) for x in c)
    assert variant(level_arrays)(d, out_c, cp.empty((4, 5, 6), dtype=cp.float16)) \
        is NotImplemented
    out_c = tuple(cp.empty(x.shape, dtype=cp.float32) for x in c)
    assert variant(level_arrays)(d, out_c, cp.empty((4, 5, 7), dtype=cp.float32)) \
        is NotImplemented
    assert variant(level_and_coarser)(d, out_c, cp.empty((4, 5, 7), dtype=cp.float32)) \
        is NotImplemented
    assert variant(level_and_coarser)(d[::-1], out_c, cp.empty((4, 5, 6), dtype=cp.float32)) \
        is NotImplemented


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_shifted_dense_kernel(shape, cp):
    c = couplings(shape, seed=4)
    centre = centre_from_couplings(c, np).ravel()
    shift = coarsest_shift(centre, np)      # (CuPy's mean sums in another order)
    ref = shifted_dense.reference(c, shape, centre, shift)
    got = variant(shifted_dense)(tuple(cp.asarray(x) for x in c), shape, cp.asarray(centre),
                                 cp.asarray(shift))
    assert got is not NotImplemented and got.shape == ref.shape
    np.testing.assert_array_equal(got.get(), ref)
    np.testing.assert_array_equal(ref, ref.T)


def test_a_failed_coarsest_inverse_is_reported_by_check(cp):
    """An indefinite coarsest level (negative couplings): the GPU queues the
    factorisation and its flags, and check() raises what the host raises at
    once."""
    shape = (4, 5, 3)
    bad = tuple(-x for x in couplings(shape, seed=5))
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        Multigrid.from_couplings(bad, shape, coarsest=64, min_side=1)
    M = Multigrid.from_couplings(tuple(cp.asarray(x) for x in bad), shape, coarsest=64,
                                 min_side=1)
    assert len(M.levels) == 1 and len(M.check_flags()) == 1
    with pytest.raises(np.linalg.LinAlgError, match="not positive definite"):
        M.check()
    assert M.check_flags() == []
    good = Multigrid.from_couplings(tuple(cp.asarray(x) for x in couplings(shape, seed=5)),
                                    shape, coarsest=64, min_side=1)
    good.check()
