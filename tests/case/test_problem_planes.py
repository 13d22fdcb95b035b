"""A rank's planes of the bubbly column, built without the rest of the grid
(the ranks' benchmark: no rank holds the whole problem), are the whole
grid's: couplings, right-hand side and level set, bit for bit."""
import numpy as np
import pytest

from bubbleflow.case.problem import bubbly_column, bubbly_column_3d, bubbly_column_planes


@pytest.mark.parametrize("dim, n, stack, lo, hi", [
    (2, 64, 1, 10, 30), (2, 64, 1, 0, 64), (2, 32, 3, 40, 96), (3, 16, 1, 0, 7),
    (3, 16, 2, 5, 20)])
def test_planes_are_the_whole_grids(dim, n, stack, lo, hi):
    A, b, phi = (bubbly_column if dim == 2 else bubbly_column_3d)(n, 1e3, stack=stack)
    couplings, rhs, phi_planes = bubbly_column_planes(n, lo, hi, dim, 1e3, stack=stack)
    assert len(couplings) == dim
    for axis, (whole, planes) in enumerate(zip(A.couplings(), couplings)):
        expected = whole[lo:hi - 1] if axis == dim - 1 else whole[lo:hi]
        assert np.array_equal(np.asarray(expected), planes), axis
    assert np.array_equal(np.asarray(b).reshape(A.grid_shape)[lo:hi], rhs)
    assert np.array_equal(phi[lo:hi], phi_planes)


def test_stacked_columns_repeat_the_unit():
    """``stack``: the unit column repeated upward, the free surface in the top one."""
    _, b, phi = bubbly_column(32, 1e3, stack=3)
    _, b1, phi1 = bubbly_column(32, 1e3)
    assert phi.shape == (96, 32)
    assert np.allclose(phi[64:], phi1, atol=1e-12)          # the top unit: surface and bubbles
    # The bubbles (below y = 0.7 of a unit) repeat in every unit; only the top one has gas above.
    for unit in range(3):
        rows = slice(32 * unit, 32 * unit + 22)
        assert np.array_equal(phi[rows] < 0, phi1[:22] < 0), unit
    assert (phi[:64] >= 0).mean() > (phi1 >= 0).mean()
    assert abs(float(np.sum(b))) < 1e-9
