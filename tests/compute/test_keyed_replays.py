"""KeyedReplays' bookkeeping on the CPU, its capture a NumPy stand-in of a
CUDA graph (the function run again on the capture's buffers, its results
written into the arrays of the captured run, as a graph writes at the
addresses it captured): the first calls of a key run the function, the
next captures, later ones copy the inputs in and the results out; results
kept by a caller are not overwritten; a result returned twice is one copy;
a kind of key whose captures fail runs from then on while other kinds
replay, and its errors say why; at most ``kept`` graphs; keys are forgotten past SEEN_KEPT.  The
CUDA capture itself runs on the GPU (tests/flow/test_step_replays.py)."""
import numpy as np

from bubbleflow.compute import held_capture
from bubbleflow.compute.held_capture import KeyedReplays
from helpers.replays import record


def refuse(run, comm=None, why=None):
    return None


def affine(x, y):
    z = 2.0 * x + (0.0 if y is None else y)
    return z, [z, x + 1.0, None]


def test_calls_run_capture_then_replay_and_return_copies():
    replays = KeyedReplays(capture=record)
    x, y = np.arange(5.0), np.ones(5)
    results = [replays("k", affine, (x * k, y)) for k in range(5)]
    assert replays.counts == {"run": 1, "captured": 1, "replayed": 4}
    for k, (z, (z2, x1, none)) in enumerate(results):
        np.testing.assert_array_equal(z, 2.0 * k * x + y)
        np.testing.assert_array_equal(x1, k * x + 1.0)
        assert none is None
        if k >= 1:                                  # a replay: one copy for both
            assert z2 is z
    leaves, _ = replays._graphs["k"].capture.result
    assert all(r[0] is not leaf for r in results for leaf in leaves)
    none_in = replays("n", affine, (x, None))
    again = replays("n", affine, (3.0 * x, None))
    np.testing.assert_array_equal(none_in[0], 2.0 * x)
    np.testing.assert_array_equal(again[0], 6.0 * x)


def test_a_kind_whose_captures_fail_runs_and_the_others_replay():
    failing = ["host read"]

    def flaky(run, comm=None, why=None):
        if failing:
            why.append("a host read in the capture")
            return None
        return record(run)

    replays = KeyedReplays(capture=flaky, failures=2)
    x = np.arange(3.0)
    for k in range(6):
        np.testing.assert_array_equal(replays(("host read", 0.1), affine, (x + k, None))[0],
                                      2.0 * (x + k))
    assert replays.failed == 2 and not replays._graphs
    assert replays.errors == {"host read": "a host read in the capture"}
    failing.clear()
    for k in range(4):
        np.testing.assert_array_equal(replays(("launches", 0.1), affine, (x + k, None))[0],
                                      2.0 * (x + k))
    assert replays.counts["replayed"] == 3 and ("launches", 0.1) in replays._graphs
    never = KeyedReplays(capture=refuse, failures=1)
    for k in range(3):
        never("k", affine, (x, None))
    assert never.counts == {"run": 3, "captured": 0, "replayed": 0}
    assert never.errors == {"k": "the capture was refused"}


def test_at_most_kept_graphs_and_keys_forgotten():
    replays = KeyedReplays(capture=record, kept=2)
    x = np.arange(4.0)
    for k in range(12):
        got = replays(("step", k % 3), affine, (x + k, None))
        np.testing.assert_array_equal(got[0], 2.0 * (x + k))
    assert len(replays._graphs) <= 2
    forgetful = KeyedReplays(launched=10 ** 9)
    for k in range(held_capture.SEEN_KEPT + 10):
        out = forgetful(("step", 1e-3 * (k + 1)), lambda a: (2.0 * a, None), (x,))
        np.testing.assert_array_equal(out[0], 2.0 * x)
    assert forgetful.counts["run"] == held_capture.SEEN_KEPT + 10
    assert len(forgetful._seen) <= held_capture.SEEN_KEPT
