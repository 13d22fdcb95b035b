"""Volume of fluid: PLIC geometry, fractions from a level set, conservative
advection (Weymouth and Yue 2010)."""
import math

import numpy as np
import pytest

from bubbleflow.flow import vof


def centres(n, h):
    x = (np.arange(n) + 0.5) * h
    return np.meshgrid(x, x)


def circle_fraction(xp, n, xc, yc, radius):
    h = 1.0 / n
    X, Y = centres(n, h)
    return vof.volume_fraction(xp.asarray(np.hypot(X - xc, Y - yc) - radius), h, h)


def stream_velocity(psi, hx, hy):
    """MAC faces from a stream function at the corners: discretely
    divergence-free to round-off, zero through walls where psi is constant."""
    u = (psi[1:, :] - psi[:-1, :]) / hy
    v = -(psi[:, 1:] - psi[:, :-1]) / hx
    return u, v


@pytest.mark.parametrize("lx,ly", [(1.0, 1.0), (0.3, 0.07)])
def test_inverse_then_forward_plic_returns_the_fraction(lx, ly, backend):
    xp = backend.xp
    rng = np.random.default_rng(0)
    n = 20000
    angle = rng.uniform(0.0, 2.0 * math.pi, n)
    mx, my = np.cos(angle), np.sin(angle)
    # Axis-aligned normals, both senses.
    mx[:400], my[:400] = 0.0, np.where(np.arange(400) % 2 == 0, 1.0, -1.0)
    mx[400:800], my[400:800] = np.where(np.arange(400) % 2 == 0, 1.0, -1.0), 0.0
    c = rng.uniform(0.0, 1.0, n)
    c[::7] = 0.0
    c[3::7] = 1.0
    c[5::11] = 1e-15
    c[6::13] = 1.0 - 1e-15
    mx, my, c = xp.asarray(mx), xp.asarray(my), xp.asarray(c)
    alpha = vof.line_constant(mx, my, c, lx, ly)
    back = vof.cut_fraction(mx, my, alpha, lx, ly)
    assert float(xp.max(xp.abs(back - c))) < 1e-12
    # c = 0 and c = 1 put the line through the first and last corner reached.
    corners = xp.stack([mx * x + my * y for x in (0.0, lx) for y in (0.0, ly)])
    empty, full = c == 0.0, c == 1.0
    assert float(xp.max(xp.abs(alpha - xp.min(corners, axis=0))[empty])) < 1e-15
    assert float(xp.max(xp.abs(alpha - xp.max(corners, axis=0))[full])) < 1e-15


def test_cut_fraction_matches_area_formulas(backend):
    xp = backend.xp
    # A corner triangle, a trapezoid and its complement in a 2 x 1 rectangle.
    mx = xp.asarray([1.0, 1.0, -1.0, 0.0])
    my = xp.asarray([1.0, 0.0, 0.0, 2.0])
    alpha = xp.asarray([0.5, 0.5, -0.5, 1.0])
    got = backend.to_host(vof.cut_fraction(mx, my, alpha, 2.0, 1.0))
    assert np.allclose(got, [0.125 / 2.0, 0.25, 0.75, 0.5], rtol=0, atol=1e-15)


@pytest.mark.parametrize("angle", [0.0, 0.3, 1.0, math.pi / 4, math.pi / 2, 2.5, 4.0])
def test_straight_line_is_reconstructed_exactly(angle, backend):
    xp = backend.xp
    n, h = 16, 1.0 / 16
    X, Y = centres(n, h)
    nx_, ny_ = math.cos(angle), math.sin(angle)
    phi = nx_ * (X - 0.52) + ny_ * (Y - 0.47)         # gas where phi < 0
    c = vof.volume_fraction(xp.asarray(phi), h, h)
    cut = (c > 0) & (c < 1)
    assert int(xp.sum(cut)) > 0
    # With the level set's normal: the same line in every cut cell.
    mx, my, alpha = vof.reconstruct(c, h, h, normal_from=xp.asarray(phi))
    exact_alpha = xp.asarray(0.5 * h * (nx_ + ny_) - phi)
    assert float(xp.max(xp.abs(mx - nx_)[cut])) < 1e-12
    assert float(xp.max(xp.abs(my - ny_)[cut])) < 1e-12
    assert float(xp.max(xp.abs(alpha - exact_alpha)[cut])) < 1e-12
    # Youngs' normals from c alone: first order, a few degrees off at most.
    mx, my, alpha = vof.reconstruct(c, h, h)
    inner = cut[1:-1, 1:-1]
    cos = xp.clip(mx * nx_ + my * ny_, -1.0, 1.0)[1:-1, 1:-1]
    assert math.degrees(math.acos(float(xp.min(cos[inner])))) < 5.0


