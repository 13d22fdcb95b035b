"""The pressure operator's residual ``b - A x`` in one pass over the grid
(``PoissonOperator.residual``; the stencil kernels with a right-hand side):
the bits of ``b - A.matvec(x)`` in 2-D and 3-D, either storage, on the
suite's backend; on the GPU the kernels against their array-code twins."""
import numpy as np
import pytest

from bubbleflow.mesh.grid import Grid
from bubbleflow.operators.poisson import PoissonOperator, apply_diagonals, apply_faces

GRIDS = [((7, 5), (1.0, 0.7)), ((6, 5, 4), (1.0, 0.8, 0.6)), ((33, 9, 17), (1.0, 0.3, 0.5))]


def _operator(cells, lengths, storage, backend, seed=0):
    rng = np.random.default_rng(seed)
    grid = Grid.regular(cells, lengths)
    betas = [backend.xp.asarray(rng.uniform(1e-3, 2.0, grid.faces_shape(a)))
             for a in range(grid.ndim)]
    A = PoissonOperator.from_faces(betas, grid, backend=backend, storage=storage)
    shape = tuple(A.grid_shape)
    b = backend.xp.asarray(rng.standard_normal(shape))
    x = backend.xp.asarray(rng.standard_normal(shape) * 1e3)
    return A, b, x


@pytest.mark.parametrize("cells, lengths", GRIDS)
@pytest.mark.parametrize("storage", ["diagonals", "matrix_free"])
def test_the_residual_is_b_minus_the_product_bit_for_bit(cells, lengths, storage, backend):
    A, b, x = _operator(cells, lengths, storage, backend)
    h = backend.to_host
    want = h(b - A.matvec(x))
    got = A.residual(b, x)
    assert got.shape == x.shape
    assert np.array_equal(h(got), want)
    flat = A.residual(b.ravel(), x.ravel())
    assert flat.shape == (x.size,) and np.array_equal(h(flat), want.ravel())
    out = backend.xp.full(x.shape, np.nan)
    assert A.residual(b, x, out=out) is not None and np.array_equal(h(out), want)
    # The product alone is unchanged by the kernels' right-hand side slot.
    dense = A.to_scipy().toarray()
    np.testing.assert_allclose(h(A.matvec(x)).ravel(), dense @ h(x).ravel(), rtol=1e-12,
                               atol=1e-12 * np.abs(dense).max() * np.abs(h(x)).max())


@pytest.mark.gpu
@pytest.mark.parametrize("cells, lengths", GRIDS)
@pytest.mark.parametrize("storage", ["diagonals", "matrix_free"])
def test_the_residual_kernels_equal_their_array_code(cells, lengths, storage, cupy_backend):
    import cupy as cp

    A, b, x = _operator(cells, lengths, storage, cupy_backend, seed=1)
    arrays = A.entries() if storage == "diagonals" else A.couplings()
    twin = apply_diagonals if storage == "diagonals" else apply_faces
    got = cp.asnumpy(twin(arrays, x, cp.empty_like(x), b))
    ref = cp.asnumpy(twin.reference(arrays, x, cp.empty_like(x), b))
    scale = float(cp.abs(x).max()) * max(float(cp.abs(a).max()) for a in arrays)
    np.testing.assert_allclose(got, ref, rtol=0, atol=1e-13 * scale)
    product = cp.asnumpy(twin(arrays, x, cp.empty_like(x)))
    assert np.array_equal(got, cp.asnumpy(b) - product)
