"""The 3-D benchmark's reference values and the comparison with them."""
import numpy as np
import pytest

from bubbleflow.apps.validation_3d import (JUDGED, benchmark_quantities, compare, load_reference,
                                           reference_spread)


def test_reference_rows_are_the_three_codes():
    ref = load_reference()
    assert set(ref) == {"DROPS", "NaSt3DGPF", "OpenFOAM"}
    spread = reference_spread()
    lo, hi = spread["max_rise_velocity"]
    assert 0.35 < lo < hi < 0.36
    lo, hi = spread["min_sphericity"]
    assert 0.95 < lo < hi < 0.96
    assert spread["centroid_end"][0] < spread["centroid_end"][1]


def test_quantities_of_a_series_and_the_verdicts():
    t = np.linspace(0.0, 3.0, 601)
    series = {"time": t,
              "rise_velocity": 0.355 - 0.2 * (t - 0.87) ** 2,
              "sphericity": 0.958 + 0.01 * (t - 2.0) ** 2 + 0.03 * (t == 0),
              "centroid_z": 0.5 + 0.32 * t,
              "volume": np.full_like(t, 0.0654)}
    q = benchmark_quantities(series)
    assert q["max_rise_velocity"] == pytest.approx(0.355, abs=1e-9)
    assert q["t_max_rise_velocity"] == pytest.approx(0.87, abs=1e-6)
    assert q["min_sphericity"] == pytest.approx(0.958, abs=1e-9)
    assert q["centroid_end"] == pytest.approx(1.46) and q["volume_change"] == 0.0
    rows = {r.quantity: r for r in compare(q)}
    assert all(rows[k].within for k in JUDGED)
    q["max_rise_velocity"] = 0.34
    assert not {r.quantity: r for r in compare(q)}["max_rise_velocity"].within
