"""The norms of several vectors in one reduction (compute.reductions.several_norms)
on the host: each the value of the pair's ``norm``, float32 summed in float64,
and on ranks the squares added over the ranks before the roots."""
import numpy as np
import pytest

from bubbleflow.compute.backend import get_backend
from bubbleflow.compute.reductions import reductions, several_norms


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_several_norms_are_the_pairs_norms(dtype):
    rng = np.random.default_rng(0)
    vectors = [rng.standard_normal(1000).astype(dtype) * 10.0 ** k for k in range(5)]
    backend = get_backend("numpy")
    _, norm = reductions(backend, dtype)
    got = several_norms(backend, dtype)(*vectors)
    assert got.dtype == np.float64 and got.shape == (5,)
    assert got.tolist() == [float(norm(v)) for v in vectors]


class _TwoRanks:
    """A communicator whose other rank holds the same parts."""

    def allreduce_sum(self, a):
        return 2.0 * np.asarray(a)


def test_on_ranks_the_squares_are_added_before_the_roots():
    rng = np.random.default_rng(1)
    vectors = [rng.standard_normal(100) for _ in range(3)]
    got = several_norms(get_backend("numpy"), comm=_TwoRanks())(*vectors)
    np.testing.assert_allclose(got, [np.sqrt(2.0) * np.linalg.norm(v) for v in vectors],
                               rtol=1e-15)


def test_a_vector_given_twice_has_its_norm_twice():
    rng = np.random.default_rng(2)
    a, b = rng.standard_normal(500), rng.standard_normal(500)
    backend = get_backend("numpy")
    _, norm = reductions(backend)
    got = several_norms(backend)(a, b, a, a)
    assert got.tolist() == [float(norm(v)) for v in (a, b, a, a)]
