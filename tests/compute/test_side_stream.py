"""Work queued beside the current stream (Backend.side_stream)."""
import numpy as np


def test_side_work_runs_after_the_stream_and_before_a_join(backend):
    """The side work sees what the stream queued before it; what the stream
    queues after a join sees the side work's results."""
    xp = backend.xp
    n = 1 << 20
    a = xp.arange(n, dtype=np.float64)
    a *= 2.0                                   # queued on the current stream
    with backend.side_stream() as side:
        b = a + 1.0
        for _ in range(30):                    # keep the side stream busy (sqrt(b^2) == b)
            b = xp.sqrt(b * b)
    side.join()
    c = b * 3.0
    want = (np.arange(n, dtype=np.float64) * 2.0 + 1.0) * 3.0
    assert np.array_equal(backend.to_host(c), want)
    assert side.seconds > 0
