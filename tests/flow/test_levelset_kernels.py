"""The CUDA level-set kernels (flow.levelset_cuda) against their array-code twins.

``advect``, ``reinitialize``, ``curvature``, ``smooth`` and ``bubble_diagnostics`` on CuPy
run a few kernels each; here each variant is called directly (so a silent
fall-back to the array code cannot pass for it) and compared with the
reference on NumPy: a circle's signed distance, several bubbles under a free
surface and a random smooth field, on square and non-square grids with
``hx != hy``, velocities of both signs.  The fields agree to 1e-12 relative
(the kernels follow the array code's order of operations without FMA
contraction); the diagnostics, sums in another order, to 1e-12 relative.
Every kernel gives the same bits on a second call.  Each comparison prints
its largest difference (``pytest -rP`` shows them).
"""
import numpy as np
import pytest

from bubbleflow.flow.levelset_ops import (advect, bubble_diagnostics, curvature, reinitialize,
                                          smooth)

pytestmark = pytest.mark.gpu

RTOL = 1e-12

#: (nx, ny, hx, hy): square and non-square grids, hx == hy and hx != hy, the smallest grid.
GRIDS = [(64, 64, 1 / 64, 1 / 64), (37, 53, 1 / 37, 1.3 / 53), (48, 96, 0.02, 0.0125),
         (3, 4, 0.3, 0.2)]
KINDS = ["circle", "bubbles", "random"]


@pytest.fixture(scope="module")
def cp(cupy_backend):
    return cupy_backend.xp


def fields(nx, ny, hx, hy, kind, seed=0):
    """Host ``(phi, u, v)``: phi of the given kind, face velocities of both signs."""
    rng = np.random.default_rng(seed)
    x = (np.arange(nx) + 0.5) * hx
    y = (np.arange(ny) + 0.5) * hy
    X, Y = np.meshgrid(x, y)
    Lx, Ly = nx * hx, ny * hy
    if kind == "circle":
        phi = np.hypot(X - 0.5 * Lx, Y - 0.4 * Ly) - 0.25 * min(Lx, Ly)
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


def close(name, got, ref):
    """``got`` (device) within RTOL of ``ref`` (host), relative to max |ref|."""
    got = got.get()
    assert got.shape == ref.shape and got.dtype == ref.dtype
    scale = max(np.abs(ref).max(), 1e-300)
    diff = np.abs(got - ref).max() / scale
    print(f"maxdiff {name}: {diff:.3e} (equal bits: {np.array_equal(got, ref)})")
    assert diff <= RTOL


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


def variant(concept):
    return concept.variants["cupy"]


def grid_id(g):
    return f"{g[0]}x{g[1]}" + ("" if g[2] == g[3] else "-aniso")


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("grid", GRIDS, ids=grid_id)
def test_advect_kernel(grid, kind, cp):
    nx, ny, hx, hy = grid
    phi, u, v = fields(nx, ny, hx, hy, kind)
    dt = 0.4 * min(hx, hy)
    got = variant(advect)(cp.asarray(phi), cp.asarray(u), cp.asarray(v), dt, hx, hy)
    assert got is not NotImplemented
    close(f"advect {grid_id(grid)} {kind}", got, advect.reference(phi, u, v, dt, hx, hy))
    twin = advect(cp.asarray(phi), cp.asarray(u), cp.asarray(v), dt, hx, hy)
    np.testing.assert_array_equal(twin.get(), got.get())
    # Opposite velocities: the other upwind branches.
    got = variant(advect)(cp.asarray(phi), cp.asarray(-u), cp.asarray(-v), dt, hx, hy)
    close(f"advect {grid_id(grid)} {kind} reversed", got,
          advect.reference(phi, -u, -v, dt, hx, hy))


@pytest.mark.parametrize("iterations", [1, 4, 20])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("grid", GRIDS, ids=grid_id)
def test_reinitialize_kernel(grid, kind, iterations, cp):
    nx, ny, hx, hy = grid
    phi, _, _ = fields(nx, ny, hx, hy, kind)
    phi = 1.7 * phi * (1.0 + 0.3 * np.sin(7.0 * phi))          # far from a distance
    got = variant(reinitialize)(cp.asarray(phi), hx, hy, iterations)
    assert got is not NotImplemented
    close(f"reinitialize {grid_id(grid)} {kind} it={iterations}", got,
          reinitialize.reference(phi, hx, hy, iterations))


