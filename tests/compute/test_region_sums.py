"""Sums over labelled cells (compute.regions.region_sums): the backends'
sums against a plain loop, and the same bits on every call."""
import numpy as np
import pytest

from bubbleflow.compute import regions
from bubbleflow.compute.regions import region_sums


def labelled(shape, count, seed=5):
    rng = np.random.default_rng(seed)
    labels = rng.integers(0, count + 1, size=shape).astype(np.int32)
    weights = [rng.standard_normal(shape), rng.random(shape) * (labels > 0)]
    weights[0][rng.random(shape) < 0.3] = 0.0          # cells that add nothing
    return labels, weights


def loop_sums(labels, weights, count):
    return [np.array([sum(float(v) for v, l in zip(w.ravel(), labels.ravel()) if l == k)
                      for k in range(1, count + 1)]) for w in weights]


@pytest.mark.parametrize("shape,count", [((13, 17), 4), ((5, 6, 7), 9), ((8, 8), 1)])
def test_region_sums_are_the_sums_of_each_labels_cells(backend, shape, count):
    labels, weights = labelled(shape, count)
    got = region_sums(backend.xp.asarray(labels), [backend.xp.asarray(w) for w in weights], count)
    assert len(got) == len(weights)
    for g, want in zip(got, loop_sums(labels, weights, count)):
        assert isinstance(g, np.ndarray) and g.dtype == np.float64 and g.shape == (count,)
        np.testing.assert_allclose(g, want, rtol=1e-13, atol=1e-13)


def test_labels_with_no_cells_sum_to_zero(backend):
    labels = np.zeros((6, 6), dtype=np.int32)
    labels[2, 3] = 3
    got = region_sums(backend.xp.asarray(labels), [backend.xp.ones((6, 6))], 4)
    assert got[0].tolist() == [0.0, 0.0, 1.0, 0.0]


@pytest.mark.parametrize("count", [2, 9])      # a sum a label; sorted chunks
def test_region_sums_give_the_same_bits_on_every_call(backend, monkeypatch, count):
    """A few labels, and many spanning several chunks: the sums do not
    depend on the order the device happens to add in."""
    monkeypatch.setattr(regions, "SUM_CHUNK", 64)
    labels, weights = labelled((96, 80), count, seed=11)
    xp = backend.xp
    args = (xp.asarray(labels), [xp.asarray(w) for w in weights], count)
    first = region_sums(*args)
    for _ in range(5):
        again = region_sums(*args)
        for a, b in zip(first, again):
            assert a.tobytes() == b.tobytes()
    for g, want in zip(first, region_sums.reference(labels, weights, count)):
        np.testing.assert_allclose(g, want, rtol=1e-12)
