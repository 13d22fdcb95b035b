"""Bubble diagnostics: the circularity of a resolved circle is 1 at t = 0 (up to
discretisation), and the contour area behind it."""
import math
import os

import numpy as np
import pytest

from bubbleflow.compute.backend import get_backend
from bubbleflow.case.config import load_case
from bubbleflow.flow.bubble_measures import bubble_diagnostics
from bubbleflow.flow.contour import contour_area
from bubbleflow.flow.navier_stokes import FlowSolver

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def _circle(n, radius=0.25, centre=(0.5, 0.5), ly=2.0):
    """Signed distance of a circle on an n x (ly n) grid of a 1 x ly domain."""
    h = 1.0 / n
    ny = int(round(ly * n))
    x = (np.arange(n) + 0.5) * h
    y = (np.arange(ny) + 0.5) * h
    X, Y = np.meshgrid(x, y)
    phi = np.hypot(X - centre[0], Y - centre[1]) - radius
    return phi, h, np.zeros((ny, n + 1)), np.zeros((ny + 1, n))


def test_circularity_of_a_circle_converges_to_one():
    errors = []
    for n in (20, 40, 80, 160):
        phi, h, u, v = _circle(n)
        d = bubble_diagnostics(phi, (u, v), (h, h), 1.5 * h)
        errors.append(d["circularity"] - 1.0)
        # Area and length of one polygon: never above 1 (isoperimetric).
        assert d["circularity"] <= 1.0
        assert d["contour_area"] == pytest.approx(math.pi * 0.25 ** 2, rel=2.0 * h * h / 0.0625)
    errors = np.abs(errors)
    # R = 10 cells (two_phase.yaml, 40 x 80) gave 1.0021 with the Heaviside area.
    assert errors[1] < 1e-3                    # measured 4.5e-4
    assert errors[-1] < 5e-5                   # measured 2.5e-5
    # Second order: about 4x smaller per doubling of the resolution.
    rates = errors[:-1] / errors[1:]
    assert np.all(rates > 3.5), rates


def test_circularity_off_grid_centres():
    rng = np.random.default_rng(3)
    for _ in range(5):
        c = rng.uniform(0.45, 0.55, size=2)
        phi, h, u, v = _circle(64, radius=0.2, centre=c, ly=1.0)
        d = bubble_diagnostics(phi, (u, v), (h, h), 1.5 * h)
        assert 1.0 - 1e-3 < d["circularity"] <= 1.0


def test_circularity_at_t0_of_the_two_phase_case():
    backend = get_backend("numpy")
    # 40 x 80 cells, R = 10 cells: the smoothed Heaviside area would give 1.0021.
    case = load_case(os.path.join(ROOT, "cases/two_phase.yaml"))
    solver = FlowSolver(case, backend)
    state = solver.initial_state()
    d = solver.diagnostics(state)
    assert abs(d["circularity"] - 1.0) < 1e-3, d["circularity"]


def test_contour_area_of_a_straight_interface():
    # Gas below y = 0.3 on the lattice of centres: exactly a rectangle.
    n = 16
    h = 1.0 / n
    x = (np.arange(n) + 0.5) * h
    Y = np.broadcast_to(x[:, None], (n, n))
    area = contour_area(Y - 0.3, (h, h))
    assert area == pytest.approx((0.3 - 0.5 * h) * (x[-1] - x[0]), rel=1e-12)
    # A tilted line: a trapezoid, exact too (the contour is exact for linear phi).
    X = np.broadcast_to(x[None, :], (n, n))
    phi = (Y - 0.3) - 0.2 * (X - 0.5)
    yl, yr = 0.3 + 0.2 * (x[0] - 0.5), 0.3 + 0.2 * (x[-1] - 0.5)
    exact = 0.5 * ((yl - x[0]) + (yr - x[0])) * (x[-1] - x[0])
    assert contour_area(phi, (h, h)) == pytest.approx(exact, rel=1e-12)


def test_contour_area_in_saddle_squares():
    # One lattice square, gas at a and c.  Centre liquid (mean >= 0): two
    # corner triangles of legs 1/2; centre gas: the square less two triangles.
    assert contour_area(np.array([[-1.0, 1.0], [1.0, -1.0]]), (1.0, 1.0)) == pytest.approx(0.25)
    assert contour_area(np.array([[-1.0, 1.0], [1.0, -2.0]]), (1.0, 1.0)) == \
        pytest.approx(1.0 - 2 * 0.5 * 0.5 * (1.0 / 3.0))
    # Liquid at a and c, gas connected through a gas centre: the square less
    # two triangles at a and c; liquid centre: two gas triangles at b and d.
    assert contour_area(np.array([[1.0, -1.0], [-1.0, 1.0]]), (2.0, 3.0)) == \
        pytest.approx(6.0 * 0.25)
    assert contour_area(np.array([[1.0, -2.0], [-2.0, 1.0]]), (1.0, 1.0)) == \
        pytest.approx(1.0 - 2 * 0.5 * (1 / 3) * (1 / 3))


def test_no_gas_and_all_gas():
    n = 8
    u, v = np.zeros((n, n + 1)), np.zeros((n + 1, n))
    d = bubble_diagnostics(np.ones((n, n)), (u, v), (0.1, 0.1), 0.15)
    assert d["contour_area"] == 0.0 and math.isnan(d["circularity"])
    d = bubble_diagnostics(-np.ones((n, n)), (u, v), (0.1, 0.1), 0.15)
    assert d["contour_area"] == pytest.approx((0.1 * (n - 1)) ** 2)
    assert math.isnan(d["circularity"])          # no contour, no perimeter
