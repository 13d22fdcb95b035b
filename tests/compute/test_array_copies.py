"""Several arrays copied at once (compute.array_copies.copy_arrays): the
CUDA variant (eight contiguous arrays a launch, by words or by bytes)
against the array code, on arrays of any dtype, size, offset and layout."""
import numpy as np
import pytest

from bubbleflow.compute.array_copies import COPIES_A_LAUNCH, copy_arrays


def _pairs(xp, rng):
    """Sources and zeroed destinations: float64, bool and int32 arrays of
    odd sizes, empty ones, views at odd byte offsets, a strided view, and
    more arrays than one launch copies."""
    srcs = [xp.asarray(rng.standard_normal((7, 5))), xp.asarray(rng.random(13) < 0.5),
            xp.asarray(rng.integers(-9, 9, 3, dtype=np.int32)), xp.zeros(0),
            xp.asarray(rng.integers(0, 255, 29, dtype=np.uint8))[3:],
            xp.asarray(rng.standard_normal((6, 8)))[:, ::2]]
    srcs += [xp.asarray(rng.standard_normal(n)) for n in range(1, 2 * COPIES_A_LAUNCH)]
    dsts = [xp.zeros(s.shape, dtype=s.dtype) for s in srcs]
    dsts[4] = xp.zeros(30, dtype=np.uint8)[1:27]           # (an odd offset too)
    return dsts, srcs


def test_array_code_copies_every_pair():
    rng = np.random.default_rng(1)
    dsts, srcs = _pairs(np, rng)
    assert copy_arrays(dsts, srcs) is dsts
    for d, s in zip(dsts, srcs):
        np.testing.assert_array_equal(d, s)


@pytest.mark.gpu
def test_launches_copy_what_the_array_code_copies(cp):
    rng = np.random.default_rng(2)
    dsts, srcs = _pairs(cp, rng)
    before = [s.copy() for s in srcs]
    copy_arrays(dsts, srcs)
    for d, s, b in zip(dsts, srcs, before):
        assert d.dtype == s.dtype and cp.array_equal(d, s) and cp.array_equal(s, b)
    # A large array: every word, none past its end.
    big = cp.asarray(rng.standard_normal(3 * 2 ** 20 + 3))
    out = cp.full(big.size + 1, -1.0)
    copy_arrays([out[:-1]], [big])
    assert cp.array_equal(out[:-1], big) and float(out[-1]) == -1.0
