"""The CUDA level-set kernels (flow.levelset_cuda) against their array-code twins
(flow.levelset, flow.bubble_measures).

``advect``, ``reinitialize``, ``curvature``, ``smooth`` and ``bubble_sums`` on
CuPy, in 2-D on one process, run a few kernels each; here each variant is
called directly (so a silent fall-back to the array code cannot pass for
it) and compared with the reference on NumPy: a circle's signed distance,
several bubbles under a free surface and a random smooth field (and, for the
transport, a distance flat past a band, as CLSVOF rebuilds it), on square
and non-square grids with ``hx != hy``, velocities of both signs.  The
fields agree to 1e-12 relative (the kernels follow the array code's order of
operations without FMA contraction); the diagnostics, sums in another
order, to 1e-12 relative.  Every kernel gives the same bits on a second
call, and declines (``NotImplemented``) what it does not cover: another
dtype, grids under the stencils' reach, a rank's slab, the 3-D calls they
do not cover (tests/flow/test_levelset_kernels_3d.py has the 3-D ones).  Each
comparison prints its largest difference (``pytest -rP`` shows them).
"""
import numpy as np
import pytest
from helpers.slab_planes import PlanesOf
from helpers.twins import close as close_within, variant

from bubbleflow.flow.bubble_measures import (VolumeMeasure, bubble_diagnostics, bubble_quantities,
                                             bubble_sums)
from bubbleflow.flow.levelset import advect, curvature, reinitialize, smooth
from bubbleflow.flow.padding import WallPadding
from bubbleflow.flow.slabs import SlabPadding
from bubbleflow.mesh.ranks import rank_slab

pytestmark = pytest.mark.gpu

RTOL = 1e-12


def close(name, got, ref):
    close_within(name, got, ref, RTOL)


#: (nx, ny, hx, hy): square and non-square grids, hx == hy and hx != hy, the smallest grid.
GRIDS = [(64, 64, 1 / 64, 1 / 64), (37, 53, 1 / 37, 1.3 / 53), (48, 96, 0.02, 0.0125),
         (3, 4, 0.3, 0.2)]
KINDS = ["circle", "bubbles", "random"]


def fields(nx, ny, hx, hy, kind, seed=0):
    """Host ``(phi, u, v)``: phi of the given kind, face velocities of both signs."""
    rng = np.random.default_rng(seed)
    x = (np.arange(nx) + 0.5) * hx
    y = (np.arange(ny) + 0.5) * hy
    X, Y = np.meshgrid(x, y)
    Lx, Ly = nx * hx, ny * hy
    if kind == "circle":
        phi = np.hypot(X - 0.5 * Lx, Y - 0.4 * Ly) - 0.25 * min(Lx, Ly)
    elif kind == "banded":      # CLSVOF's rebuilt level set: flat past a band of cells
        band = 3 * min(hx, hy)
        phi = np.clip(np.hypot(X - 0.5 * Lx, Y - 0.4 * Ly) - 0.25 * min(Lx, Ly), -band, band)
    elif kind == "bubbles":                        # three bubbles under a free surface
        phi = 0.8 * Ly - Y
        for cx, cy, r in [(0.3, 0.3, 0.12), (0.7, 0.35, 0.1), (0.5, 0.6, 0.08)]:
            phi = np.minimum(phi, np.hypot(X - cx * Lx, Y - cy * Ly) - r * min(Lx, Ly))
    else:
        phi = np.zeros_like(X)
        for _ in range(4):
            kx, ky, ph = rng.uniform(1, 4), rng.uniform(1, 4), rng.uniform(0, 6)
            phi += rng.uniform(0.2, 1) * np.sin(2 * np.pi * kx * X / Lx + ph) \
                * np.cos(2 * np.pi * ky * Y / Ly)
        phi *= 0.1 * min(Lx, Ly)
    xu = np.arange(nx + 1) * hx
    yv = np.arange(ny + 1) * hy
    u = np.sin(2 * np.pi * xu[None, :] / Lx + 0.3) * np.cos(2 * np.pi * y[:, None] / Ly + 1.0)
    v = -np.cos(2 * np.pi * x[None, :] / Lx + 0.7) * np.sin(2 * np.pi * yv[:, None] / Ly + 0.2) + 0.1
    return phi, u, v


