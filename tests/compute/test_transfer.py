"""Small device arrays read together (Backend.to_host_many)."""
import numpy as np


def test_to_host_many_gives_each_array_its_values_shape_and_dtype(backend):
    """0-d, empty, non-contiguous, bool, int32 and float64 arrays read with
    one wait come back as host arrays equal to each; on a device they are
    copies, which stay as they were when the device arrays change."""
    xp = backend.xp
    rng = np.random.default_rng(3)
    host = [np.float64(2.5), rng.standard_normal(7), np.array([True, False, True]),
            np.arange(5, dtype=np.int32), np.zeros(0), rng.standard_normal((4, 6))]
    arrays = [xp.asarray(a) for a in host]
    arrays[-1] = arrays[-1][:, ::2]                  # a strided view
    host[-1] = host[-1][:, ::2]
    got = backend.to_host_many(arrays)
    assert len(got) == len(host)
    for g, h in zip(got, host):
        assert isinstance(g, np.ndarray)
        assert g.dtype == np.asarray(h).dtype and g.shape == np.shape(h)
        assert np.array_equal(g, h)
    if backend.on_device:
        arrays[1][...] = 0.0
        assert np.array_equal(got[1], host[1])
    assert backend.to_host_many([]) == []
