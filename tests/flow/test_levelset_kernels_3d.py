"""The 3-D CUDA level-set kernels (flow.levelset_cuda: transport, curvature,
filter, the bubble measure's sums) against their array-code twins
(flow.levelset, flow.bubble_measures).

Each variant is called directly (a silent fall-back to the array code cannot
pass for it) and compared with the reference on NumPy: a sphere's signed
distance, bubbles under a free surface and a random smooth field (and, for
the transport, a distance flat past a band, as CLSVOF rebuilds it), on cubic
and non-cubic cells and the smallest grid the stencils take, velocities of
both signs.  The transport and the curvature agree to 1e-12 relative (the
kernels follow the array code's order of operations without FMA
contraction; the array code's squares are powers), the filter bit for bit,
the measure's sums to 1e-12 of the largest sum (summed per block, not in
CuPy's order).
Run with ``pytest --backend cupy`` on a GPU machine.
"""
import numpy as np
import pytest
from helpers.slab_planes import PlanesOf
from helpers.twins import close as close_within, variant

from bubbleflow.flow.bubble_measures import VolumeMeasure, bubble_quantities, bubble_sums
from bubbleflow.flow.levelset import advect, curvature, reinitialize, smooth
from bubbleflow.flow.slabs import SlabPadding
from bubbleflow.mesh.ranks import rank_slab

pytestmark = pytest.mark.gpu

RTOL = 1e-12


def close(name, got, ref):
    close_within(name, got, ref, RTOL)


#: (nx, ny, nz, hx, hy, hz): cubic cells, non-cubic cells, the smallest grid.
GRIDS = [(20, 18, 22, 1 / 20, 1 / 20, 1 / 20), (16, 20, 12, 0.06, 0.05, 0.08),
         (3, 4, 3, 0.3, 0.25, 0.3)]
KINDS = ["sphere", "bubbles", "random"]


def grid_id(g):
    return "x".join(str(n) for n in g[:3])


def fields(g, kind, seed=0):
    """Host ``(phi, (u, v, w))``: phi of the given kind, face velocities of
    both signs."""
    nx, ny, nz, hx, hy, hz = g
    rng = np.random.default_rng(seed)
    L = (nx * hx, ny * hy, nz * hz)
    axes = [(np.arange(n) + 0.5) * h for n, h in zip((nx, ny, nz), (hx, hy, hz))]
    z, y, x = np.meshgrid(axes[2], axes[1], axes[0], indexing="ij")
    if kind == "sphere":
        phi = np.sqrt((x - 0.5 * L[0]) ** 2 + (y - 0.45 * L[1]) ** 2
                      + (z - 0.4 * L[2]) ** 2) - 0.25 * min(L)
    elif kind == "banded":      # CLSVOF's rebuilt level set: flat past a band of cells
        band = 3 * min(hx, hy, hz)
        phi = np.clip(np.sqrt((x - 0.5 * L[0]) ** 2 + (y - 0.45 * L[1]) ** 2
                              + (z - 0.4 * L[2]) ** 2) - 0.25 * min(L), -band, band)
    elif kind == "bubbles":                        # three bubbles under a free surface
        phi = 0.8 * L[2] - z
        for cx, cy, cz, r in [(0.3, 0.3, 0.3, 0.12), (0.7, 0.6, 0.35, 0.1),
                              (0.5, 0.5, 0.6, 0.08)]:
            phi = np.minimum(phi, np.sqrt((x - cx * L[0]) ** 2 + (y - cy * L[1]) ** 2
                                          + (z - cz * L[2]) ** 2) - r * min(L))
    else:
        phi = np.zeros_like(x)
        for _ in range(4):
            k = rng.uniform(1, 4, 3)
            ph = rng.uniform(0, 6)
            phi += rng.uniform(0.2, 1) * np.sin(2 * np.pi * k[0] * x / L[0] + ph) \
                * np.cos(2 * np.pi * k[1] * y / L[1]) * np.cos(2 * np.pi * k[2] * z / L[2])
        phi *= 0.1 * min(L)
    velocity = []
    for a in range(3):
        shape = [nz, ny, nx]
        shape[2 - a] += 1
        idx = np.indices(shape, dtype=float)
        coords = [(idx[2 - b] + (0.0 if b == a else 0.5)) * (hx, hy, hz)[b] / L[b]
                  for b in range(3)]
        velocity.append(np.sin(2 * np.pi * coords[a] + 0.3 * a)
                        * np.cos(2 * np.pi * coords[(a + 1) % 3] + 1.0) + 0.1 * (a - 1))
    return phi, tuple(velocity)


