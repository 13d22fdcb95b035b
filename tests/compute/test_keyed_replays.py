"""KeyedReplays' bookkeeping on the CPU: calls before a key's capture run
the function itself, and the count of calls a key has had is forgotten
past SEEN_KEPT keys (a key that holds a step's length may change at every
step).  The captures and replays run on the GPU (tests/flow/test_step_replays.py)."""
import numpy as np

from bubbleflow.compute import held_capture
from bubbleflow.compute.held_capture import KeyedReplays


def test_calls_before_a_capture_run_the_function_and_keys_are_forgotten():
    replays = KeyedReplays(launched=10 ** 9)
    x = np.arange(4.0)
    for k in range(held_capture.SEEN_KEPT + 10):
        out = replays(("step", 1e-3 * (k + 1)), lambda a: (2.0 * a, None), (x,))
        np.testing.assert_array_equal(out[0], 2.0 * x)
        assert out[1] is None
    assert replays.counts == {"run": held_capture.SEEN_KEPT + 10, "captured": 0,
                              "replayed": 0}
    assert len(replays._seen) <= held_capture.SEEN_KEPT
