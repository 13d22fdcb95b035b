"""A vector less its mean (compute.mean_removal.minus_mean): the array code
on the host, and its two launches on CuPy against NumPy's to rounding, the
same bits from call to call, other layouts by the array code."""
import numpy as np
import pytest

from bubbleflow.compute.mean_removal import minus_mean


def test_the_array_code_is_numpys_mean_removed():
    v = np.random.default_rng(0).standard_normal((30, 7)) + 3.0
    out, mean = minus_mean(v)
    assert out.shape == v.shape and mean == v.mean()
    assert np.array_equal(out, v - v.mean())
    assert minus_mean(v)[0] is not v


@pytest.mark.gpu
@pytest.mark.parametrize("shape", [(1,), (255,), (257,), (320, 160), (3 * 2 ** 20 + 5,)])
def test_the_launches_are_numpys_to_rounding(cp, shape):
    rng = np.random.default_rng(len(shape) * shape[0])
    host = rng.standard_normal(shape) + 10.0
    v = cp.asarray(host)
    out, mean = minus_mean(v)
    assert isinstance(mean, cp.ndarray) and mean.shape == () and out.shape == v.shape
    scale = float(np.abs(host).mean())
    assert abs(float(mean) - host.mean()) <= 1e-14 * scale
    np.testing.assert_allclose(cp.asnumpy(out), host - float(mean), rtol=0, atol=1e-15 * scale)
    again, mean_again = minus_mean(v)
    assert float(mean_again) == float(mean) and bool((again == out).all())


@pytest.mark.gpu
def test_other_layouts_and_dtypes_take_the_array_code(cp):
    host = np.random.default_rng(1).standard_normal((64, 3))
    strided = cp.asarray(host)[:, 1]
    out, mean = minus_mean(strided)
    np.testing.assert_allclose(cp.asnumpy(out), host[:, 1] - host[:, 1].mean(), atol=1e-15)
    single = cp.asarray(host.astype(np.float32))
    out32, _ = minus_mean(single)
    assert out32.dtype == np.float32
