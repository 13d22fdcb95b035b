"""The swarm figure's void-fraction profile counts the bubbles' gas: a gas
layer above a free surface (a region whose cores reach the top plane, as the
bubble tracker defines it) is left out, with its cells of partial gas."""
import numpy as np
import pytest

from bubbleflow.apps.plots_bubbles import _void_fraction, void_profile


def _column(ny=40, nx=20):
    """A gas layer over rows 32.. (row 31 partly gas) and one bubble: rows
    10-13, columns 5-8 full, a ring of partial cells around it."""
    c = np.zeros((ny, nx))
    c[32:] = 1.0
    c[31] = 0.3
    c[9:15, 4:10] = 0.2
    c[10:14, 5:9] = 1.0
    return c


def test_a_gas_layer_is_left_out_of_the_profile():
    c = _column()
    profile, layers = void_profile(c, (0.05, 0.05))
    assert layers == 1
    assert np.all(profile[31:] == 0.0)
    np.testing.assert_array_equal(profile[:31], c[:31].mean(axis=1))
    assert profile[11] == pytest.approx((4 * 1.0 + 2 * 0.2) / 20)


def test_without_a_layer_the_profile_is_the_planes_mean():
    c = _column()
    c[31:] = 0.0
    profile, layers = void_profile(c, (0.05, 0.05))
    assert layers == 0
    np.testing.assert_array_equal(profile, c.mean(axis=1))


def test_a_bubble_under_the_surface_keeps_its_gas():
    """A bubble whose partial cells touch the layer's: each cell counts with
    its nearest core, so the bubble's own gas stays in the profile."""
    c = _column()
    c[26:30, 5:9] = 1.0                      # cores in rows 26-29
    c[30, 4:10] = 0.2                        # their partial gas, touching row 31's
    profile, layers = void_profile(c, (0.05, 0.05))
    assert layers == 1
    assert profile[28] == pytest.approx(4 / 20)
    assert profile[30] == pytest.approx(6 * 0.2 / 20)
    assert profile[31] == 0.0 and profile[35] == 0.0


def test_a_3d_layer_is_left_out():
    c = np.zeros((12, 6, 6))
    c[9:] = 1.0
    c[3:5, 2:4, 2:4] = 1.0
    profile, layers = void_profile(c, (0.1, 0.1, 0.1))
    assert layers == 1 and np.all(profile[9:] == 0.0)
    assert profile[3] == pytest.approx(4 / 36)


def test_the_panel_says_the_layer_is_left_out():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    c = _column()
    run = {"x": (np.arange(20) + 0.5) * 0.05, "y": (np.arange(40) + 0.5) * 0.05,
           "fields": {"c": c, "time": 0.3}}
    fig, ax = plt.subplots()
    try:
        _void_fraction(ax, run)
        assert ax.get_xlabel().endswith("from volume fraction c, the gas layer left out")
        assert ax.get_title() == "void fraction profile of the bubbles at t = 0.3 s"
        line = ax.get_lines()[0]
        assert np.all(line.get_xdata()[31:] == 0.0)
        assert ax.get_xlim()[1] < 0.5              # the bubbles' scale, not the layer's 1
    finally:
        plt.close(fig)
