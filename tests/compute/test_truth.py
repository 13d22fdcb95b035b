"""Whole-array truth tests (compute.truth): each backend's answer against
NumPy's, for every place a non-finite value or a true value can sit."""
import numpy as np
import pytest

from bubbleflow.compute.truth import all_finite, any_true


SHAPES = [(1,), (7,), (13, 17), (5, 6, 7), (300, 1001)]


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("bad", [None, np.nan, np.inf, -np.inf])
@pytest.mark.parametrize("where", ["first", "middle", "last"])
def test_all_finite_finds_a_non_finite_value_anywhere(backend, shape, bad, where):
    a = np.random.default_rng(3).standard_normal(shape)
    if bad is not None:
        flat = a.reshape(-1)
        flat[{"first": 0, "middle": flat.size // 2, "last": -1}[where]] = bad
    got = all_finite(backend.xp.asarray(a))
    assert got.shape == () and bool(got) == bool(np.isfinite(a).all())


@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("where", [None, "first", "middle", "last"])
def test_any_true_finds_a_true_value_anywhere(backend, shape, where):
    a = np.zeros(shape, dtype=bool)
    if where is not None:
        flat = a.reshape(-1)
        flat[{"first": 0, "middle": flat.size // 2, "last": -1}[where]] = True
    got = any_true(backend.xp.asarray(a))
    assert got.shape == () and bool(got) == bool(a.any())


def test_views_and_other_dtypes_give_numpys_answer(backend):
    a = np.random.default_rng(4).standard_normal((40, 30))
    a[3, 7] = np.nan
    xa = backend.xp.asarray(a)
    assert bool(all_finite(xa[:, 8:])) and not bool(all_finite(xa[:, ::7]))
    assert bool(all_finite(backend.xp.asarray(a[:, 8:].astype(np.float32))))
    assert bool(any_true(xa > 3.5)) == bool((a > 3.5).any())
    assert bool(all_finite(backend.xp.arange(5)))          # integers are finite


@pytest.mark.gpu
def test_the_cuda_variants_answer_as_the_reference(cupy_backend):
    cp = cupy_backend.xp
    rng = np.random.default_rng(5)
    for shape in SHAPES:
        a = rng.standard_normal(shape)
        for value in (np.nan, np.inf):
            b = a.copy()
            b.reshape(-1)[rng.integers(b.size)] = value
            for arr in (a, b):
                x = cp.asarray(arr)
                assert bool(all_finite(x)) == bool(all_finite.reference(x))
                assert bool(any_true(x > 2.0)) == bool(any_true.reference(x > 2.0))
        assert all_finite.variant("cupy") is not all_finite.reference

