"""The CUDA VOF advection (flow.vof_cuda) against its array-code twin.

``vof_cuda.advect`` is called directly (so a silent fall-back to the array
code cannot pass for it) and compared with ``vof_advection.advect.reference``
on the same CuPy arrays and on NumPy: a circle's volume fraction, a field
with many interface cells (two nearly touching circles and a thin filament,
cut with sub-cells), and a random field with plateaus (zero Youngs
gradients); the normals from c or from a level set (one with flat regions:
the zero-gradient fallback); stream-function velocities of both signs,
several chained steps alternating the first sweep, square and non-square
grids with ``hx != hy``, the smallest grid.  The kernel follows the array code's order of operations
without FMA contraction: the fields agree bit for bit, and ``info`` too
against the array code on CuPy (on NumPy its sum is taken in another order:
1e-12 relative there).
"""

import numpy as np
import pytest

from bubbleflow.flow import vof_cuda
from bubbleflow.flow.vof_advection import advect
from bubbleflow.flow.vof_fraction import volume_fraction

#: The array code.
reference = advect.reference

pytestmark = pytest.mark.gpu

#: (nx, ny, hx, hy): square and non-square grids, hx == hy and hx != hy, the smallest grids.
GRIDS = [(64, 64, 1 / 64, 1 / 64), (37, 53, 1 / 37, 1.3 / 53), (48, 96, 0.02, 0.0125),
         (160, 320, 1 / 160, 1 / 160), (3, 4, 0.3, 0.2), (3, 3, 0.25, 0.25)]
KINDS = ["circle", "filaments", "random"]
STEPS = 6


def grid_id(g):
    return f"{g[0]}x{g[1]}" + ("" if g[2] == g[3] else "-aniso")


def stream_velocity(nx, ny, hx, hy):
    """MAC faces from a stream function at the corners (zero on the walls):
    discretely divergence-free, no flow through walls, both signs."""
    Lx, Ly = nx * hx, ny * hy
    X, Y = np.meshgrid(np.arange(nx + 1) * hx / Lx, np.arange(ny + 1) * hy / Ly)
    psi = (np.sin(np.pi * X) ** 2 * np.sin(np.pi * Y) ** 2
           + 0.4 * np.sin(2 * np.pi * X) * np.sin(np.pi * Y)) * min(Lx, Ly) / np.pi
    psi[0, :] = psi[-1, :] = psi[:, 0] = psi[:, -1] = 0.0
    u = (psi[1:, :] - psi[:-1, :]) / hy
    v = -(psi[:, 1:] - psi[:, :-1]) / hx
    return u, v


def time_step(u, v, hx, hy, cfl):
    return cfl / max(np.abs(u).max() / hx, np.abs(v).max() / hy)


