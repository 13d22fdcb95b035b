"""The volume of fluid in 3-D, the gas's quantities on slabs, and CLSVOF
in FlowSolver.

3-D: the PLIC volume and its inverse against sampling and each other, a
sphere's fraction, conservative bounded advection, the level set rebuilt
from the planes, the gas diagnostics (one process and slabs), a few steps of
a 3-D CLSVOF bubble and its restart; FlowSolver steps a 2-D CLSVOF flow as
the 2-D solver does.
"""
import math
import os

import h5py
import numpy as np
import pytest

from bubbleflow.case.config import load_case
from bubbleflow.flow import levelset
from bubbleflow.flow.padding import WALLS
from bubbleflow.flow.plic import cut_fraction, plane_constant
from bubbleflow.flow.vof_advection import advect
from bubbleflow.flow.vof_diagnostics import gas_diagnostics, gas_quantities, gas_sums, gas_volume
from bubbleflow.flow.vof_fraction import volume_fraction
from bubbleflow.flow.vof_redistance import redistance
from bubbleflow.flow.navier_stokes import FlowSolver
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
    alpha = plane_constant(normal, xp.asarray(c), lengths)
    back = backend.to_host(cut_fraction(normal, alpha, lengths))
    assert np.abs(back - c).max() < 2e-15
    # Empty and full: the planes through the first and last corner reached.
    low = backend.to_host(plane_constant(normal, xp.zeros_like(alpha), lengths))
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
    f = backend.to_host(cut_fraction(tuple(xp.asarray(x) for x in m),
                                     xp.asarray(alpha), lengths))
    sampled = [np.mean(a * X + b * Y + c * Z <= al) for (a, b, c), al in zip(m.T, alpha)]
    assert np.abs(f - sampled).max() < 1e-3          # the midpoint rule's O(1/k)
    # A corner tetrahedron and a slab parallel to a face, exactly.
    one = lambda *v: tuple(xp.asarray([x]) for x in v)             # noqa: E731
    tet = cut_fraction(one(1.0, 2.0, 3.0), xp.asarray([0.3]), (1.0, 1.0, 1.0))
    assert float(tet[0]) == pytest.approx(0.3 ** 3 / (6 * 1 * 2 * 3), rel=1e-14)
    slab = cut_fraction(one(0.0, -1.0, 0.0), xp.asarray([-0.2]), (1.0, 0.5, 2.0))
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
    c = backend.to_host(volume_fraction(xp.asarray(phi), spacing))
    assert c.min() == 0.0 and c.max() == 1.0
    # One cut per cell: second order, too large by ~0.26 (h/R)^2.
    assert 0 < c.sum() * spacing[0] ** 3 / exact - 1 < 5e-3
    for n in (16, 24):                                     # R = 4 and 6 cells
        phi, spacing, _ = _sphere(n)
        c = backend.to_host(volume_fraction(xp.asarray(phi), spacing, samples=4,
                                            fit="quadratic"))
        assert abs(c.sum() * spacing[0] ** 3 / exact - 1) < (1e-3 if n == 16 else 5e-4)


def _cut_shapes(nd):
    """Level sets whose quadratic models bend inside the cells: a sphere
    (circle) off the grid's centre, two bubbles under a wavy free surface
    (the kinks of ``min``), a bubble cut by the walls, and noise of about
    a cell on a plane; anisotropic cells."""
    rng = np.random.default_rng(5 + nd)
    cells = (20, 14, 26)[:nd]
    spacing = (0.05, 0.07, 0.04)[:nd]
    axes = [(np.arange(n) + 0.5) * h for n, h in zip(cells, spacing)]
    x = np.meshgrid(*axes[::-1], indexing="ij")[::-1]           # x first, grid shape

    def ball(centre, radius):
        return np.sqrt(sum((xa - ca) ** 2 for xa, ca in zip(x, centre))) - radius

    top = x[-1].max()
    yield ball((0.43, 0.52, 0.47)[:nd], 0.27)
    yield np.minimum(np.minimum(ball((0.3, 0.35, 0.3)[:nd], 0.15),
                                ball((0.62, 0.5, 0.55)[:nd], 0.2)),
                     0.8 * top - x[-1] + 0.03 * np.sin(9.0 * x[0]))
    yield ball((0.0,) * nd, 0.4)
    yield x[0] - 0.4 + 0.6 * x[-1] + 0.04 * rng.standard_normal(x[0].shape)


