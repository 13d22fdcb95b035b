"""The 3-D CUDA kernels of CLSVOF against their array code: the volume
fraction's advection (``vof_cuda.advect_3d``, twin of
``vof_advection.advect``) and the level set's rebuilding from it
(``vof_redistance_cuda.redistance_3d``, twin of
``vof_redistance.redistance``).

The variants are called directly (a silent fall-back to the array code
cannot pass for them) and compared with the reference on the same CuPy
arrays, bit for bit, ``info`` too; and with the reference on NumPy to
1e-13 relative (NumPy's ``cbrt``, ``arccos``, ``sin`` and ``cos`` need not
round as CUDA's do).  Interfaces: a sphere off the grid planes (cubic and
non-cubic cells), two nearby spheres, a thin slanted sheet, interfaces on
grid planes of each axis (face patches alone), a box beside a sphere (faces
beside planes) and a random fraction field (sign conflicts, zero
gradients); velocities from a vector potential (discretely divergence-free,
both signs) and one with a divergence (the dilatation term).  Run with
``pytest --backend cupy`` on a GPU machine.
"""
import numpy as np
import pytest

from bubbleflow.flow import vof_cuda, vof_redistance_cuda
from bubbleflow.flow.navier_stokes import CLSVOF_BAND
from bubbleflow.flow.plic_reconstruction import interface_mask
from bubbleflow.flow.vof_advection import advect
from bubbleflow.flow.vof_fraction import volume_fraction
from bubbleflow.flow.vof_redistance import redistance

pytestmark = pytest.mark.gpu

#: (nx, ny, nz, hx, hy, hz): cubic cells, non-cubic cells, the smallest advection grid.
GRIDS = [(20, 18, 22, 1 / 20, 1 / 20, 1 / 20), (16, 20, 12, 0.06, 0.05, 0.08),
         (3, 4, 3, 0.3, 0.25, 0.3)]
SHAPES = ["sphere", "two-spheres", "sheet", "plane-x", "plane-y", "plane-z", "box-and-sphere",
          "noise"]
#: (band, reach): the default reach, narrow bands, the flow's search.
SEARCHES = [(3, None), (1, None), (2, 2), (CLSVOF_BAND, CLSVOF_BAND + 1)]


def grid_id(g):
    return "x".join(str(n) for n in g[:3])


def centres(g):
    nx, ny, nz, hx, hy, hz = g
    z, y, x = np.meshgrid((np.arange(nz) + 0.5) * hz, (np.arange(ny) + 0.5) * hy,
                          (np.arange(nx) + 0.5) * hx, indexing="ij")
    return x, y, z