@pytest.mark.parametrize("kind", KINDS + ["banded"])
@pytest.mark.parametrize("grid", GRIDS, ids=grid_id)
def test_advect_3d_kernel(grid, kind, cp):
    phi, vel = fields(grid, kind)
    spacing = grid[3:]
    dt = 0.3 * min(spacing)
    for sign in (1.0, -1.0):                       # the other upwind branches too
        v = tuple(sign * q for q in vel)
        d_phi = cp.asarray(phi)
        got = variant(advect)(d_phi, tuple(cp.asarray(q) for q in v), dt, spacing)
        assert got is not NotImplemented
        close(f"advect {grid_id(grid)} {kind} sign {sign}", got,
              advect.reference(phi, v, dt, spacing))
        np.testing.assert_array_equal(d_phi.get(), phi)
    twin = advect(cp.asarray(phi), tuple(cp.asarray(q) for q in vel), dt, spacing)
    again = variant(advect)(cp.asarray(phi), tuple(cp.asarray(q) for q in vel), dt, spacing)
    np.testing.assert_array_equal(twin.get(), again.get())


@pytest.mark.parametrize("iterations", [1, 4, 20])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("grid", GRIDS, ids=grid_id)
def test_reinitialize_3d_kernel(grid, kind, iterations, cp):
    phi, _ = fields(grid, kind)
    phi = 1.7 * phi * (1.0 + 0.3 * np.sin(7.0 * phi / min(grid[3:])))   # far from a distance
    d = cp.asarray(phi)
    got = variant(reinitialize)(d, grid[3:], iterations)
    assert got is not NotImplemented
    close(f"reinitialize {grid_id(grid)} {kind} it={iterations}", got,
          reinitialize.reference(phi, grid[3:], iterations))
    np.testing.assert_array_equal(d.get(), phi)
    zero = variant(reinitialize)(d, grid[3:], 0)
    assert zero is not d and bool(cp.array_equal(zero, d))


@pytest.mark.parametrize("kind", KINDS + ["banded"])
@pytest.mark.parametrize("grid", GRIDS, ids=grid_id)
def test_curvature_3d_kernel(grid, kind, cp):
    phi, _ = fields(grid, kind)
    got = variant(curvature)(cp.asarray(phi), grid[3:])
    assert got is not NotImplemented
    ref = curvature.reference(phi, grid[3:])
    close(f"curvature {grid_id(grid)} {kind}", got, ref)
    # Where the 3 x 3 x 3 block around a cell is flat both give +0, the sign
    # of the zero too (the stencil reads 19 of its cells).
    nz, ny, nx = phi.shape
    centre = phi[1:-1, 1:-1, 1:-1]
    flat = np.ones(centre.shape, dtype=bool)
    for dk in (-1, 0, 1):
        for dj in (-1, 0, 1):
            for di in (-1, 0, 1):
                flat &= phi[1 + dk:nz - 1 + dk, 1 + dj:ny - 1 + dj, 1 + di:nx - 1 + di] == centre
    inner, inner_ref = got.get()[1:-1, 1:-1, 1:-1][flat], ref[1:-1, 1:-1, 1:-1][flat]
    assert kind != "banded" or min(phi.shape) < 16 or flat.sum() > 0
    assert not np.any(inner) and not np.any(np.signbit(inner))
    np.testing.assert_array_equal(np.signbit(inner_ref), np.signbit(inner))


