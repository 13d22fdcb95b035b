"""The float64 inner product of the Krylov loops on CuPy (compute.reductions,
``dot64.cu``) against NumPy's: to rounding, the same bits from call to
call, a 0-d result on the device."""
import numpy as np
import pytest

from bubbleflow.compute.backend import get_backend
from bubbleflow.compute.reductions import reductions

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("n", [1, 255, 256, 257, 70_001, 3 * 2 ** 20 + 5])
def test_dot_and_norm_are_numpys(cp, n):
    rng = np.random.default_rng(n)
    a, b = rng.standard_normal(n), rng.standard_normal(n)
    dot, norm = reductions(get_backend("cupy"))
    da, db = cp.asarray(a), cp.asarray(b)
    got = dot(da, db)
    assert isinstance(got, cp.ndarray) and got.shape == ()
    scale = float(np.abs(a) @ np.abs(b))
    assert abs(float(got) - float(np.einsum("i,i->", a, b))) <= 1e-14 * scale
    assert float(dot(da, db)) == float(got)                      # (a fixed order)
    assert float(norm(da)) == pytest.approx(np.linalg.norm(a), rel=1e-14)
    strided = cp.asarray(np.stack([a, b], axis=1))[:, 0]        # (another layout: cupy.dot)
    assert float(dot(strided, db)) == pytest.approx(float(got), rel=1e-12, abs=1e-12 * scale)