def test_circle_area_converges_to_pi_r_squared(backend):
    xp = backend.xp
    radius = 0.25
    exact = math.pi * radius ** 2
    errors = []
    for n in (16, 32, 64, 128):
        c = circle_fraction(xp, n, 0.5, 0.5, radius)
        assert float(xp.min(c)) >= 0.0 and float(xp.max(c)) <= 1.0
        errors.append(abs(float(xp.sum(c)) / n ** 2 - exact) / exact)
    # Measured: 4.7e-3, 1.4e-3, 2.9e-4, 8.4e-5 (second order).
    assert all(b < 0.5 * a for a, b in zip(errors, errors[1:]))
    assert errors[-1] < 2e-4
    # Sub-cell cuts converge too, but their bilinear interpolation error is
    # larger than the single cut's (measured 1.4e-4 at n = 128, samples=3).
    h = 1.0 / 128
    X, Y = centres(128, h)
    c = vof.volume_fraction(xp.asarray(np.hypot(X - 0.5, Y - 0.5) - radius), h, h, samples=3)
    assert abs(float(xp.sum(c)) * h * h - exact) / exact < 4e-4


def test_advect_conserves_volume_in_a_uniform_stream(backend):
    xp = backend.xp
    n, h = 64, 1.0 / 64
    # Uniform on the interior faces, zero on the wall faces: the divergence
    # is nonzero in the wall cells only, which the circle never reaches.
    u = np.ones((n, n + 1))
    v = np.full((n + 1, n), 0.6)
    u[:, [0, -1]] = 0.0
    v[[0, -1], :] = 0.0
    u, v = xp.asarray(u), xp.asarray(v)
    c = circle_fraction(xp, n, 0.2, 0.25, 0.12)
    total = float(xp.sum(c))
    dt = 0.4 * h
    clipped = 0.0
    for step in range(100):
        info = {}
        c = vof.advect(c, u, v, dt, h, h, first_axis=step % 2, info=info)
        clipped += info["clipped"]
        assert info["excursion"] == 0.0
    assert abs(float(xp.sum(c)) - total) / total < 1e-12
    assert float(xp.min(c)) >= 0.0 and float(xp.max(c)) <= 1.0
    # The shape arrives where it should, nearly unchanged (measured L1
    # error 6.3e-4 against the exactly moved circle, of area 4.5e-2).
    moved = circle_fraction(xp, n, 0.2 + 100 * dt, 0.25 + 60 * dt, 0.12)
    assert float(xp.sum(xp.abs(c - moved))) * h * h < 1.3e-3
    assert abs(clipped) < 1e-15


def single_vortex(xp, n):
    h = 1.0 / n
    xs = np.arange(n + 1) * h
    XC, YC = np.meshgrid(xs, xs)
    psi = np.sin(np.pi * XC) ** 2 * np.sin(np.pi * YC) ** 2 / np.pi
    psi[0, :] = psi[-1, :] = psi[:, 0] = psi[:, -1] = 0.0
    u, v = stream_velocity(psi, h, h)
    return xp.asarray(u), xp.asarray(v), h


@pytest.mark.parametrize("normal_from_phi", [False, True])
def test_single_vortex_there_and_back(normal_from_phi, backend):
    xp = backend.xp
    n = 64
    u, v, h = single_vortex(xp, n)
    div = (u[:, 1:] - u[:, :-1]) / h + (v[1:, :] - v[:-1, :]) / h
    assert float(xp.max(xp.abs(div))) < 1e-11
    X, Y = centres(n, h)
    phi0 = xp.asarray(np.hypot(X - 0.5, Y - 0.75) - 0.15)
    c0 = vof.volume_fraction(phi0, h, h)
    c = c0
    half_period = 1.0                                 # T = 2
    umax = max(float(xp.max(xp.abs(u))), float(xp.max(xp.abs(v))))
    steps = math.ceil(half_period / (0.5 * h / umax))  # CFL <= 0.5
    dt = half_period / steps
    total = float(xp.sum(c0))
    drift = 0.0
    for step in range(2 * steps):
        sign = 1.0 if step < steps else -1.0
        # The level set is frozen here: enough to exercise the CLSVOF normals.
        normal_from = phi0 if normal_from_phi else None
        c = vof.advect(c, sign * u, sign * v, dt, h, h, first_axis=step % 2,
                       normal_from=normal_from)
        drift = max(drift, abs(float(xp.sum(c)) - total) / total)
        assert float(xp.min(c)) >= 0.0 and float(xp.max(c)) <= 1.0
    assert drift < 1e-12
    if not normal_from_phi:
        # Measured: L1 shape error 1.44e-3 at 64 x 64 (area pi 0.15^2 = 7.1e-2).
        shape_error = float(xp.sum(xp.abs(c - c0))) * h * h
        assert shape_error < 3e-3


def test_advect_leaves_its_input_and_checks_shapes(backend):
    xp = backend.xp
    c = circle_fraction(xp, 8, 0.5, 0.5, 0.2)
    before = c.copy()
    u = xp.zeros((8, 9))
    v = xp.zeros((9, 8))
    out = vof.advect(c, u, v, 0.01, 0.125, 0.125)
    assert out is not c and bool(xp.all(out == before)) and bool(xp.all(c == before))
    with pytest.raises(ValueError, match="expected"):
        vof.advect(c, v, u, 0.01, 0.125, 0.125)
    with pytest.raises(ValueError, match="first_axis"):
        vof.advect(c, u, v, 0.01, 0.125, 0.125, first_axis=2)