def fields(nx, ny, hx, hy, kind, seed=0):
    """Host ``(c, phi)``: the fraction of the given kind and a level set for
    the normals (negative in the gas)."""
    rng = np.random.default_rng(seed)
    Lx, Ly = nx * hx, ny * hy
    X, Y = np.meshgrid((np.arange(nx) + 0.5) * hx, (np.arange(ny) + 0.5) * hy)
    if kind == "circle":
        phi = np.hypot(X - 0.47 * Lx, Y - 0.53 * Ly) - 0.27 * min(Lx, Ly)
        return volume_fraction(phi, (hx, hy)), phi
    if kind == "filaments":
        r = 0.17 * min(Lx, Ly)
        gap = 0.7 * max(hx, hy)
        phi = np.minimum(np.hypot(X - 0.3 * Lx, Y - 0.35 * Ly) - r,
                         np.hypot(X - 0.3 * Lx - 2 * r - gap, Y - 0.35 * Ly) - r)
        filament = np.maximum(np.abs(Y - 0.72 * Ly) - 0.3 * hy, np.abs(X - 0.5 * Lx) - 0.35 * Lx)
        phi = np.minimum(phi, filament)
        return volume_fraction(phi, (hx, hy), samples=3), phi
    c = rng.uniform(0.0, 1.0, (ny, nx))
    pick = rng.uniform(0.0, 1.0, (ny, nx))
    c[pick < 0.3] = 0.0
    c[pick > 0.7] = 1.0
    c[(pick > 0.45) & (pick < 0.47)] = 1e-15
    c[(pick > 0.5) & (pick < 0.52)] = 1.0 - 1e-15
    c[ny // 3:ny // 3 + 5, nx // 3:nx // 3 + 5] = 0.5       # plateau: zero Youngs gradient
    phi = np.zeros_like(X)
    for _ in range(3):
        kx, ky, ph = rng.uniform(1, 3), rng.uniform(1, 3), rng.uniform(0, 6)
        phi += np.sin(2 * np.pi * kx * X / Lx + ph) * np.cos(2 * np.pi * ky * Y / Ly)
    phi = np.clip(phi, -0.5, 0.5)                          # plateaus: zero gradients
    return c, phi


def equal(name, got, ref):
    """Bit for bit (as values: -0.0 == 0.0), with the number of differing cells."""
    got = got.get() if hasattr(got, "get") else got
    ref = ref.get() if hasattr(ref, "get") else ref
    assert got.shape == ref.shape and got.dtype == ref.dtype
    differ = int(np.sum(got != ref))
    print(f"{name}: {differ} cells differ, max |diff| {np.abs(got - ref).max():.3e}")
    assert np.array_equal(got, ref), name


@pytest.mark.parametrize("use_phi", [False, True], ids=["youngs", "phi"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("grid", GRIDS, ids=grid_id)
def test_advect_kernel(grid, kind, use_phi, cp):
    nx, ny, hx, hy = grid
    c, phi = fields(nx, ny, hx, hy, kind)
    u, v = stream_velocity(nx, ny, hx, hy)
    dt = time_step(u, v, hx, hy, 0.45)
    normal_from = phi if use_phi else None
    d_phi = cp.asarray(phi) if use_phi else None
    d_c, d_u, d_v = cp.asarray(c), cp.asarray(u), cp.asarray(v)
    for step in range(STEPS):
        first = (step + (kind == "random")) % 2
        sign = 1.0 if step < STEPS // 2 else -1.0           # both signs of every face
        got = vof_cuda.advect(d_c, (sign * d_u, sign * d_v), dt, (hx, hy), first_axis=first,
                              normal_from=d_phi)
        assert got is not NotImplemented and got is not d_c
        label = f"{grid_id(grid)} {kind} {'phi' if use_phi else 'youngs'} step {step}"
        equal(label + " vs cupy", got, reference(
            d_c, (sign * d_u, sign * d_v), dt, (hx, hy), first_axis=first, normal_from=d_phi))
        equal(label + " vs numpy", got, reference(
            c, (sign * u, sign * v), dt, (hx, hy), first_axis=first, normal_from=normal_from))
        c, d_c = got.get(), got


@pytest.mark.parametrize("cfl", [0.45, 0.9])
@pytest.mark.parametrize("kind", KINDS)
def test_advect_info(kind, cfl, cp):
    """``info`` as the array code fills it: the same numbers as on CuPy; of
    NumPy's within 1e-12 relative (a sum in another order); CFL 0.9 leaves
    excursions that the clip keeps (on the fields with many interface cells)."""
    nx, ny, hx, hy = 37, 53, 1 / 37, 1.3 / 53
    c, _ = fields(nx, ny, hx, hy, kind, seed=1)
    u, v = stream_velocity(nx, ny, hx, hy)
    dt = time_step(u, v, hx, hy, cfl)
    worst = 0.0
    d_c, d_u, d_v = cp.asarray(c), cp.asarray(u), cp.asarray(v)
    for step in range(4):
        got_info, cupy_info, numpy_info = {}, {}, {}
        got = vof_cuda.advect(d_c, (d_u, d_v), dt, (hx, hy), first_axis=step % 2, info=got_info)
        ref = reference(d_c, (d_u, d_v), dt, (hx, hy), first_axis=step % 2, info=cupy_info)
        reference(c, (u, v), dt, (hx, hy), first_axis=step % 2, info=numpy_info)
        equal(f"info {kind} cfl {cfl} step {step}", got, ref)
        print(f"info {kind} cfl {cfl} step {step}: {got_info}")
        assert got_info == cupy_info
        for key in ("clipped", "excursion"):
            assert isinstance(got_info[key], float)
            assert abs(got_info[key] - numpy_info[key]) <= 1e-12 * abs(numpy_info[key]) + 1e-30
        worst = max(worst, got_info["excursion"])
        c, d_c = got.get(), got
    if cfl > 0.5 and kind != "circle":
        assert worst > 0.0


def test_advect_leaves_its_input_and_takes_strided_arrays(cp):
    nx, ny, hx, hy = 48, 96, 0.02, 0.0125
    c, phi = fields(2 * nx, ny, hx, hy, "filaments")
    c, phi = c[:, ::2], phi[:, ::2]                       # non-contiguous on the host too
    u, v = stream_velocity(nx, ny, hx, hy)
    dt = time_step(u, v, hx, hy, 0.45)
    d_c = cp.asarray(np.repeat(c, 2, axis=1))[:, ::2]   # the same values, strided on the GPU
    d_phi = cp.asarray(np.repeat(phi, 2, axis=1))[:, ::2]
    assert not d_c.flags.c_contiguous and not d_phi.flags.c_contiguous
    before = d_c.copy()
    got = vof_cuda.advect(d_c, (cp.asarray(u), cp.asarray(v)), dt, (hx, hy), normal_from=d_phi)
    assert got is not NotImplemented and got.flags.c_contiguous
    assert bool(cp.all(d_c == before))
    equal("strided", got, reference(np.ascontiguousarray(c), (u, v), dt, (hx, hy),
                                    normal_from=np.ascontiguousarray(phi)))


def test_fallbacks_run_the_reference(cp):
    """float32, grids under 3 cells, mismatched shapes, a bad first_axis,
    velocities of another dimension than c: the variant declines (and the array code raises where it
    should); the twin runs the variant on CuPy."""
    nx, ny, hx, hy = 37, 53, 1 / 37, 1.3 / 53
    c, phi = fields(nx, ny, hx, hy, "circle")
    u, v = stream_velocity(nx, ny, hx, hy)
    dc, du, dv = (cp.asarray(a) for a in (c, u, v))
    fc, fu, fv = (cp.asarray(a, dtype=cp.float32) for a in (c, u, v))
    assert vof_cuda.advect(fc, (fu, fv), 0.01, (hx, hy)) is NotImplemented
    assert vof_cuda.advect(dc, (du, dv), 0.01, (hx, hy),
                           normal_from=cp.asarray(phi, dtype=cp.float32)) is NotImplemented
    assert vof_cuda.advect(dc, (du, dv), 0.01, (hx, hy),
                           normal_from=cp.asarray(phi[:-1])) is NotImplemented
    assert vof_cuda.advect(dc, (dv, du), 0.01, (hx, hy)) is NotImplemented
    assert vof_cuda.advect(dc, (du, dv), 0.01, (hx, hy), first_axis=2) is NotImplemented
    with pytest.raises(ValueError, match="expected"):
        reference(dc, (dv, du), 0.01, (hx, hy))
    with pytest.raises(ValueError, match="first_axis"):
        reference(dc, (du, dv), 0.01, (hx, hy), first_axis=2)
    for nx, ny in ((2, 9), (9, 2), (1, 1)):
        small_c, _ = fields(nx, ny, 0.1, 0.1, "circle")
        small = [cp.asarray(a) for a in (small_c, *stream_velocity(nx, ny, 0.1, 0.1))]
        assert vof_cuda.advect(small[0], tuple(small[1:]), 0.01, (0.1, 0.1)) is NotImplemented
    n = 6
    c3 = cp.full((n, n, n), 0.5)
    velocity = tuple(cp.zeros(s) for s in ((n, n, n + 1), (n, n + 1, n), (n + 1, n, n)))
    assert vof_cuda.advect(c3, velocity[:2], 0.01, (0.1, 0.1)) is NotImplemented
    assert vof_cuda.advect(c3[0], velocity, 0.01, (0.1, 0.1, 0.1)) is NotImplemented
    assert advect.variants.get("cupy") is vof_cuda.advect
    equal("twin", advect(dc, (du, dv), 0.01, (hx, hy), normal_from=cp.asarray(phi)),
          reference(c, (u, v), 0.01, (hx, hy), normal_from=phi))