def close_dict(name, got, ref):
    assert set(got) == set(ref)
    worst = 0.0
    for k, r in ref.items():
        g = got[k]
        assert isinstance(g, float)
        if np.isnan(r):
            assert np.isnan(g), k
            continue
        diff = abs(g - r) / max(abs(r), 1e-300)
        worst = max(worst, diff)
        assert diff <= RTOL, (k, g, r)
    print(f"maxdiff {name}: {worst:.3e}")


def grid_id(g):
    return f"{g[0]}x{g[1]}" + ("" if g[2] == g[3] else "-aniso")


def diagnostics_variant(phi, u, v, hx, hy, eps):
    """The quantities of the CUDA sums (the stepper's path: sums, one transfer)."""
    sums = variant(bubble_sums)(phi, (u, v), (hx, hy), eps)
    assert sums is not NotImplemented
    return bubble_quantities(sums.get(), (hx, hy))


@pytest.mark.parametrize("kind", KINDS + ["banded"])
@pytest.mark.parametrize("grid", GRIDS, ids=grid_id)
def test_advect_kernel(grid, kind, cp):
    nx, ny, hx, hy = grid
    phi, u, v = fields(nx, ny, hx, hy, kind)
    dt = 0.4 * min(hx, hy)
    got = variant(advect)(cp.asarray(phi), (cp.asarray(u), cp.asarray(v)), dt, (hx, hy))
    assert got is not NotImplemented
    close(f"advect {grid_id(grid)} {kind}", got, advect.reference(phi, (u, v), dt, (hx, hy)))
    twin = advect(cp.asarray(phi), (cp.asarray(u), cp.asarray(v)), dt, (hx, hy))
    np.testing.assert_array_equal(twin.get(), got.get())
    # Opposite velocities: the other upwind branches.
    got = variant(advect)(cp.asarray(phi), (cp.asarray(-u), cp.asarray(-v)), dt, (hx, hy))
    close(f"advect {grid_id(grid)} {kind} reversed", got,
          advect.reference(phi, (-u, -v), dt, (hx, hy)))


@pytest.mark.parametrize("iterations", [1, 4, 20])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("grid", GRIDS, ids=grid_id)
def test_reinitialize_kernel(grid, kind, iterations, cp):
    nx, ny, hx, hy = grid
    phi, _, _ = fields(nx, ny, hx, hy, kind)
    phi = 1.7 * phi * (1.0 + 0.3 * np.sin(7.0 * phi))          # far from a distance
    got = variant(reinitialize)(cp.asarray(phi), (hx, hy), iterations)
    assert got is not NotImplemented
    close(f"reinitialize {grid_id(grid)} {kind} it={iterations}", got,
          reinitialize.reference(phi, (hx, hy), iterations))


def test_reinitialize_zero_iterations_is_a_copy(cp):
    phi = cp.asarray(fields(37, 53, 1 / 37, 1 / 53, "circle")[0])
    out = variant(reinitialize)(phi, (1 / 37, 1 / 53), 0)
    assert out is not phi
    np.testing.assert_array_equal(out.get(), phi.get())


@pytest.mark.parametrize("kind", KINDS + ["banded"])
@pytest.mark.parametrize("grid", GRIDS, ids=grid_id)
def test_curvature_kernel(grid, kind, cp):
    nx, ny, hx, hy = grid
    phi, _, _ = fields(nx, ny, hx, hy, kind)
    got = variant(curvature)(cp.asarray(phi), (hx, hy))
    assert got is not NotImplemented
    ref = curvature.reference(phi, (hx, hy))
    close(f"curvature {grid_id(grid)} {kind}", got, ref)
    # Where the 3 x 3 stencil is flat both give +0, the sign of the zero too.
    centre = phi[1:-1, 1:-1]
    flat = np.ones(centre.shape, dtype=bool)
    for dj in (-1, 0, 1):
        for di in (-1, 0, 1):
            flat &= phi[1 + dj:ny - 1 + dj, 1 + di:nx - 1 + di] == centre
    inner, inner_ref = got.get()[1:-1, 1:-1][flat], ref[1:-1, 1:-1][flat]
    assert kind != "banded" or min(nx, ny) < 16 or flat.sum() > 0
    assert not np.any(inner) and not np.any(np.signbit(inner))
    np.testing.assert_array_equal(np.signbit(inner_ref), np.signbit(inner))