def test_reinitialize_zero_iterations_is_a_copy(cp):
    phi = cp.asarray(fields(37, 53, 1 / 37, 1 / 53, "circle")[0])
    out = variant(reinitialize)(phi, 1 / 37, 1 / 53, 0)
    assert out is not phi
    np.testing.assert_array_equal(out.get(), phi.get())


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("grid", GRIDS, ids=grid_id)
def test_curvature_kernel(grid, kind, cp):
    nx, ny, hx, hy = grid
    phi, _, _ = fields(nx, ny, hx, hy, kind)
    got = variant(curvature)(cp.asarray(phi), hx, hy)
    assert got is not NotImplemented
    close(f"curvature {grid_id(grid)} {kind}", got, curvature.reference(phi, hx, hy))


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
def test_bubble_diagnostics_kernel(grid, kind, cp):
    nx, ny, hx, hy = grid
    phi, u, v = fields(nx, ny, hx, hy, kind)
    eps = 1.5 * max(hx, hy)
    got = variant(bubble_diagnostics)(cp.asarray(phi), cp.asarray(u), cp.asarray(v), hx, hy, eps)
    assert got is not NotImplemented
    close_dict(f"bubble_diagnostics {grid_id(grid)} {kind}", got,
               bubble_diagnostics.reference(phi, u, v, hx, hy, eps))


@pytest.mark.parametrize("shift", [+1.0, -1.0])
def test_bubble_diagnostics_without_gas_or_contour(shift, cp):
    """All liquid (no gas: NaN quotients) and all gas (no contour: NaN circularity)."""
    phi, u, v = fields(37, 53, 1 / 37, 1 / 53, "circle")
    phi = shift * (np.abs(phi) + 0.1)
    got = variant(bubble_diagnostics)(cp.asarray(phi), cp.asarray(u), cp.asarray(v),
                                      1 / 37, 1 / 53, 1.5 / 37)
    ref = bubble_diagnostics.reference(phi, u, v, 1 / 37, 1 / 53, 1.5 / 37)
    close_dict(f"bubble_diagnostics no contour {shift:+}", got, ref)
    assert np.isnan(got["circularity"])


def test_fallbacks_run_the_reference(cp):
    """float32 and grids under the stencils' reach: the variants decline."""
    phi, u, v = fields(37, 53, 1 / 37, 1 / 53, "bubbles")
    f32 = [cp.asarray(a, dtype=cp.float32) for a in (phi, u, v)]
    assert variant(advect)(*f32, 0.01, 1 / 37, 1 / 53) is NotImplemented
    assert variant(reinitialize)(f32[0], 1 / 37, 1 / 53, 2) is NotImplemented
    assert variant(curvature)(f32[0], 1 / 37, 1 / 53) is NotImplemented
    assert variant(bubble_diagnostics)(*f32, 1 / 37, 1 / 53, 0.04) is NotImplemented
    out = advect(*f32, 0.01, 1 / 37, 1 / 53)
    assert out.dtype == np.float32
    phi, u, v = fields(2, 9, 0.5, 0.1, "circle")
    small = [cp.asarray(a) for a in (phi, u, v)]
    assert variant(advect)(*small, 0.01, 0.5, 0.1) is NotImplemented
    assert variant(curvature)(small[0], 0.5, 0.1) is NotImplemented
    close("advect 2x9 fallback", advect(*small, 0.01, 0.5, 0.1),
          advect.reference(phi, u, v, 0.01, 0.5, 0.1))
    phi, u, v = fields(1, 9, 0.5, 0.1, "circle")
    assert variant(bubble_diagnostics)(*[cp.asarray(a) for a in (phi, u, v)],
                                       0.5, 0.1, 0.75) is NotImplemented


def test_non_contiguous_input(cp):
    phi, u, v = fields(74, 53, 1 / 37, 1 / 53, "bubbles")
    d = cp.asarray(phi)[:, ::2]
    close("curvature strided", variant(curvature)(d, 1 / 37, 1 / 53),
          curvature.reference(np.ascontiguousarray(phi[:, ::2]), 1 / 37, 1 / 53))


def test_kernels_are_deterministic(cp):
    """The same input gives the same bits (a restart is compared bit for bit)."""
    nx, ny, hx, hy = 640, 900, 1 / 640, 1 / 600           # several reduction blocks, strided
    phi, u, v = (cp.asarray(a) for a in fields(nx, ny, hx, hy, "bubbles"))
    runs = []
    for _ in range(2):
        runs.append([advect(phi, u, v, 0.3 * hy, hx, hy).get(),
                     reinitialize(phi, hx, hy, 4).get(),
                     curvature(phi, hx, hy).get(),
                     np.array(list(bubble_diagnostics(phi, u, v, hx, hy, 1.5 * hx).values()))])
    for a, b in zip(*runs):
        np.testing.assert_array_equal(a.view(np.uint64), b.view(np.uint64))
