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


def test_reads_in_turn_and_in_threads_keep_their_values(backend):
    """Reads one after the other (a small one, then one larger than the
    last) and reads from several threads at once each give their own
    arrays' values, which the next read leaves as they were."""
    from concurrent.futures import ThreadPoolExecutor

    xp = backend.xp
    small, large = np.arange(3.0), np.arange(100_000.0)
    first = backend.to_host_many([xp.asarray(small)])[0]
    second = backend.to_host_many([xp.asarray(large), xp.asarray(small[::-1])])
    assert np.array_equal(first, small)
    assert np.array_equal(second[0], large) and np.array_equal(second[1], small[::-1])

    def read(k):
        values = [np.full(50 + k, float(k)), np.arange(k, dtype=np.int32)]
        return [backend.to_host_many([xp.asarray(v) for v in values]) for _ in range(20)]

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(read, range(8)))
    for k, reads in enumerate(results):
        for got in reads:
            assert np.array_equal(got[0], np.full(50 + k, float(k)))
            assert np.array_equal(got[1], np.arange(k, dtype=np.int32))


def test_host_blocks_cover_the_array_in_order_with_its_values(backend):
    """A field read in blocks of rows (Backend.host_blocks): the starts run
    by the block, the blocks are the rows' values (the last one short), also
    for a strided view, a 1-D, a 0-d and an empty array; each block is read
    before the next is asked for, as a writer does."""
    xp = backend.xp
    rng = np.random.default_rng(4)
    whole = rng.standard_normal((37, 5, 3))
    cases = [(whole, 8), (whole, 37), (whole, 100), (whole[:, ::2], 6), (whole[:, 0, 0], 10),
             (np.arange(4, dtype=np.int32).reshape(4, 1), 1)]
    for host, rows in cases:
        seen = []
        for start, block in backend.host_blocks(xp.asarray(host), rows):
            assert isinstance(block, np.ndarray) and block.dtype == host.dtype
            assert np.array_equal(block, host[start:start + rows])
            seen.append(start)
        assert seen == list(range(0, host.shape[0], rows))
    for host in (np.float64(2.5), np.zeros((0, 3))):
        (start, block), = list(backend.host_blocks(xp.asarray(host), 4))
        assert start == 0 and np.array_equal(block, host) and block.shape == np.shape(host)