@pytest.mark.parametrize("passes", [1, 2, 3])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("grid", GRIDS + [(1, 9, 0.5, 0.1)], ids=grid_id)
def test_smooth_kernel(grid, kind, passes, cp):
    """The filter's kernel gives the array code's bits and leaves its input alone."""
    nx, ny, hx, hy = grid
    phi, _, _ = fields(nx, ny, hx, hy, kind)
    d = cp.asarray(phi)
    got = variant(smooth)(d, passes)
    assert got is not NotImplemented
    np.testing.assert_array_equal(got.get(), smooth.reference(phi, passes))
    np.testing.assert_array_equal(d.get(), phi)


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("grid", GRIDS + [(300, 1001, 1 / 300, 1 / 290)], ids=grid_id)
def test_bubble_sums_kernel(grid, kind, cp):
    nx, ny, hx, hy = grid
    phi, u, v = fields(nx, ny, hx, hy, kind)
    eps = 1.5 * max(hx, hy)
    got = diagnostics_variant(cp.asarray(phi), cp.asarray(u), cp.asarray(v), hx, hy, eps)
    close_dict(f"bubble_sums {grid_id(grid)} {kind}", got,
               bubble_diagnostics(phi, (u, v), (hx, hy), eps))
    twin = bubble_diagnostics(cp.asarray(phi), (cp.asarray(u), cp.asarray(v)), (hx, hy), eps)
    assert twin == got


@pytest.mark.parametrize("shift", [+1.0, -1.0])
def test_bubble_sums_without_gas_or_contour(shift, cp):
    """All liquid (no gas: NaN quotients) and all gas (no contour: NaN circularity)."""
    phi, u, v = fields(37, 53, 1 / 37, 1 / 53, "circle")
    phi = shift * (np.abs(phi) + 0.1)
    got = diagnostics_variant(cp.asarray(phi), cp.asarray(u), cp.asarray(v),
                              1 / 37, 1 / 53, 1.5 / 37)
    ref = bubble_diagnostics(phi, (u, v), (1 / 37, 1 / 53), 1.5 / 37)
    close_dict(f"bubble_sums no contour {shift:+}", got, ref)
    assert np.isnan(got["circularity"])


def test_fallbacks_run_the_reference(cp):
    """float32, grids under the stencils' reach, calls the variants do not
    cover (mismatched dimensions, 4-D), a slab's padding (but for the sums)
    and another measure: the variants decline."""
    phi, u, v = fields(37, 53, 1 / 37, 1 / 53, "bubbles")
    h = (1 / 37, 1 / 53)
    f32 = [cp.asarray(a, dtype=cp.float32) for a in (phi, u, v)]
    assert variant(advect)(f32[0], tuple(f32[1:]), 0.01, h) is NotImplemented
    assert variant(reinitialize)(f32[0], h, 2) is NotImplemented
    assert variant(curvature)(f32[0], h) is NotImplemented
    assert variant(bubble_sums)(f32[0], tuple(f32[1:]), h, 0.04) is NotImplemented
    out = advect(f32[0], tuple(f32[1:]), 0.01, h)
    assert out.dtype == np.float32
    d = [cp.asarray(a) for a in (phi, u, v)]
    slab = WallPadding()                       # any padding but the walls' own
    assert variant(advect)(d[0], tuple(d[1:]), 0.01, h, slab) is NotImplemented
    assert variant(reinitialize)(d[0], h, 2, 0.3, slab) is NotImplemented
    assert variant(curvature)(d[0], h, slab) is NotImplemented
    assert variant(smooth)(d[0], 1, slab) is NotImplemented
    assert variant(bubble_sums)(d[0], tuple(d[1:]), h, 0.04, measure=VolumeMeasure()) \
        is NotImplemented
    cube = cp.asarray(np.random.default_rng(0).standard_normal((5, 6, 7)))
    faces = tuple(cp.zeros(s) for s in ((5, 6, 8), (5, 7, 7), (6, 6, 7)))
    assert variant(advect)(cube, faces[:2], 0.01, (0.1,) * 2) is NotImplemented
    assert variant(advect)(cube, faces[::-1], 0.01, (0.1,) * 3) is NotImplemented
    assert variant(reinitialize)(cube, (0.1,) * 2, 2) is NotImplemented
    assert variant(curvature)(cube, (0.1,) * 2) is NotImplemented
    assert variant(smooth)(cube[None], 1) is NotImplemented
    phi, u, v = fields(2, 9, 0.5, 0.1, "circle")
    small = [cp.asarray(a) for a in (phi, u, v)]
    assert variant(advect)(small[0], tuple(small[1:]), 0.01, (0.5, 0.1)) is NotImplemented
    assert variant(curvature)(small[0], (0.5, 0.1)) is NotImplemented
    close("advect 2x9 fallback", advect(small[0], tuple(small[1:]), 0.01, (0.5, 0.1)),
          advect.reference(phi, (u, v), 0.01, (0.5, 0.1)))
    phi, u, v = fields(1, 9, 0.5, 0.1, "circle")
    one = [cp.asarray(a) for a in (phi, u, v)]
    assert variant(bubble_sums)(one[0], tuple(one[1:]), (0.5, 0.1), 0.75) is NotImplemented


