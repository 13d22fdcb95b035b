"""The multigrid cycle's CUDA kernels (linalg.precond.multigrid_cuda) against
their array-code twins, and the whole V-cycle on the GPU against NumPy.

Each variant is called directly (a silent fall-back to the array code cannot
pass for it) on couplings spanning six decades, even and odd grids, a one-cell
wide grid.  The kernels sum the stencil in another order than the flux form
of the array code: results agree to 1e-12 relative, not bit for bit.
"""
import numpy as np
import pytest

from bubbleflow.linalg.precond.multigrid import (Multigrid, prolong_add, residual_restrict,
                                                 smooth)
from bubbleflow.operators.poisson import PoissonOperator

pytestmark = pytest.mark.gpu

RTOL = 1e-12
SHAPES = [(8, 8), (9, 13), (1, 7), (6, 1), (33, 20)]


@pytest.fixture(scope="module")
def cp(cupy_backend):
    return cupy_backend.xp


def variant(concept):
    return concept.variants["cupy"]


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


@pytest.mark.parametrize("degree", [1, 2, 3])
@pytest.mark.parametrize("with_x", [False, True])
@pytest.mark.parametrize("shape", SHAPES)
def test_smooth_kernel(shape, with_x, degree, cp):
    faces, inv_d, b, x = fields(shape)
    x = x if with_x else None
    got = variant(smooth)(tuple(cp.asarray(c) for c in faces), cp.asarray(inv_d), cp.asarray(b),
                          None if x is None else cp.asarray(x), degree, 4.0)
    assert got is not NotImplemented
    close(got, smooth.reference(faces, inv_d, b, x, degree, 4.0))


@pytest.mark.parametrize("shape", SHAPES)
def test_float32_kernels(shape, cp):
    """The float32 build of the kernels against the float32 array code."""
    faces, inv_d, b, x = (tuple(a.astype(np.float32) for a in v) if isinstance(v, tuple)
                          else v.astype(np.float32) for v in fields(shape, seed=4))
    dev = tuple(cp.asarray(c) for c in faces)
    got = variant(smooth)(dev, cp.asarray(inv_d), cp.asarray(b), cp.asarray(x), 2, 4.0)
    assert got is not NotImplemented and got.dtype == cp.float32
    close(got, smooth.reference(faces, inv_d, b, x, 2, 4.0), 1e-5)
    got = variant(residual_restrict)(dev, cp.asarray(b), cp.asarray(x))
    assert got.dtype == cp.float32
    close(got, residual_restrict.reference(faces, b, x), 1e-5)


@pytest.mark.parametrize("shape", SHAPES)
def test_residual_restrict_and_prolong_add_kernels(shape, cp):
    faces, _, b, x = fields(shape, seed=1)
    got = variant(residual_restrict)(tuple(cp.asarray(c) for c in faces), cp.asarray(b),
                                     cp.asarray(x))
    assert got is not NotImplemented
    close(got, residual_restrict.reference(faces, b, x))
    xc = np.random.default_rng(2).standard_normal(((shape[0] + 1) // 2, (shape[1] + 1) // 2))
    got = variant(prolong_add)(cp.asarray(x), cp.asarray(xc), 1.8)
    assert got is not NotImplemented
    close(got, prolong_add.reference(x, xc, 1.8))


def test_other_dimensions_and_dtypes_run_the_array_code(cp):
    faces, inv_d, b, x = fields((6, 5))
    f32 = cp.asarray(b, dtype=cp.float32)
    assert variant(prolong_add)(f32, cp.zeros((3, 3)), 1.0) is NotImplemented     # mixed
    assert variant(prolong_add)(cp.asarray(b, dtype=cp.float16), f32[:3, :3].astype(cp.float16),
                                1.0) is NotImplemented
    three = tuple(cp.zeros((2, 3, 3)) for _ in range(3))
    assert variant(residual_restrict)(three, cp.zeros((3, 3, 3)), cp.zeros((3, 3, 3))) \
        is NotImplemented


@pytest.mark.parametrize("contrast", [1.0, 1e6])
def test_cycle_on_the_gpu_equals_numpy(contrast, cupy_backend):
    """Five levels on the GPU (kernels, cuBLAS/cuSOLVER) and on NumPy."""
    n = 96
    h = 1.0 / n
    X, Y = np.meshgrid((np.arange(n) + 0.5) * h, (np.arange(n) + 0.5) * h)
    rho = np.where(np.hypot(X - 0.4, Y - 0.5) < 0.2, 1.0, contrast)
    rx, ry = 0.5 * (rho[:, 1:] + rho[:, :-1]), 0.5 * (rho[1:, :] + rho[:-1, :])
    host = Multigrid(PoissonOperator(1 / rx, 1 / ry, h, h), coarsest=64)
    gpu = Multigrid(PoissonOperator(1 / rx, 1 / ry, h, h, backend=cupy_backend), coarsest=64)
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
    M = Multigrid(A, coarsest=40, cycle_precision=precision, w_levels=w_levels)
    assert M.runner is not None
    r = cp.asarray(b.ravel() - b.mean())
    got = M.apply(r)
    assert M.runner.graph is not None, M.runner.capture_error
    ref = M._cycle(0, r.reshape(shape).astype(precision)).astype(np.float64).ravel()
    close(got, ref.get(), 1e-12 if precision == "float64" else 1e-5)
    again = M.apply(r)
    assert again.data.ptr != got.data.ptr and got.dtype == np.float64
    close(again, got.get(), 0.0)
