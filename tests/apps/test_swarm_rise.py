"""The swarm figure's rise velocity of the bubbles' gas: each sample's
bubbles weighted by their size, beside the plain mean over the bubbles."""
import numpy as np
import pytest

from bubbleflow.apps.plots_bubbles import _mean_rise, gas_weighted_rise


def _table(size_name):
    # Two samples: a large slow bubble and a small fast piece, then one bubble.
    return {"step": np.array([0, 0, 5]), "time": np.array([0.0, 0.0, 0.5]),
            size_name: np.array([3.0, 1.0, 2.0]),
            "velocity_y": np.array([1.0, 5.0, 0.25]), "velocity_z": np.array([1.0, 5.0, 0.25])}


@pytest.mark.parametrize("size_name, up", [("area", "y"), ("volume", "z")])
def test_the_gas_rise_weights_each_bubble_by_its_size(size_name, up):
    t, rise = gas_weighted_rise(_table(size_name), up)
    np.testing.assert_array_equal(t, [0.0, 0.5])
    assert rise[0] == pytest.approx((3 * 1.0 + 1 * 5.0) / 4)
    assert rise[1] == pytest.approx(0.25)


def test_the_panel_draws_both_means():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    try:
        _mean_rise(ax, {"y": np.arange(4.0)}, _table("area"))
        lines = {line.get_label(): line for line in ax.get_lines()}
        assert list(lines["mean over the bubbles"].get_ydata()) == [3.0, 0.25]
        assert list(lines["the bubbles' gas (size-weighted)"].get_ydata()) == [2.0, 0.25]
    finally:
        plt.close(fig)
