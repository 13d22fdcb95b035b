"""The multigrid cycle's CUDA kernels (linalg.precond.multigrid_cuda) against
their array-code twins, and the whole cycle on the GPU against NumPy, alone
and captured with the fused Krylov iteration.

Each variant is called directly (a silent fall-back to the array code cannot
pass for it) on couplings spanning six decades, even and odd grids, a one-cell
wide grid, grids of one tile and of several (tiles of 32 x 16 cells).  The
kernels form D^-1 from the couplings and sum the stencil in another order
than the flux form of the array code: results agree to 1e-12 relative, not
bit for bit.
"""
import numpy as np
import pytest
from helpers.twins import variant

from bubbleflow.linalg.precond.multigrid import Multigrid, prolong_smooth, smooth_restrict
from bubbleflow.linalg.solver import PressureSolver
from bubbleflow.operators.poisson import PoissonOperator
from helpers.operators import bubbly_operator

pytestmark = pytest.mark.gpu

RTOL = 1e-12
SHAPES = [(8, 8), (9, 13), (1, 7), (6, 1), (33, 20), (70, 101)]


def fields(shape, seed=0):
    rng = np.random.default_rng(seed)
    ny, nx = shape
    cx = 10.0 ** rng.uniform(-6, 0, size=(ny, nx - 1))
    cy = 10.0 ** rng.uniform(-6, 0, size=(ny - 1, nx))
    centre = np.zeros(shape)
    centre[:, 1:] += cx
    centre[:, :-1] += cx
    centre[1:, :] += cy
    centre[:-1, :] += cy
    inv_d = np.where(centre > 0, 1.0 / np.where(centre > 0, centre, 1.0), 0.0)
    return (cx, cy), inv_d, rng.standard_normal(shape), rng.standard_normal(shape)


def close(got, ref, rtol=RTOL):
    got = got.get()
    assert got.shape == ref.shape
    diff = np.abs(got - ref).max() / max(np.abs(ref).max(), 1e-300)
    print(f"max relative difference {diff:.2e}")
    assert diff <= rtol


def pair(ref, got, rtol):
    for g, r in zip(got, ref):
        close(g, r, rtol)


@pytest.mark.parametrize("degree", [1, 2, 3])
@pytest.mark.parametrize("shape", SHAPES)
def test_smooth_restrict_kernel(shape, degree, cp):
    faces, inv_d, b, _ = fields(shape)
    got = variant(smooth_restrict)(tuple(cp.asarray(c) for c in faces), cp.asarray(inv_d),
                                   cp.asarray(b), degree, 4.0)
    assert got is not NotImplemented
    pair(smooth_restrict.reference(faces, inv_d, b, degree, 4.0), got, RTOL)