def test_the_sums_of_slabs_add_up_to_the_grids(cp):
    """Three ranks' slabs of a 2-D grid (bubbles across their edges): each
    slab's sums through the kernels equal the array code's on that slab,
    and the three add up to the whole grid's (the squares between two
    slabs counted once, the rows' y the grid's)."""
    phi, u, v = fields(37, 53, 1 / 37, 1 / 53, "bubbles")
    h, eps = (1 / 37, 1 / 53), 1.5 / 37
    parts = []
    for rank in range(3):
        slab = rank_slab(phi.shape, rank, 3)
        cells, faces = slice(slab.lo, slab.hi), slice(slab.lo, slab.hi + 1)
        mine = (phi[cells], (u[cells], v[faces]))
        on_gpu = (cp.asarray(mine[0]), tuple(cp.asarray(f) for f in mine[1]))
        got = variant(bubble_sums)(*on_gpu, h, eps, SlabPadding(PlanesOf(cp.asarray(phi), slab),
                                                                 slab)).get()
        ref = bubble_sums.reference(*mine, h, eps, SlabPadding(PlanesOf(phi, slab), slab))
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-12 * np.abs(ref).max())
        parts.append(got)
    whole = bubble_sums.reference(phi, (u, v), h, eps)
    np.testing.assert_allclose(np.sum(parts, axis=0), whole, rtol=1e-12,
                               atol=1e-12 * np.abs(whole).max())
    assert np.abs(whole[4]) > 0 and np.abs(whole[5]) > 0            # contours there


def test_non_contiguous_input(cp):
    phi, u, v = fields(74, 53, 1 / 37, 1 / 53, "bubbles")
    d = cp.asarray(phi)[:, ::2]
    close("curvature strided", variant(curvature)(d, (1 / 37, 1 / 53)),
          curvature.reference(np.ascontiguousarray(phi[:, ::2]), (1 / 37, 1 / 53)))


def test_kernels_are_deterministic(cp):
    """The same input gives the same bits (a restart is compared bit for bit)."""
    nx, ny, hx, hy = 640, 900, 1 / 640, 1 / 600           # several reduction blocks, strided
    phi, u, v = (cp.asarray(a) for a in fields(nx, ny, hx, hy, "bubbles"))
    runs = []
    for _ in range(2):
        runs.append([advect(phi, (u, v), 0.3 * hy, (hx, hy)).get(),
                     reinitialize(phi, (hx, hy), 4).get(),
                     curvature(phi, (hx, hy)).get(),
                     bubble_sums(phi, (u, v), (hx, hy), 1.5 * hx).get()])
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a.view(np.uint64), b.view(np.uint64))