def fields(g, shape, seed=0):
    """Host ``(phi, c)`` of the named interface on grid ``g`` (negative phi in
    the gas)."""
    nx, ny, nz, hx, hy, hz = g
    spacing = (hx, hy, hz)
    L = np.array([nx * hx, ny * hy, nz * hz])
    x, y, z = centres(g)

    def sphere(cx, cy, cz, r):
        return np.sqrt((x - cx * L[0]) ** 2 + (y - cy * L[1]) ** 2 + (z - cz * L[2]) ** 2) \
            - r * L.min()

    c = None
    if shape == "sphere":
        phi = sphere(0.48, 0.51, 0.47, 0.27)
    elif shape == "two-spheres":                     # a gap of about a cell
        phi = np.minimum(sphere(0.31, 0.5, 0.5, 0.16), sphere(0.66, 0.52, 0.49, 0.15))
    elif shape == "sheet":                           # under a cell thick, slanted
        n = np.array([0.3, 0.5, 0.81]) / np.linalg.norm([0.3, 0.5, 0.81])
        phi = np.abs(n[0] * (x - 0.5 * L[0]) + n[1] * (y - 0.45 * L[1])
                     + n[2] * (z - 0.52 * L[2])) - 0.35 * min(spacing)
        c = volume_fraction(phi, spacing, samples=3)
    elif shape.startswith("plane-"):                 # on a grid plane: faces only
        a = "xyz".index(shape[-1])
        coord = (x, y, z)[a]
        at = spacing[a] * ((nx, ny, nz)[a] // 2)
        phi = coord - at if a != 1 else at - coord
        c = np.where(phi < 0, 1.0, 0.0)
    elif shape == "box-and-sphere":
        box = np.maximum.reduce([np.abs(x - 0.3 * L[0]) - 2 * hx, np.abs(y - 0.3 * L[1]) - 3 * hy,
                                 np.abs(z - 0.35 * L[2]) - 2 * hz])
        phi = np.minimum(box, sphere(0.7, 0.66, 0.62, 0.17))
        c = np.maximum(np.where(box < 0, 1.0, 0.0), volume_fraction(sphere(0.7, 0.66, 0.62, 0.17),
                                                                    spacing))
    elif shape == "small-sphere":                    # far from most of the grid
        phi = sphere(0.55, 0.4, 0.6, 0.12)
    elif shape == "corner-sphere":                   # cut by three walls
        phi = sphere(0.08, 0.1, 0.06, 0.15)
    elif shape == "no-gas":
        phi = 0.5 + x
        c = np.zeros_like(phi)
    elif shape == "noise":
        rng = np.random.default_rng(seed)
        c = rng.choice([0.0, 1.0, 0.5], size=x.shape, p=[0.35, 0.35, 0.3])
        c = np.where(c == 0.5, rng.uniform(0.0, 1.0, x.shape), c)
        c[:3, :3, :3] = 0.5                           # a plateau: zero Youngs gradient
        phi = 0.1 * np.sin(7.0 * x + 1.0) * np.cos(5.0 * y) * np.cos(3.0 * z) \
            + rng.normal(0.0, 0.01, x.shape)
        phi[-3:, -3:, -3:] = 0.2                      # zero level-set gradient
    else:
        raise ValueError(shape)
    if c is None:
        c = volume_fraction(phi, spacing)
    return phi, c


def potential_velocity(g, divergence=0.0):
    """MAC faces of the curl of a vector potential on the edges (zero on the
    walls: discretely divergence-free, no flow through walls, both signs),
    plus ``divergence`` times a field that expands inside and is zero on
    the walls."""
    nx, ny, nz, hx, hy, hz = g
    L = np.array([nx * hx, ny * hy, nz * hz])

    def edge(n_at, h_at, cell_axes):
        # coordinates of the nodes (or cell centres along cell_axes), as (z, y, x) grids
        ax = []
        for a, (n, h) in enumerate(zip(n_at, h_at)):
            ax.append((np.arange(n) + (0.5 if a in cell_axes else 0.0)) * h / L[a])
        return np.meshgrid(ax[2], ax[1], ax[0], indexing="ij")

    s = np.sin
    # A_x on x-edges (cell in x, node in y, z), A_y on y-edges, A_z on z-edges.
    zx, yx, xx = edge((nx, ny + 1, nz + 1), (hx, hy, hz), {0})
    ax_ = s(np.pi * yx) * s(np.pi * zx) * (0.3 + s(2 * np.pi * xx)) * 0.05
    zy, yy, xy = edge((nx + 1, ny, nz + 1), (hx, hy, hz), {1})
    ay = s(np.pi * xy) * s(np.pi * zy) * np.cos(np.pi * yy) * 0.05
    zz, yz, xz = edge((nx + 1, ny + 1, nz), (hx, hy, hz), {2})
    az = s(np.pi * xz) ** 2 * s(np.pi * yz) * (0.5 - zz) * 0.05
    # u = dAz/dy - dAy/dz on x-faces (nz, ny, nx + 1), and so on.
    u = (az[:, 1:, :] - az[:, :-1, :]) / hy - (ay[1:, :, :] - ay[:-1, :, :]) / hz
    v = (ax_[1:, :, :] - ax_[:-1, :, :]) / hz - (az[:, :, 1:] - az[:, :, :-1]) / hx
    w = (ay[:, :, 1:] - ay[:, :, :-1]) / hx - (ax_[:, 1:, :] - ax_[:, :-1, :]) / hy
    if divergence:
        for comp, a in ((u, 0), (v, 1), (w, 2)):
            k = 2 - a
            n = comp.shape[k]
            t = np.arange(n) / (n - 1)
            shape = [1, 1, 1]
            shape[k] = n
            comp += divergence * np.sin(np.pi * t).reshape(shape) * (t - 0.5).reshape(shape)
    return u, v, w


def time_step(velocity, g, cfl):
    return cfl / max(np.abs(q).max() / h for q, h in zip(velocity, g[3:]))


def equal(name, got, ref):
    """Bit for bit (as values: -0.0 == 0.0)."""
    got, ref = got.get(), ref.get()
    assert got.shape == ref.shape and got.dtype == ref.dtype
    print(f"{name}: {int(np.sum(got != ref))} cells differ, "
          f"max |diff| {np.abs(got - ref).max():.3e}")
    assert np.array_equal(got, ref), name


def close(name, got, host):
    scale = max(1.0, float(np.abs(host[np.isfinite(host)]).max()))
    diff = np.abs(got.get() - host)
    print(f"{name}: max |diff| from NumPy {diff.max():.3e}")
    np.testing.assert_allclose(got.get(), host, rtol=0, atol=1e-13 * scale)


@pytest.mark.parametrize("use_phi", [True, False], ids=["phi", "youngs"])
@pytest.mark.parametrize("shape", ["sphere", "two-spheres", "sheet", "box-and-sphere", "noise"])
@pytest.mark.parametrize("grid", GRIDS, ids=grid_id)
def test_advect_3d_gives_the_reference_bits(grid, shape, use_phi, cp):
    phi, c = fields(grid, shape)
    velocity = potential_velocity(grid, divergence=0.3 if shape == "sphere" else 0.0)
    dt = time_step(velocity, grid, 0.45)
    spacing = grid[3:]
    d_vel = tuple(cp.asarray(q) for q in velocity)
    d_phi = cp.asarray(phi) if use_phi else None
    d_c, host = cp.asarray(c), c
    for step in range(4):
        first = step % 3
        info, ref_info, host_info = {}, {}, {}
        got = vof_cuda.advect(d_c, d_vel, dt, spacing, first_axis=first, normal_from=d_phi,
                              info=info)
        assert got is not NotImplemented
        ref = advect.reference(d_c, d_vel, dt, spacing, first_axis=first, normal_from=d_phi,
                               info=ref_info)
        host = advect.reference(host, velocity, dt, spacing, first_axis=first,
                                normal_from=phi if use_phi else None, info=host_info)
        equal(f"{shape} step {step}", got, ref)
        close(f"{shape} step {step}", got, host)
        assert info == ref_info
        d_c = got


def test_advect_3d_info_and_inputs(cp):
    """A CFL of 0.9 leaves excursions the clip keeps: ``info`` as the array
    code's; the inputs are left alone; strided arrays are taken."""
    g = GRIDS[1]
    phi, c = fields(g, "noise")
    velocity = potential_velocity(g)
    dt = time_step(velocity, g, 0.9)
    d_c = cp.asarray(np.repeat(c, 2, axis=2))[:, :, ::2]
    d_vel = tuple(cp.asarray(q) for q in velocity)
    before = d_c.copy()
    worst = 0.0
    for step in range(3):
        info, ref_info = {}, {}
        got = vof_cuda.advect(d_c, d_vel, dt, g[3:], first_axis=step, info=info)
        ref = advect.reference(d_c, d_vel, dt, g[3:], first_axis=step, info=ref_info)
        equal(f"cfl 0.9 step {step}", got, ref)
        assert info == ref_info and all(isinstance(v, float) for v in info.values())
        worst = max(worst, info["excursion"])
        if step == 0:
            assert bool(cp.all(d_c == before))
        d_c = got
    assert worst > 0.0


def test_advect_3d_fallbacks(cp):
    g = GRIDS[0]
    phi, c = fields(g, "sphere")
    velocity = tuple(cp.asarray(q) for q in potential_velocity(g))
    dc = cp.asarray(c)
    assert vof_cuda.advect(dc.astype(cp.float32), velocity, 0.01, g[3:]) is NotImplemented
    assert vof_cuda.advect(dc, velocity[::-1], 0.01, g[3:]) is NotImplemented
    assert vof_cuda.advect(dc, velocity, 0.01, g[3:], first_axis=3) is NotImplemented
    assert vof_cuda.advect(dc, velocity, 0.01, g[3:], normal_from=cp.asarray(phi[:-1])) \
        is NotImplemented
    small = (2, 4, 4, 0.1, 0.1, 0.1)
    _, sc = fields(small, "sphere")
    sv = tuple(cp.asarray(q) for q in potential_velocity(small))
    assert vof_cuda.advect(cp.asarray(sc), sv, 0.01, small[3:]) is NotImplemented
    # Registered: the twin runs the kernels on CuPy.
    equal("twin", advect(dc, velocity, 0.01, g[3:], normal_from=cp.asarray(phi)),
          vof_cuda.advect(dc, velocity, 0.01, g[3:], normal_from=cp.asarray(phi)))


@pytest.mark.parametrize("search", SEARCHES, ids=lambda s: f"band{s[0]}-reach{s[1]}")
@pytest.mark.parametrize("shape", SHAPES)
@pytest.mark.parametrize("grid", GRIDS[:2], ids=grid_id)
def test_redistance_3d_gives_the_reference_bits(grid, shape, search, cp):
    phi, c = fields(grid, shape)
    band, reach = search
    spacing = grid[3:]
    d_phi, d_c = cp.asarray(phi), cp.asarray(c)
    info, ref_info, host_info = {}, {}, {}
    got = vof_redistance_cuda.redistance(d_phi, d_c, spacing, band=band, reach=reach, info=info)
    assert got is not NotImplemented
    ref = redistance.reference(d_phi, d_c, spacing, band=band, reach=reach, info=ref_info)
    host = redistance.reference(phi, c, spacing, band=band, reach=reach, info=host_info)
    print(f"{shape}: info {info}")
    equal(shape, got, ref)
    close(shape, got, host)
    assert info == ref_info == host_info
    assert all(type(v) is int for v in info.values())
    assert bool(cp.array_equal(d_phi, cp.asarray(phi))) and bool(cp.array_equal(d_c, cp.asarray(c)))
    # Without info: the same field.
    assert bool(cp.array_equal(vof_redistance_cuda.redistance(d_phi, d_c, spacing, band, reach),
                               got))


def test_redistance_3d_cases_reach_every_branch(cp):
    """Face patches alone, faces beside planes, and sign conflicts are met."""
    g = GRIDS[0]
    for shape in ("plane-x", "plane-y", "plane-z"):
        phi, c = fields(g, shape)
        assert not bool(interface_mask(c).any())
        info = {}
        vof_redistance_cuda.redistance(cp.asarray(phi), cp.asarray(c), g[3:], info=info)
        n_across = (g[0], g[1], g[2])["xyz".index(shape[-1])]
        assert info["band_cells"] == 8 * g[0] * g[1] * g[2] // n_across   # 3 + 1 + 1 + 3 planes
    phi, c = fields(g, "noise")
    info = {}
    vof_redistance_cuda.redistance(cp.asarray(phi), cp.asarray(c), g[3:], info=info)
    assert info["sign_conflicts"] > 0


@pytest.mark.parametrize("planes", [None, 5], ids=lambda p: f"runs{p}")
@pytest.mark.parametrize("search", SEARCHES[2:], ids=lambda s: f"band{s[0]}-reach{s[1]}")
@pytest.mark.parametrize("shape", ["small-sphere", "corner-sphere", "no-gas"])
def test_redistance_3d_gas_in_part_of_the_grid(shape, search, planes, cp, monkeypatch):
    """Gas in a corner of the grid or nowhere: the kernels' region about the
    patches is part of the grid, or empty; its cells lie both away from the
    walls and at them.  The reference's bits and counts; also with the
    threads of the kernels that take runs of planes in runs of 5 (44 planes:
    the last run shorter)."""
    if planes is not None:
        from bubbleflow.compute import cuda

        monkeypatch.setattr(cuda, "MIN_BLOCKS_3D", 1)
        monkeypatch.setattr(cuda, "RUN_PLANES", planes)
    g = (40, 36, 44, 1 / 40, 1 / 40, 1 / 40)
    phi, c = fields(g, shape)
    band, reach = search
    d_phi, d_c = cp.asarray(phi), cp.asarray(c)
    info, ref_info = {}, {}
    got = vof_redistance_cuda.redistance(d_phi, d_c, g[3:], band=band, reach=reach, info=info)
    assert got is not NotImplemented
    ref = redistance.reference(d_phi, d_c, g[3:], band=band, reach=reach, info=ref_info)
    equal(shape, got, ref)
    assert info == ref_info
    assert (info["band_cells"] == 0) == (shape == "no-gas")


def test_redistance_3d_strided_and_deterministic(cp):
    g = GRIDS[1]
    phi, c = fields(g, "two-spheres")
    d_phi = cp.asarray(np.repeat(phi, 2, axis=0))[::2]
    d_c = cp.asarray(np.repeat(c, 2, axis=0))[::2]
    spacing = tuple(np.float64(h) for h in g[3:])
    runs = [vof_redistance_cuda.redistance(d_phi, d_c, spacing).get() for _ in range(2)]
    np.testing.assert_array_equal(runs[0].view(np.uint64), runs[1].view(np.uint64))
    equal("strided", cp.asarray(runs[0]), redistance.reference(cp.asarray(phi), cp.asarray(c),
                                                               spacing))


@pytest.mark.parametrize("use_phi", [True, False], ids=["phi", "youngs"])
def test_advect_3d_a_nan_cell_as_the_array_code(use_phi, cp):
    """A NaN cell of the fraction (or of the level set) spreads to the cells
    it gives to as the array code's sweeps spread it: the kernels' planes of
    a NaN donor are NaN too, never an entry left unwritten."""
    g = GRIDS[0]
    phi, c = fields(g, "sphere")
    velocity = potential_velocity(g)
    dt = time_step(velocity, g, 0.45)
    nan_c = c.copy()
    nan_c[np.unravel_index(int(np.argmin(np.abs(c - 0.5))), c.shape)] = np.nan
    d_vel = tuple(cp.asarray(q) for q in velocity)
    d_phi = cp.asarray(phi) if use_phi else None
    for first in range(3):
        got = vof_cuda.advect(cp.asarray(nan_c), d_vel, dt, g[3:], first_axis=first,
                              normal_from=d_phi)
        ref = advect.reference(cp.asarray(nan_c), d_vel, dt, g[3:], first_axis=first,
                               normal_from=d_phi)
        got, ref = got.get(), ref.get()
        assert np.isnan(ref).sum() > 1
        assert np.array_equal(np.isnan(got), np.isnan(ref))
        assert np.array_equal(got[~np.isnan(ref)], ref[~np.isnan(ref)])