@pytest.mark.parametrize("passes", [1, 4])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("grid", GRIDS + [(1, 5, 2, 0.5, 0.1, 0.2)], ids=grid_id)
def test_smooth_3d_kernel(grid, kind, passes, cp):
    """The filter's kernel gives the array code's bits and leaves its input alone."""
    phi, _ = fields(grid, kind)
    d = cp.asarray(phi)
    got = variant(smooth)(d, passes)
    assert got is not NotImplemented
    np.testing.assert_array_equal(got.get(), smooth.reference(phi, passes))
    np.testing.assert_array_equal(d.get(), phi)


def test_3d_strided_input_and_fallbacks(cp):
    g = GRIDS[1]
    phi, vel = fields(g, "bubbles")
    d = cp.asarray(np.repeat(phi, 2, axis=2))[:, :, ::2]
    assert not d.flags.c_contiguous
    close("curvature strided", variant(curvature)(d, g[3:]), curvature.reference(phi, g[3:]))
    f32 = cp.asarray(phi, dtype=cp.float32)
    assert variant(advect)(f32, tuple(cp.asarray(q) for q in vel), 0.01, g[3:]) \
        is NotImplemented
    assert variant(curvature)(f32, g[3:]) is NotImplemented
    small, svel = fields((2, 4, 4, 0.5, 0.25, 0.25), "sphere")
    assert variant(advect)(cp.asarray(small), tuple(cp.asarray(q) for q in svel), 0.01,
                           (0.5, 0.25, 0.25)) is NotImplemented
    assert variant(curvature)(cp.asarray(small), (0.5, 0.25, 0.25)) is NotImplemented
    assert variant(reinitialize)(f32, g[3:], 2) is NotImplemented
    assert variant(reinitialize)(cp.asarray(small), (0.5, 0.25, 0.25), 2) is NotImplemented
    close("reinitialize strided", variant(reinitialize)(d, g[3:], 3),
          reinitialize.reference(phi, g[3:], 3))


def check_sums(name, got, phi, vel, spacing, eps):
    """The kernel's sums against the reference's on NumPy: within 1e-12 of
    the largest sum, the velocity's moment taken with |w| (it cancels)."""
    ref = bubble_sums.reference(phi, vel, spacing, eps)
    scale = bubble_sums.reference(phi, tuple(np.abs(q) for q in vel), spacing, eps)
    np.testing.assert_allclose(got.get(), ref, rtol=0, atol=RTOL * np.max(np.abs(scale)),
                               err_msg=name)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("grid", GRIDS + [(2, 3, 2, 0.3, 0.25, 0.3)], ids=grid_id)
def test_bubble_sums_3d_kernel(grid, kind, cp):
    """The six sums of the 3-D measure (sharp moments, co-area surface) and
    the quantities made of them; the same bits twice."""
    phi, vel = fields(grid, kind)
    spacing = grid[3:]
    eps = 1.5 * max(spacing)
    d_phi, d_vel = cp.asarray(phi), tuple(cp.asarray(q) for q in vel)
    got = variant(bubble_sums)(d_phi, d_vel, spacing, eps)
    assert got is not NotImplemented
    check_sums(f"bubble_sums {grid_id(grid)} {kind}", got, phi, vel, spacing, eps)
    again = bubble_sums(d_phi, d_vel, spacing, eps)
    np.testing.assert_array_equal(again.get(), got.get())
    q = bubble_quantities(got.get(), spacing)
    ref = bubble_quantities(bubble_sums.reference(phi, vel, spacing, eps), spacing)
    assert q.keys() == ref.keys()
    for key in ("volume", "surface", "centroid_x", "centroid_y", "centroid_z", "sphericity"):
        assert q[key] == pytest.approx(ref[key], rel=1e-11, nan_ok=True), key


