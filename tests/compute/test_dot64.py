"""The float64 inner product of the Krylov loops on CuPy (compute.reductions,
``dot64.cu``) against NumPy's: to rounding, the same bits from call to
call, a 0-d result on the device."""
import numpy as np
import pytest

from bubbleflow.compute.backend import get_backend
from bubbleflow.compute.reductions import reductions, several_norms

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


@pytest.mark.parametrize("n", [1, 257, 70_001, 3 * 2 ** 20 + 5])
@pytest.mark.parametrize("count", [1, 2, 3, 4])
def test_several_norms_are_the_norms_bit_for_bit(cp, n, count):
    rng = np.random.default_rng(count * n)
    vectors = [cp.asarray(rng.standard_normal(n) * 10.0 ** k) for k in range(count)]
    dot, norm = reductions(get_backend("cupy"))
    got = several_norms(get_backend("cupy"))(*vectors)
    assert isinstance(got, cp.ndarray) and got.shape == (count,)
    one_by_one = [float(cp.sqrt(dot(v, v))) for v in vectors]
    assert cp.asnumpy(got).tolist() == one_by_one
    assert [float(norm(v)) for v in vectors] == one_by_one
    assert norm(vectors[0]).shape == ()


def test_several_norms_of_other_layouts_and_of_more_vectors(cp):
    rng = np.random.default_rng(5)
    a = rng.standard_normal((300, 2))
    vectors = [cp.asarray(a[:, 0]), cp.asarray(a)[:, 1]] + \
        [cp.asarray(rng.standard_normal(300)) for _ in range(4)]     # strided, and six
    got = cp.asnumpy(several_norms(get_backend("cupy"))(*vectors))
    want = [np.linalg.norm(cp.asnumpy(v)) for v in vectors]
    np.testing.assert_allclose(got, want, rtol=1e-14)


@pytest.mark.parametrize("order", [(0, 0, 1), (0, 1, 0), (1, 0, 0, 1), (0, 0, 0, 0)])
def test_a_vector_given_twice_has_its_norm_twice_bit_for_bit(cp, order):
    rng = np.random.default_rng(len(order))
    distinct = [cp.asarray(rng.standard_normal(70_001) * 10.0 ** k) for k in range(2)]
    vectors = [distinct[k] for k in order]
    _, norm = reductions(get_backend("cupy"))
    got = several_norms(get_backend("cupy"))(*vectors)
    assert got.shape == (len(order),)
    assert cp.asnumpy(got).tolist() == [float(norm(v)) for v in vectors]