@pytest.mark.parametrize("degree", [1, 2, 3])
@pytest.mark.parametrize("shape", SHAPES)
def test_prolong_smooth_kernel(shape, degree, cp):
    faces, inv_d, b, x = fields(shape, seed=1)
    xc = np.random.default_rng(2).standard_normal(((shape[0] + 1) // 2, (shape[1] + 1) // 2))
    got = variant(prolong_smooth)(tuple(cp.asarray(c) for c in faces), cp.asarray(inv_d),
                                  cp.asarray(b), cp.asarray(x), cp.asarray(xc), 1.8, degree, 4.0)
    assert got is not NotImplemented
    close(got, prolong_smooth.reference(faces, inv_d, b, x, xc, 1.8, degree, 4.0))


@pytest.mark.parametrize("shape", SHAPES)
def test_float32_kernels(shape, cp):
    """The float32 build of the kernels against the float32 array code."""
    faces, inv_d, b, x = (tuple(a.astype(np.float32) for a in v) if isinstance(v, tuple)
                          else v.astype(np.float32) for v in fields(shape, seed=4))
    dev = tuple(cp.asarray(c) for c in faces)
    for degree in (2, 6):
        got = variant(smooth_restrict)(dev, cp.asarray(inv_d), cp.asarray(b), degree, 4.0)
        assert got is not NotImplemented and got[0].dtype == got[1].dtype == cp.float32
        pair(smooth_restrict.reference(faces, inv_d, b, degree, 4.0), got, 1e-5)
    xc = got[1].get()
    got = variant(prolong_smooth)(dev, cp.asarray(inv_d), cp.asarray(b), cp.asarray(x),
                                  cp.asarray(xc), 1.8, 2, 4.0)
    assert got.dtype == cp.float32
    close(got, prolong_smooth.reference(faces, inv_d, b, x, xc, 1.8, 2, 4.0), 1e-5)


def test_what_the_kernels_do_not_cover_runs_the_array_code(cp):
    faces, inv_d, b, x = fields((6, 5))
    dev = tuple(cp.asarray(c) for c in faces)
    f32 = cp.asarray(b, dtype=cp.float32)
    assert variant(smooth_restrict)(dev, cp.asarray(inv_d), f32, 2, 4.0) is NotImplemented
    assert variant(smooth_restrict)(dev, cp.asarray(inv_d), cp.asarray(b), 4, 4.0) \
        is NotImplemented                           # its float64 tile needs more registers
    half = tuple(c.astype(cp.float16) for c in dev)
    assert variant(smooth_restrict)(half, cp.asarray(inv_d), cp.asarray(b, dtype=cp.float16),
                                    2, 4.0) is NotImplemented
    three = tuple(cp.zeros((2, 3, 3)) for _ in range(3))
    assert variant(prolong_smooth)(three, cp.zeros((3, 3, 3)), cp.zeros((3, 3, 3)),
                                   cp.zeros((3, 3, 3)), cp.zeros((2, 2, 2)), 1.0, 2, 4.0) \
        is NotImplemented


@pytest.mark.parametrize("contrast", [1.0, 1e6])
def test_cycle_on_the_gpu_equals_numpy(contrast, cupy_backend):
    """Five levels on the GPU (kernels, cuBLAS/cuSOLVER) and on NumPy."""
    n = 96
    h = 1.0 / n
    X, Y = np.meshgrid((np.arange(n) + 0.5) * h, (np.arange(n) + 0.5) * h)
    rho = np.where(np.hypot(X - 0.4, Y - 0.5) < 0.2, 1.0, contrast)
    rx, ry = 0.5 * (rho[:, 1:] + rho[:, :-1]), 0.5 * (rho[1:, :] + rho[:-1, :])
    host = Multigrid(PoissonOperator(1 / rx, 1 / ry, h, h), coarsest=64, min_side=1,
                     cycle_precision="float64")
    gpu = Multigrid(PoissonOperator(1 / rx, 1 / ry, h, h, backend=cupy_backend), coarsest=64,
                    min_side=1, cycle_precision="float64")
    assert [lv.shape for lv in gpu.levels] == [(96, 96), (48, 48), (24, 24), (12, 12), (6, 6)]
    r = np.random.default_rng(3).standard_normal(n * n)
    r -= r.mean()
    # The coarsest inverse (cuSOLVER against LAPACK) differs by its
    # condition number times the rounding: looser at contrast 1e6.
    close(gpu.apply(cupy_backend.xp.asarray(r)), host.apply(r), 1e-12 if contrast == 1 else 1e-8)


@pytest.mark.parametrize("w_levels", [0, 2])
@pytest.mark.parametrize("precision", ["float64", "float32"])
@pytest.mark.parametrize("shape", [(96, 96), (75, 41), (1, 9)])
def test_graph_cycle_equals_the_twins(shape, precision, w_levels, cupy_backend):
    """The cycle replayed from its CUDA graph gives the level-by-level twins'
    result (the same kernels); a second apply reuses the graph and the
    output is not the graph's buffer."""
    cp = cupy_backend.xp
    ny, nx = shape
    faces, _, b, _ = fields(shape, seed=6)
    A = PoissonOperator(cp.asarray(faces[0]), cp.asarray(faces[1]), 1.0, 1.0,
                        backend=cupy_backend)
    M = Multigrid(A, coarsest=40, min_side=1, cycle_precision=precision, w_levels=w_levels)
    assert M.runner is not None
    r = cp.asarray(b.ravel() - b.mean())
    got = M.apply(r)
    assert M.runner.graph is not None, M.runner.capture_error
    ref = M._cycle(0, r.reshape(shape).astype(precision)).astype(np.float64).ravel()
    close(got, ref.get(), 1e-12 if precision == "float64" else 1e-5)
    again = M.apply(r)
    assert again.data.ptr != got.data.ptr and got.dtype == np.float64
    close(again, got.get(), 0.0)


@pytest.mark.parametrize("n", [128, 16])
@pytest.mark.parametrize("precision", ["float64", "float32"])
@pytest.mark.parametrize("method", ["pcg", "dpcg"])
def test_the_cycle_is_captured_with_the_krylov_iteration(method, precision, n, cupy_backend):
    """The fused engine takes the cycle's kernels into its CUDA graphs of
    whole iterations (on its own buffers, float64 in and out): the same
    answer, bit for bit, as the same launches made directly, and NumPy's
    iterations; also where the whole hierarchy is its coarsest level
    (16^2 cells)."""

    b = np.random.default_rng(8).standard_normal(n * n)
    b -= b.mean()
    h = 1.0 / n
    phi = 0.8 - (np.arange(n)[:, None] + 0.5) * h + 0 * np.arange(n)[None, :]
    results = {}
    for name, backend in (("numpy", "numpy"), ("graphs", cupy_backend), ("direct", cupy_backend)):
        A = bubbly_operator(n, 1e3, backend)
        xp = A.backend.xp
        solver = PressureSolver(A, method=method, preconditioner="multigrid",
                                deflation="none" if method == "pcg" else "levelset_subdomains",
                                phi=xp.asarray(phi), rtol=1e-9,
                                preconditioner_options={"cycle_precision": precision})
        if name != "numpy":
            engine = solver.device
            assert engine is not None and engine._prec_launches(engine.r[0]) is not None
            assert engine._graph_mode() is not None
            engine.use_graphs = name == "graphs"
        x, rec = solver.solve(xp.asarray(b))
        assert rec.converged
        results[name] = (A.backend.to_host(x), rec.iterations)
    print({k: v[1] for k, v in results.items()})
    assert np.array_equal(results["graphs"][0], results["direct"][0])
    assert abs(results["graphs"][1] - results["numpy"][1]) <= 1


# ------------------------------------------------------------------- 3-D
# One xy tile (32 x 8 columns) and one z chunk; several tiles; several z
# chunks of a pipeline that restarts below each (odd sizes everywhere).
SHAPES_3D = [(4, 4, 4), (5, 7, 9), (1, 6, 3), (16, 12, 20), (37, 17, 33), (40, 20, 70)]


def fields_3d(shape, seed=0):
    rng = np.random.default_rng(seed)
    nz, ny, nx = shape
    cx = 10.0 ** rng.uniform(-6, 0, size=(nz, ny, nx - 1))
    cy = 10.0 ** rng.uniform(-6, 0, size=(nz, ny - 1, nx))
    cz = 10.0 ** rng.uniform(-6, 0, size=(nz - 1, ny, nx))
    centre = np.zeros(shape)
    centre[..., 1:] += cx
    centre[..., :-1] += cx
    centre[:, 1:] += cy
    centre[:, :-1] += cy
    centre[1:] += cz
    centre[:-1] += cz
    inv_d = np.where(centre > 0, 1.0 / np.where(centre > 0, centre, 1.0), 0.0)
    return (cx, cy, cz), inv_d, rng.standard_normal(shape), rng.standard_normal(shape)


@pytest.mark.parametrize("dtype, rtol", [(np.float64, 1e-12), (np.float32, 2e-5)])
@pytest.mark.parametrize("shape", SHAPES_3D)
@pytest.mark.parametrize("degree", [1, 2, 3])
def test_3d_down_and_up_kernels_equal_the_array_code(cp, shape, degree, dtype, rtol):
    faces, inv_d, b, x = fields_3d(shape, seed=sum(shape) + degree)
    host = [a.astype(dtype) for a in (*faces, inv_d, b, x)]
    dev = [cp.asarray(a) for a in host]
    ref = smooth_restrict.reference(tuple(host[:3]), host[3], host[4], degree, 4.0)
    got = variant(smooth_restrict)(tuple(dev[:3]), dev[3], dev[4], degree, 4.0)
    if degree == 3 and dtype == np.float64:
        # Its pipeline's shared planes exceed 48 KiB: the array code runs.
        assert got is NotImplemented
        return
    assert got is not NotImplemented
    pair([r.astype(np.float64) for r in ref], [g.astype(cp.float64) for g in got], rtol)
    xc = np.random.default_rng(1).standard_normal(ref[1].shape).astype(dtype)
    ref = prolong_smooth.reference(tuple(host[:3]), host[3], host[4], host[5], xc, 1.8, degree,
                                   4.0)
    got = variant(prolong_smooth)(tuple(dev[:3]), dev[3], dev[4], dev[5], cp.asarray(xc), 1.8,
                                  degree, 4.0)
    close(got.astype(cp.float64), ref.astype(np.float64), rtol)


def test_3d_levels_past_32_bit_offsets_run_the_array_code():
    """The 3-D kernels index with 32-bit offsets: a level whose cells plus
    the planes its pipeline reads ahead pass 2^31 - 1 is left to the array
    code (checked on the shapes alone)."""
    from bubbleflow.linalg.precond import multigrid_cuda

    class Shaped:                   # what _covered reads of an array
        def __init__(self, *shape):
            self.shape, self.ndim, self.dtype = shape, len(shape), np.dtype(np.float32)

    def covered(n):
        faces = (Shaped(n, n, n - 1), Shaped(n, n - 1, n), Shaped(n - 1, n, n))
        return multigrid_cuda.covered(faces, (Shaped(n, n, n),), 2)

    # 1289^3 + 3 planes fits; 1290^3 fits alone, not with its read-ahead.
    assert 1289 ** 3 + 3 * 1289 ** 2 < 2 ** 31 - 1 < 1290 ** 3 + 3 * 1290 ** 2
    assert covered(1289) == "float32"
    assert covered(1290) is None


@pytest.mark.parametrize("w_levels", [0, 2])
@pytest.mark.parametrize("precision", ["float64", "float32"])
@pytest.mark.parametrize("shape", [(24, 20, 36), (33, 9, 17)])
def test_3d_graph_cycle_equals_the_twins(shape, precision, w_levels, cupy_backend):
    """In 3-D too the whole cycle is one CUDA graph of the streaming
    kernels (W levels' residuals included), equal to the level-by-level
    twins."""
    from bubbleflow.mesh.grid import Grid

    cp = cupy_backend.xp
    nz, ny, nx = shape
    faces, _, b, _ = fields_3d(shape, seed=7)
    grid = Grid.regular((nx, ny, nz), (1.0, 1.0, 1.0))
    spacing = grid.spacing
    betas = [cp.asarray(f * h ** 2) for f, h in zip(faces, spacing)]
    A = PoissonOperator.from_faces(betas, grid, backend=cupy_backend)
    M = Multigrid(A, coarsest=40, min_side=1, cycle_precision=precision, w_levels=w_levels)
    assert M.runner is not None and len(M.levels) >= 3
    r = cp.asarray(b.ravel() - b.mean())
    got = M.apply(r)
    assert M.runner.graph is not None, M.runner.capture_error
    ref = M._cycle(0, r.reshape(shape).astype(precision)).astype(np.float64).ravel()
    close(got, ref.get(), 1e-12 if precision == "float64" else 1e-5)