def test_bubble_sums_3d_past_one_stride_and_not_finite(cp):
    """A grid of more cells than the first pass's threads (each thread walks
    several cells, its (k, j, i) carried from cell to cell) gives the
    reference's sums; a cell not finite, far from the contour, makes NaN
    the sums the reference's are NaN in (the contour's, where the
    neighbours' gradient reads it; with NaN also the gas's)."""
    grid = (62, 66, 70, 1 / 62, 1 / 66, 1 / 70)
    phi, vel = fields(grid, "sphere")
    spacing = grid[3:]
    eps = 1.5 * max(spacing)
    d_vel = tuple(cp.asarray(q) for q in vel)
    got = variant(bubble_sums)(cp.asarray(phi), d_vel, spacing, eps)
    assert phi.size > 1024 * 256
    check_sums("bubble_sums 62x66x70", got, phi, vel, spacing, eps)
    far = np.unravel_index(np.argmax(phi), phi.shape)
    assert phi[far] > 3 * eps
    for bad in (np.nan, np.inf, -np.inf):
        broken = phi.copy()
        broken[far] = bad
        sums = variant(bubble_sums)(cp.asarray(broken), d_vel, spacing, eps).get()
        ref = bubble_sums.reference(broken, vel, spacing, eps)
        np.testing.assert_array_equal(np.isnan(sums), np.isnan(ref), err_msg=str(bad))
        assert np.isnan(ref[1])


def test_bubble_sums_3d_without_gas_and_fallbacks(cp):
    """All liquid gives NaN quotients as the reference does; another measure,
    float32 and an axis of one cell run the reference."""
    g = GRIDS[1]
    phi, vel = fields(g, "sphere")
    liquid = np.abs(phi) + 0.2
    d_vel = tuple(cp.asarray(q) for q in vel)
    got = variant(bubble_sums)(cp.asarray(liquid), d_vel, g[3:], 0.1)
    q = bubble_quantities(got.get(), g[3:])
    assert q["volume"] == 0.0 and q["surface"] == 0.0
    assert np.isnan(q["centroid_z"]) and np.isnan(q["sphericity"])
    d_phi = cp.asarray(phi)
    assert variant(bubble_sums)(d_phi, d_vel, g[3:], 0.1, measure=VolumeMeasure()) \
        is NotImplemented
    assert variant(bubble_sums)(d_phi.astype(cp.float32), d_vel, g[3:], 0.1) is NotImplemented
    thin, tvel = fields((1, 5, 4, 0.2, 0.2, 0.2), "sphere")
    assert variant(bubble_sums)(cp.asarray(thin), tuple(cp.asarray(q) for q in tvel),
                                (0.2,) * 3, 0.3) is NotImplemented
    check_sums("bubble_sums 1x5x4 fallback",
               bubble_sums(cp.asarray(thin), tuple(cp.asarray(q) for q in tvel), (0.2,) * 3, 0.3),
               thin, tvel, (0.2,) * 3, 0.3)


def test_bubble_sums_3d_of_slabs_add_up_to_the_grids(cp):
    """Three ranks' slabs of the three bubbles under a free surface: each
    slab's sums through the kernel equal the array code's on that slab
    (the vertical gradient from the neighbours' planes, the planes'
    heights the grid's), and the three add up to the whole grid's."""
    g = GRIDS[1]
    phi, vel = fields(g, "bubbles")
    spacing = g[3:]
    eps = 1.5 * max(spacing)
    parts = []
    for rank in range(3):
        slab = rank_slab(phi.shape, rank, 3)
        cells, faces = slice(slab.lo, slab.hi), slice(slab.lo, slab.hi + 1)
        mine = (phi[cells], (vel[0][cells], vel[1][cells], vel[2][faces]))
        on_gpu = (cp.asarray(mine[0]), tuple(cp.asarray(f) for f in mine[1]))
        got = variant(bubble_sums)(*on_gpu, spacing, eps,
                                   SlabPadding(PlanesOf(cp.asarray(phi), slab), slab)).get()
        ref = bubble_sums.reference(*mine, spacing, eps, SlabPadding(PlanesOf(phi, slab), slab))
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())
        parts.append(got)
    whole = bubble_sums.reference(phi, vel, spacing, eps)
    np.testing.assert_allclose(np.sum(parts, axis=0), whole, rtol=1e-12,
                               atol=1e-12 * np.abs(whole).max())
    assert whole[1] > 0                                     # a surface there
