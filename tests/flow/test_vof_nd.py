"""The volume of fluid of any dimension (vof_nd) and CLSVOF in FlowSolverND.

3-D: the PLIC volume and its inverse against sampling and each other, a
sphere's fraction, conservative bounded advection, the level set rebuilt
from the planes, a few steps of a 3-D CLSVOF bubble and its restart.  2-D:
every function gives vof.py's numbers, and FlowSolverND the 2-D solver's.
"""
import math
import os

import h5py
import numpy as np
import pytest

from bubbleflow.case.config import load_case
from bubbleflow.flow import levelset_nd, vof, vof_nd
from bubbleflow.flow.navier_stokes import FlowSolver
from bubbleflow.flow.navier_stokes_nd import FlowSolverND
from helpers.cli import ROOT, run_interrupted

RISING_3D = os.path.join(ROOT, "cases/rising_bubble_3d.yaml")
SMALL_3D = ["grid.nx=12", "grid.ny=12", "grid.nz=24", "levelset.method=clsvof"]


def _random_planes(rng, n):
    """Normals with every sign, some axis-aligned or nearly so, and fractions
    down to rounding distance from 0 and 1."""
    m = rng.standard_normal((3, n))
    m[:, : n // 5] *= rng.random((3, n // 5)) < 0.5          # zero components
    m[:, n // 5: n // 4] *= np.where(rng.random((3, n // 4 - n // 5)) < 0.4, 1e-9, 1.0)
    m[2, :5] = 1.0
    m = m[:, np.abs(m).sum(axis=0) > 0]
    c = rng.random(m.shape[1])
    c[:50] *= 1e-7
    c[50:100] = 1.0 - 1e-7 * c[50:100]
    c[100:110] = [0.0, 1.0, 0.5, 0.5, 1e-300, 1.0 - 1e-16, 0.25, 0.75, 1 / 6, 5 / 6]
    return m, c


@pytest.mark.parametrize("lengths", [(1.0, 1.0, 1.0), (0.3, 0.07, 1.1)])
def test_plic_3d_inverse_then_forward_returns_the_fraction(lengths, backend):
    xp = backend.xp
    m, c = _random_planes(np.random.default_rng(1), 20000)
    normal = tuple(xp.asarray(x) for x in m)
    alpha = vof_nd.plane_constant(normal, xp.asarray(c), lengths)
    back = backend.to_host(vof_nd.cut_fraction(normal, alpha, lengths))
    assert np.abs(back - c).max() < 2e-15
    # Empty and full: the planes through the first and last corner reached.
    low = backend.to_host(vof_nd.plane_constant(normal, xp.zeros_like(alpha), lengths))
    corner = sum(np.minimum(mi, 0.0) * li for mi, li in zip(m, lengths))
    assert np.abs(low - corner).max() < 1e-15


def test_plic_3d_volume_against_sampling_and_closed_forms(backend):
    xp = backend.xp
    rng = np.random.default_rng(2)
    lengths = (0.5, 0.8, 1.3)
    k = 64
    g = (np.arange(k) + 0.5) / k
    Z, Y, X = np.meshgrid(g * lengths[2], g * lengths[1], g * lengths[0], indexing="ij")
    m = rng.standard_normal((3, 40))
    alpha = rng.uniform(-0.5, 1.5, 40)
    f = backend.to_host(vof_nd.cut_fraction(tuple(xp.asarray(x) for x in m),
                                            xp.asarray(alpha), lengths))
    sampled = [np.mean(a * X + b * Y + c * Z <= al) for (a, b, c), al in zip(m.T, alpha)]
    assert np.abs(f - sampled).max() < 1e-3          # the midpoint rule's O(1/k)
    # A corner tetrahedron and a slab parallel to a face, exactly.
    one = lambda *v: tuple(xp.asarray([x]) for x in v)             # noqa: E731
    tet = vof_nd.cut_fraction(one(1.0, 2.0, 3.0), xp.asarray([0.3]), (1.0, 1.0, 1.0))
    assert float(tet[0]) == pytest.approx(0.3 ** 3 / (6 * 1 * 2 * 3), rel=1e-14)
    slab = vof_nd.cut_fraction(one(0.0, -1.0, 0.0), xp.asarray([-0.2]), (1.0, 0.5, 2.0))
    assert float(slab[0]) == pytest.approx(0.6, rel=1e-14)


def _sphere(n, radius=0.25, centre=(0.5, 0.47, 0.53)):
    h = 1.0 / n
    g = (np.arange(n) + 0.5) * h
    z, y, x = np.meshgrid(g, g, g, indexing="ij")
    phi = np.sqrt((x - centre[0]) ** 2 + (y - centre[1]) ** 2 + (z - centre[2]) ** 2) - radius
    return phi, (h, h, h), (x, y, z)


def test_sphere_volume_fraction(backend):
    xp = backend.xp
    exact = 4.0 / 3.0 * math.pi * 0.25 ** 3
    phi, spacing, _ = _sphere(32)                          # R = 8 cells
    c = backend.to_host(vof_nd.volume_fraction(xp.asarray(phi), spacing))
    assert c.min() == 0.0 and c.max() == 1.0
    # One cut per cell: second order, too large by ~0.26 (h/R)^2.
    assert 0 < c.sum() * spacing[0] ** 3 / exact - 1 < 5e-3
    for n in (16, 24):                                     # R = 4 and 6 cells
        phi, spacing, _ = _sphere(n)
        c = backend.to_host(vof_nd.volume_fraction(xp.asarray(phi), spacing, samples=4,
                                                   fit="quadratic"))
        assert abs(c.sum() * spacing[0] ** 3 / exact - 1) < (1e-3 if n == 16 else 5e-4)


def _fields_2d():
    ny, nx = 24, 18
    hx, hy = 1 / 18, 2 / 24
    y, x = np.meshgrid((np.arange(ny) + .5) * hy, (np.arange(nx) + .5) * hx, indexing="ij")
    phi = np.sqrt((x - .5) ** 2 + (y - .9) ** 2) - .25 + 0.02 * np.sin(7 * x)
    xn, yn = np.arange(nx + 1) * hx, np.arange(ny + 1) * hy
    psi = 0.05 * np.sin(np.pi * xn)[None, :] * np.sin(np.pi * yn / 2)[:, None]
    u = (psi[1:, :] - psi[:-1, :]) / hy
    v = -(psi[:, 1:] - psi[:, :-1]) / hx
    return phi, u, v, hx, hy


def test_the_nd_code_gives_vof_numbers_in_2d(backend):
    xp, h = backend.xp, backend.to_host
    phi, u, v, hx, hy = (xp.asarray(a) if isinstance(a, np.ndarray) else a for a in _fields_2d())

    def same(a, b, tol=1e-15):
        np.testing.assert_allclose(h(a), h(b), rtol=0, atol=tol)

    same(vof_nd.volume_fraction(phi, (hx, hy)), vof.volume_fraction(phi, hx, hy))
    same(vof_nd.volume_fraction(phi, (hx, hy), 3), vof.volume_fraction(phi, hx, hy, 3))
    c = vof.volume_fraction(phi, hx, hy)
    for normal_from in (None, phi):
        for a, b in zip(vof_nd.interface_normal(c, (hx, hy), normal_from),
                        vof.interface_normal(c, hx, hy, normal_from)):
            same(a, b)
        for first in (0, 1):
            same(vof_nd.advect(c, (u, v), 0.3, (hx, hy), first, normal_from),
                 vof.advect.reference(c, u, v, 0.3, hx, hy, first, normal_from))
    for band, reach in ((3, None), (7, 8)):
        mine, theirs = {}, {}
        same(vof_nd.redistance(phi, c, (hx, hy), band, reach, info=mine),
             vof.redistance.reference(phi, c, hx, hy, band, reach, info=theirs), 0.0)
        assert mine == theirs
    on_line = xp.asarray((np.arange(24) < 10)[:, None] * np.ones((1, 18)))
    same(vof_nd.redistance(phi, on_line, (hx, hy)), vof.redistance.reference(phi, on_line, hx, hy))
    d_nd = vof_nd.gas_diagnostics(c, (u, v), (hx, hy))
    d_2 = vof.gas_diagnostics(c, v, hx, hy)
    assert d_nd["volume"] == pytest.approx(d_2["area"], rel=1e-15)
    for key in ("centroid_x", "centroid_y", "rise_velocity"):
        assert d_nd[key] == pytest.approx(d_2[key], rel=1e-14)


def _swirl(n, amplitude):
    """A 3-D divergence-free MAC field from two stream functions (on the
    x-z and y-z edges): discretely divergence-free to rounding, zero
    through the walls, rotating and shearing the sphere."""
    h = 1.0 / n
    nodes = np.arange(n + 1) * h
    cells = (np.arange(n) + 0.5) * h
    # psi1(x, z) sin(pi y): u = d psi1/dz, w = -d psi1/dx.
    zz, yy, xx = np.meshgrid(nodes, cells, nodes, indexing="ij")
    psi1 = amplitude * np.sin(np.pi * xx) ** 2 * np.sin(np.pi * zz) ** 2 * (1 + np.sin(np.pi * yy))
    # psi2(y, z) cos(pi x): v = d psi2/dz, w -= d psi2/dy.
    zz, yy, xx = np.meshgrid(nodes, nodes, cells, indexing="ij")
    psi2 = 0.5 * amplitude * np.sin(2 * np.pi * yy) * np.sin(np.pi * zz) ** 2 * np.cos(np.pi * xx)
    u = (psi1[1:] - psi1[:-1]) / h
    w = -(psi1[:, :, 1:] - psi1[:, :, :-1]) / h
    v = (psi2[1:] - psi2[:-1]) / h
    w = w - (psi2[:, 1:] - psi2[:, :-1]) / h
    return u, v, w


def _face_shapes(n):
    return ((n, n, n + 1), (n, n + 1, n), (n + 1, n, n))


@pytest.mark.parametrize("flow", ["uniform", "swirl"])
def test_3d_advection_conserves_and_stays_bounded(flow, backend):
    xp, h_ = backend.xp, backend.to_host
    n, steps = 20, 12
    phi, spacing, _ = _sphere(n, radius=0.2)
    h = spacing[0]
    if flow == "uniform":
        # Uniform on every face: divergence-free; the gas stays off the walls.
        velocity = tuple(np.full(s, speed) for s, speed in zip(_face_shapes(n), (1.0, -0.6, 0.8)))
    else:
        velocity = _swirl(n, 0.1)
    velocity = tuple(xp.asarray(f) for f in velocity)
    dt = 0.45 * h / max(float(xp.abs(f).max()) for f in velocity)
    c = vof_nd.volume_fraction(xp.asarray(phi), spacing)
    c0 = c
    total0 = vof_nd.gas_volume(c, spacing)
    for step in range(steps):
        info = {}
        c = vof_nd.advect(c, velocity, dt, spacing, first_axis=step % 3, info=info)
        assert abs(info["clipped"]) < 1e-15 and info["excursion"] == 0.0
    c = h_(c)
    assert abs(c.sum() * h ** 3 - total0) / total0 < 1e-12
    assert c.min() >= 0.0 and c.max() <= 1.0
    if flow == "uniform":
        before = vof_nd.gas_diagnostics(c0, velocity, spacing)
        after = vof_nd.gas_diagnostics(xp.asarray(c), velocity, spacing)
        moved = [after[k] - before[k] for k in ("centroid_x", "centroid_y", "centroid_z")]
        np.testing.assert_allclose(moved, np.array([1.0, -0.6, 0.8]) * dt * steps, atol=0.05 * h)
        assert after["rise_velocity"] == pytest.approx(0.8, rel=1e-14)


def test_3d_clsvof_loop_keeps_the_volume_and_one_interface(backend):
    """c advected with the level set's normals, the level set advected and
    rebuilt from the planes, as the flow step does."""
    xp, h_ = backend.xp, backend.to_host
    n = 16
    phi, spacing, _ = _sphere(n, radius=0.22)
    velocity = tuple(xp.asarray(f) for f in _swirl(n, 0.1))
    dt = 0.4 * spacing[0] / max(float(xp.abs(f).max()) for f in velocity)
    phi = xp.asarray(phi)
    c = vof_nd.volume_fraction(phi, spacing)
    total0 = vof_nd.gas_volume(c, spacing)
    for step in range(6):
        c_new = vof_nd.advect(c, velocity, dt, spacing, step % 3, normal_from=phi)
        phi = levelset_nd.advect(phi, velocity, dt, spacing)
        info = {}
        phi = vof_nd.redistance(phi, c_new, spacing, band=3, reach=4, info=info)
        c = c_new
        assert info["sign_conflicts"] <= 2
    c, phi = h_(c), h_(phi)
    assert abs(c.sum() * spacing[0] ** 3 - total0) / total0 < 1e-12
    assert c.min() >= 0.0 and c.max() <= 1.0
    assert np.all(phi[c == 1.0] < 0) and np.all(phi[c == 0.0] > 0)


def test_3d_redistance_of_a_plane_and_a_sphere(backend):
    xp, h_ = backend.xp, backend.to_host
    n = 20
    _, spacing, (x, y, z) = _sphere(n)
    h = spacing[0]
    m = np.array([0.3, 0.5, 0.8]) / np.linalg.norm([0.3, 0.5, 0.8])
    exact = m[0] * (x - 0.52) + m[1] * (y - 0.47) + m[2] * (z - 0.51)
    c = vof_nd.volume_fraction(xp.asarray(exact), spacing)
    # Any level set with the plane's normals will do: here 2.5 times the distance.
    info = {}
    phi = h_(vof_nd.redistance(xp.asarray(2.5 * exact), c, spacing, info=info))
    assert info["sign_conflicts"] == 0
    # Where the foot of the perpendicular lies in the box, the distance is exact.
    feet = [q - exact * mq for q, mq in zip((x, y, z), m)]
    inside = np.all([(f > 0) & (f < 1) for f in feet], axis=0) & (np.abs(exact) < 3 * h)
    assert inside.sum() > 1000
    assert np.abs(phi - exact)[inside].max() < 1e-13
    # A sphere: the distance to its PLIC planes, within a tenth of a cell.
    exact, spacing, _ = _sphere(n)
    c = vof_nd.volume_fraction(xp.asarray(exact), spacing)
    phi = h_(vof_nd.redistance(xp.asarray(exact), c, spacing, band=3))
    band = np.abs(exact) < 3 * h
    assert np.abs(phi - exact)[band].max() < 0.1 * h
    c = h_(c)
    assert np.all(phi[c == 1.0] < 0) and np.all(phi[c == 0.0] > 0)


def test_3d_clsvof_flow_steps_keep_the_gas_volume(backend):
    case = load_case(RISING_3D, SMALL_3D)
    solver = FlowSolverND(case, backend)
    state = solver.initial_state()
    v0 = solver.diagnostics(state)["volume"]
    assert v0 == pytest.approx(4 / 3 * math.pi * 0.25 ** 3, rel=2e-3)      # R = 3 cells
    for _ in range(3):
        state, report = solver.step(state)
        assert report.record.converged
        assert abs(report.diagnostics["volume"] - v0) / v0 < 1e-10
    c, phi = backend.to_host(state.c), backend.to_host(state.phi)
    assert np.isfinite(phi).all() and all(np.isfinite(backend.to_host(f)).all()
                                          for f in state.velocity)
    assert c.min() >= 0.0 and c.max() <= 1.0
    assert np.all(phi[c == 1.0] < 0) and np.all(phi[c == 0.0] > 0)
    assert report.diagnostics["rise_velocity"] > 0 and report.diagnostics["centroid_z"] > 0.5


def test_flow_solver_nd_clsvof_steps_like_the_2d_solver(backend):
    case = load_case(os.path.join(ROOT, "cases/hysing_case2.yaml"),
                     ["grid.nx=20", "grid.ny=40", "solver.deflation.subdomains=[4,4]",
                      "levelset.method=clsvof", "momentum.viscosity=explicit",
                      "solver.rtol=1e-12"])
    two, nd = FlowSolver(case, backend), FlowSolverND(case, backend)
    a, b = two.initial_state(), nd.initial_state()
    for _ in range(3):
        a, ra = two.step(a)
        b, rb = nd.step(b)
        assert rb.dt == pytest.approx(ra.dt, rel=1e-14)
        assert rb.diagnostics["volume"] == pytest.approx(ra.diagnostics["area"], rel=1e-13)
    h = backend.to_host
    for x, y in ((a.c, b.c), (a.phi, b.phi), (a.u, b.u), (a.v, b.v)):
        np.testing.assert_allclose(h(y), h(x), rtol=0, atol=1e-10 * max(np.abs(h(x)).max(), 1))


def test_3d_clsvof_run_writes_c_and_restarts(tmp_path):
    common = ["--backend", "numpy", "-q", "--no-progress", "--set", "output.interval=0.1",
              *[x for o in SMALL_3D for x in ("--set", o)]]
    full, _, cont = run_interrupted(RISING_3D, tmp_path, common, 0.1, 0.2)
    with h5py.File(full) as a, h5py.File(cont) as b:
        assert a["fields/c"].shape == (3, 24, 12, 12)
        np.testing.assert_array_equal(a["fields/c"][-1], b["fields/c"][-1])
        np.testing.assert_array_equal(a["fields/phi"][-1], b["fields/phi"][-1])
        volume = a["diagnostics/volume"][()]
        assert np.abs(volume / volume[0] - 1).max() < 1e-10