@pytest.mark.parametrize("nd", [2, 3])
def test_the_quadratic_cuts_of_the_cells_near_the_interface_are_every_cells(backend, nd,
                                                                           monkeypatch):
    """The sub-cells are cut where a plane may reach them; elsewhere 0 or 1
    by phi's sign: the bits of cutting every cell (the array code's test;
    the kernel's is its twin, tests/flow/test_vof_fraction_kernels.py)."""
    from bubbleflow.flow import vof_fraction

    xp = backend.xp
    spacing = (0.05, 0.07, 0.04)[:nd]
    real = vof_fraction._may_be_cut
    for phi in _cut_shapes(nd):
        phi = xp.asarray(phi)
        seen = []
        with monkeypatch.context() as m:
            m.setattr(vof_fraction, "_may_be_cut", lambda *a: seen.append(real(*a)) or seen[-1])
            ours = vof_fraction.volume_fraction.reference(phi, spacing, samples=4,
                                                          fit="quadratic")
        near = seen[0]
        assert 0 < int(xp.count_nonzero(near)) < 0.7 * phi.size
        with monkeypatch.context() as m:
            m.setattr(vof_fraction, "_may_be_cut", lambda phi, *a: xp.ones(phi.shape, bool))
            every = vof_fraction.volume_fraction.reference(phi, spacing, samples=4,
                                                           fit="quadratic")
        assert bool(xp.array_equal(ours, every))
        cut = (every > 0.0) & (every < 1.0)
        assert not bool(xp.any(cut & ~near))               # no cut cell left out


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
    c = volume_fraction(xp.asarray(phi), spacing)
    c0 = c
    total0 = gas_volume(c, spacing)
    for step in range(steps):
        info = {}
        c = advect(c, velocity, dt, spacing, first_axis=step % 3, info=info)
        assert abs(info["clipped"]) < 1e-15 and info["excursion"] == 0.0
    c = h_(c)
    assert abs(c.sum() * h ** 3 - total0) / total0 < 1e-12
    assert c.min() >= 0.0 and c.max() <= 1.0
    if flow == "uniform":
        before = gas_diagnostics(c0, velocity, spacing)
        after = gas_diagnostics(xp.asarray(c), velocity, spacing)
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
    c = volume_fraction(phi, spacing)
    total0 = gas_volume(c, spacing)
    for step in range(6):
        c_new = advect(c, velocity, dt, spacing, step % 3, normal_from=phi)
        phi = levelset.advect(phi, velocity, dt, spacing)
        info = {}
        phi = redistance(phi, c_new, spacing, band=3, reach=4, info=info)
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
    c = volume_fraction(xp.asarray(exact), spacing)
    # Any level set with the plane's normals will do: here 2.5 times the distance.
    info = {}
    phi = h_(redistance(xp.asarray(2.5 * exact), c, spacing, info=info))
    assert info["sign_conflicts"] == 0
    # Where the foot of the perpendicular lies in the box, the distance is exact.
    feet = [q - exact * mq for q, mq in zip((x, y, z), m)]
    inside = np.all([(f > 0) & (f < 1) for f in feet], axis=0) & (np.abs(exact) < 3 * h)
    assert inside.sum() > 1000
    assert np.abs(phi - exact)[inside].max() < 1e-13
    # A sphere: the distance to its PLIC planes, within a tenth of a cell.
    exact, spacing, _ = _sphere(n)
    c = volume_fraction(xp.asarray(exact), spacing)
    phi = h_(redistance(xp.asarray(exact), c, spacing, band=3))
    band = np.abs(exact) < 3 * h
    assert np.abs(phi - exact)[band].max() < 0.1 * h
    c = h_(c)
    assert np.all(phi[c == 1.0] < 0) and np.all(phi[c == 0.0] > 0)


class _Slab:
    """A slab's padding for the gas sums: its first plane and, as the ranks'
    total, its own sums (the test adds the slabs' totals itself)."""

    def __init__(self, lo):
        self.offset = lo

    def total(self, sums):
        return sums


@pytest.mark.parametrize("ndim", [2, 3])
def test_gas_diagnostics_of_slabs_add_up_to_the_whole_grid(ndim, backend):
    """The slabs' sums (each slab's centroid weights from its first plane on)
    total the whole grid's; 2-D gives the area, 3-D the volume."""
    xp = backend.xp
    if ndim == 3:
        phi, spacing, _ = _sphere(12)
        u, v, w = (np.zeros(s) for s in _face_shapes(12))
        velocity = (u, v, w + np.cos(3.0 * np.arange(13))[:, None, None])
    else:
        n = 20
        spacing = (1.0 / n, 1.5 / 30)
        y, x = np.meshgrid((np.arange(30) + 0.5) * spacing[1], (np.arange(n) + 0.5) * spacing[0],
                           indexing="ij")
        phi = np.hypot(x - 0.45, y - 0.8) - 0.3
        velocity = (np.zeros((30, n + 1)), np.cos(3.0 * np.arange(31))[:, None] * np.ones((1, n)))
    c = volume_fraction(xp.asarray(phi), spacing)
    velocity = tuple(xp.asarray(f) for f in velocity)
    whole = gas_diagnostics(c, velocity, spacing)
    size = "area" if ndim == 2 else "volume"
    assert list(whole) == [size] + ["centroid_" + "xyz"[a] for a in range(ndim)] + ["rise_velocity"]
    assert whole[size] == pytest.approx(gas_volume(c, spacing), rel=1e-15)
    bounds = [0, 4, 9, c.shape[0]]
    total = sum(backend.to_host(gas_sums(c[lo:hi], tuple(f[lo:hi] for f in velocity[:-1])
                                         + (velocity[-1][lo:hi + 1],), spacing, _Slab(lo)))
                for lo, hi in zip(bounds, bounds[1:]))
    np.testing.assert_allclose(total, backend.to_host(gas_sums(c, velocity, spacing, WALLS)),
                               rtol=1e-13)
    slabs = gas_quantities(total, spacing)
    for key, value in whole.items():
        assert slabs[key] == pytest.approx(value, rel=1e-13, abs=1e-15)
    empty = gas_diagnostics(xp.zeros_like(c), velocity, spacing)
    assert empty[size] == 0.0 and all(math.isnan(empty[k]) for k in empty if k != size)


def test_3d_clsvof_flow_steps_keep_the_gas_volume(backend):
    case = load_case(RISING_3D, SMALL_3D)
    solver = FlowSolver(case, backend)
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
