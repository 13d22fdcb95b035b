"""The CUDA twin of the level set's rebuilding from the volume fraction
(flow.vof_redistance_cuda) against the array code (flow.vof_redistance).

The variant is called directly (so a silent fall-back to the array code
cannot pass for it) and compared with the reference, on the same CuPy arrays
and on NumPy: bit for bit (``array_equal``), ``info`` the same.  Interfaces:
a circle off the grid lines (square and non-square cells), two nearby
circles, a thin slanted filament, interfaces on grid lines (the face
segments, both directions, alone and beside PLIC segments), a diagonal
through the cell corners (segments shrunk to points, many distance ties) and
a random fraction field (sign conflicts); several bands and reaches
(tests/flow/test_vof_kernels_3d.py has the 3-D kernels).  Run with ``pytest --backend cupy`` on a
GPU machine; the host tests check the search's order and window, which the
kernels and the array code share.
"""
import math

import numpy as np
import pytest

from bubbleflow.flow import vof_redistance_cuda
from bubbleflow.flow.plic_reconstruction import interface_mask
from bubbleflow.flow.navier_stokes import CLSVOF_BAND
from bubbleflow.flow.vof_fraction import volume_fraction
from bubbleflow.flow.vof_limits import search_offsets, search_window
from bubbleflow.flow.vof_redistance import redistance

#: The array code.
reference = redistance.reference


@pytest.fixture(scope="module")
def cp(backend):
    if backend.name != "cupy":
        pytest.skip("the CUDA twin runs with the cupy backend (pytest --backend cupy)")
    return backend.xp


def centres(nx, ny, hx, hy):
    return np.meshgrid((np.arange(nx) + 0.5) * hx, (np.arange(ny) + 0.5) * hy)


def circle(X, Y, xc, yc, r):
    return np.hypot(X - xc, Y - yc) - r


def box(X, Y, x0, x1, y0, y1):
    """Signed distance to the box (negative inside)."""
    dx = np.maximum(x0 - X, X - x1)
    dy = np.maximum(y0 - Y, Y - y1)
    out = np.hypot(np.maximum(dx, 0.0), np.maximum(dy, 0.0))
    return np.where((dx < 0) & (dy < 0), np.maximum(dx, dy), out)


def case(name):
    """Host ``(phi, c, hx, hy)`` of the named interface."""
    if name == "circle-aniso":
        nx, ny, hx, hy = 48, 80, 1 / 48, 1.3 / 80
    elif name == "noise":
        nx, ny, hx, hy = 40, 30, 1 / 40, 1 / 40
    else:
        nx, ny, hx, hy = 64, 64, 1 / 64, 1 / 64
    X, Y = centres(nx, ny, hx, hy)
    c = None
    if name in ("circle", "circle-aniso"):
        phi = circle(X, Y, 0.5123, 0.4871 * ny * hy, 0.25)
    elif name == "two-circles":                   # a gap of about two cells
        phi = np.minimum(circle(X, Y, 0.331, 0.502, 0.15), circle(X, Y, 0.6712, 0.5213, 0.157))
    elif name == "filament":                      # 0.6 cells wide, slanted
        n = np.array([math.cos(0.4), math.sin(0.4)])
        phi = np.abs(n[0] * (X - 0.51) + n[1] * (Y - 0.47)) - 0.3 * hx
        c = volume_fraction(phi, (hx, hy), samples=4)
    elif name == "grid-line-y":                   # gas below y = 1/2: faces only
        phi = 3.0 * (Y - 0.5)
        c = np.where(Y < 0.5, 1.0, 0.0)
    elif name == "grid-line-x":                   # gas right of x = 1/4: faces only
        phi = 0.25 - X
        c = np.where(X > 0.25, 1.0, 0.0)
    elif name == "box-and-circle":                # both face directions beside segments
        b = box(X, Y, 0.25, 0.5, 0.125, 0.375)
        phi = np.minimum(b, circle(X, Y, 0.7013, 0.6522, 0.18))
        c = np.maximum(np.where(b < 0, 1.0, 0.0), volume_fraction(phi, (hx, hy)))
    elif name == "diagonal":                      # through the cell corners
        phi = (X - Y) / math.sqrt(2.0)
    elif name == "noise":                         # random c: conflicts, corners, ties
        rng = np.random.default_rng(7)
        c = rng.choice([0.0, 1.0, 0.5], size=X.shape, p=[0.35, 0.35, 0.3])
        c = np.where(c == 0.5, rng.uniform(0.0, 1.0, X.shape), c)
        phi = 0.1 * np.sin(7.0 * X + 1.0) * np.cos(5.0 * Y) + rng.normal(0.0, 0.01, X.shape)
    else:
        raise ValueError(name)
    if c is None:
        c = volume_fraction(phi, (hx, hy))
    return phi, c, hx, hy


CASES = ["circle", "circle-aniso", "two-circles", "filament", "grid-line-y", "grid-line-x",
         "box-and-circle", "diagonal", "noise"]
#: (band, reach): the default reach, reach = band (the flow's CLSVOF_BAND as
#: well), a reach past the default.
SEARCHES = [(3, None), (1, None), (2, 2), (4, None), (3, 7), (CLSVOF_BAND, CLSVOF_BAND)]


def search_id(s):
    return f"band{s[0]}-reach{s[1]}"


def twin_call(cp, phi, c, hx, hy, band, reach):
    """The variant's result and info on device copies; the inputs left alone."""
    d_phi, d_c = cp.asarray(phi), cp.asarray(c)
    info = {}
    got = vof_redistance_cuda.redistance(d_phi, d_c, (hx, hy), band=band, reach=reach, info=info)
    assert got is not NotImplemented
    assert got.dtype == np.float64 and got.shape == phi.shape
    assert cp.array_equal(d_phi, cp.asarray(phi)) and cp.array_equal(d_c, cp.asarray(c))
    return got, info, d_phi, d_c


@pytest.mark.gpu
@pytest.mark.parametrize("search", SEARCHES, ids=search_id)
@pytest.mark.parametrize("name", CASES)
def test_redistance_kernel_gives_the_reference_bits(name, search, cp):
    phi, c, hx, hy = case(name)
    band, reach = search
    got, info, d_phi, d_c = twin_call(cp, phi, c, hx, hy, band, reach)
    ref_info = {}
    ref = reference(d_phi, d_c, (hx, hy), band=band, reach=reach, info=ref_info)
    host_info = {}
    host = reference(phi, c, (hx, hy), band=band, reach=reach, info=host_info)
    diff = float(cp.max(cp.abs(got - ref)))
    print(f"{name} {search_id(search)}: maxdiff {diff:.3e}, info {info}")
    assert cp.array_equal(got, ref)
    assert np.array_equal(got.get(), host)
    assert info == ref_info == host_info
    assert all(type(v) is int for v in info.values())
    # Without info: the same field.
    assert cp.array_equal(vof_redistance_cuda.redistance(d_phi, d_c, (hx, hy), band, reach), got)


@pytest.mark.gpu
def test_cases_reach_every_branch(cp):
    """The cases above do exercise face segments and sign conflicts."""
    phi, c, hx, hy = case("noise")
    _, info, _, _ = twin_call(cp, phi, c, hx, hy, 3, None)
    assert info["sign_conflicts"] > 0
    phi, c, hx, hy = case("grid-line-x")
    assert not bool(interface_mask(c).any())
    _, info, _, _ = twin_call(cp, phi, c, hx, hy, 3, None)
    assert info["band_cells"] == 8 * 64          # columns 12 to 19


@pytest.mark.gpu
def test_redistance_kernel_non_contiguous_and_numpy_scalars(cp):
    phi, c, hx, hy = case("two-circles")
    d_phi = cp.asarray(np.repeat(phi, 2, axis=1))[:, ::2]
    d_c = cp.asarray(np.repeat(c, 2, axis=1))[:, ::2]
    spacing = (np.float64(hx), np.float64(hy))
    got = vof_redistance_cuda.redistance(d_phi, d_c, spacing)
    assert got is not NotImplemented
    assert np.array_equal(got.get(), reference(phi, c, spacing))


@pytest.mark.gpu
def test_redistance_kernel_is_deterministic(cp):
    phi, c, hx, hy = case("noise")
    runs = [vof_redistance_cuda.redistance(cp.asarray(phi), cp.asarray(c), (hx, hy)).get()
            for _ in range(2)]
    np.testing.assert_array_equal(runs[0].view(np.uint64), runs[1].view(np.uint64))


@pytest.mark.gpu
def test_redistance_fallbacks(cp):
    """float32, mismatched shapes, a grid one cell wide, band < 1, spacing of
    another dimension than the arrays: the variant declines (the array code runs, or raises)."""
    phi, c, hx, hy = case("circle")
    sp = (hx, hy)
    f32 = [cp.asarray(a, dtype=cp.float32) for a in (phi, c)]
    assert vof_redistance_cuda.redistance(*f32, sp) is NotImplemented
    assert vof_redistance_cuda.redistance(cp.asarray(phi), cp.asarray(c[:, :-1]), sp) \
        is NotImplemented
    assert vof_redistance_cuda.redistance(cp.asarray(phi[:, :1]), cp.asarray(c[:, :1]), sp) \
        is NotImplemented
    assert vof_redistance_cuda.redistance(cp.asarray(phi), cp.asarray(c), sp, band=0) \
        is NotImplemented
    n = 8
    g = (np.arange(n) + 0.5) / n
    z, y, x = np.meshgrid(g, g, g, indexing="ij")
    phi3 = np.sqrt((x - 0.5) ** 2 + (y - 0.5) ** 2 + (z - 0.5) ** 2) - 0.3
    c3 = volume_fraction(phi3, (1 / n,) * 3)
    assert vof_redistance_cuda.redistance(cp.asarray(phi3), cp.asarray(c3), (1 / n,) * 2) \
        is NotImplemented
    assert vof_redistance_cuda.redistance(cp.asarray(phi3[0]), cp.asarray(c3[0]), (1 / n,) * 3) \
        is NotImplemented
    # Registered: the twin runs it, and the declined calls get the array code.
    assert redistance.variants.get("cupy") is vof_redistance_cuda.redistance
    out = redistance(*f32, sp)
    ref = reference(*f32, sp)
    assert out.dtype == ref.dtype and bool(cp.array_equal(out, ref))
    d_phi3, d_c3 = cp.asarray(phi3), cp.asarray(c3)
    assert bool(cp.array_equal(redistance(d_phi3, d_c3, (1 / n,) * 3),
                               reference(d_phi3, d_c3, (1 / n,) * 3)))
    with pytest.raises(ValueError, match="band"):
        redistance(cp.asarray(phi), cp.asarray(c), sp, band=0)


def test_offsets_are_nearest_first_row_major_on_ties():
    offs = search_offsets((5, 5), (1 / 64, 1 / 64))
    assert len(offs) == 121 and offs[0] == (0, 0)
    assert offs[1:5] == [(-1, 0), (0, -1), (0, 1), (1, 0)]
    h = 1 / 64
    key = [(dj * h) ** 2 + (di * h) ** 2 for dj, di in offs]
    assert key == sorted(key)
    # In 3-D too: the first six after the own cell are the face neighbours.
    offs = search_offsets((2, 2, 2), (0.1, 0.1, 0.1))
    assert len(offs) == 125 and offs[0] == (0, 0, 0)
    assert sorted(offs[1:7]) == sorted([(1, 0, 0), (-1, 0, 0), (0, 1, 0), (0, -1, 0),
                                        (0, 0, 1), (0, 0, -1)])


def test_search_window_finds_the_foot_of_the_perpendicular():
    """The default reach per array axis: ``band + 1/2`` cells along the
    diagonal, rounded, at least ``band + 1``; a reach asked for is raised to
    ``band + 1``."""
    assert search_window(3, None, (1 / 64, 1 / 64)) == (5, 5)
    assert search_window(3, None, (0.1, 0.1, 0.1)) == (6, 6, 6)
    assert search_window(3, None, (0.02, 0.01)) == (8, 4)          # (rows, columns)
    assert search_window(3, 2, (0.1, 0.1)) == (4, 4)
    assert search_window(1, 7, (0.1, 0.1, 0.2)) == (7, 7, 7)


@pytest.mark.parametrize("name", ["circle", "two-circles", "diagonal", "noise"])
def test_the_distances_do_not_depend_on_the_search_batch(monkeypatch, name):
    """The search drops a cell out after a batch only when no later offset
    can come nearer, and ties go to the first met in any batching: every
    batch gives the same bits, in 2-D and 3-D."""
    from bubbleflow.flow import vof_redistance

    phi, c, hx, hy = case(name)
    runs = []
    for batch in (1 << 22, 1 << 14, 1 << 9):
        monkeypatch.setattr(vof_redistance, "SEARCH_ENTRIES_PER_CELL", {})
        monkeypatch.setattr(vof_redistance, "SEARCH_BATCH", batch)
        runs.append(reference(phi, c, (hx, hy), band=CLSVOF_BAND))
    for got in runs[1:]:
        assert np.array_equal(got, runs[0])
    n = 20
    z = (np.arange(n) + 0.5) / n
    Z, Y, X = np.meshgrid(z, z, z, indexing="ij")
    phi3 = np.minimum(np.sqrt((X - 0.43) ** 2 + (Y - 0.52) ** 2 + (Z - 0.47) ** 2) - 0.22,
                      np.sqrt((X - 0.74) ** 2 + (Y - 0.41) ** 2 + (Z - 0.61) ** 2) - 0.13)
    c3 = volume_fraction(phi3, (1 / n,) * 3, samples=2)
    runs = []
    for batch in (1 << 22, 1 << 12):
        monkeypatch.setattr(vof_redistance, "SEARCH_BATCH", batch)
        runs.append(reference(phi3, c3, (1 / n,) * 3, band=CLSVOF_BAND))
    assert np.array_equal(runs[1], runs[0])


@pytest.mark.parametrize("name", ["circle", "two-circles", "box-and-circle", "noise"])
def test_skipping_the_entries_nearer_than_the_nearest_patch_cell_gives_the_same_bits(
        monkeypatch, name):
    """A band cell d cells from the nearest cell holding a patch may start
    past the entries shorter than d (none holds a patch): the search with
    the skip everywhere, and with it nowhere, gives the same bits and
    counts, in 2-D and 3-D (a sphere, two spheres nearly touching, a plane
    on a grid plane, a random fraction)."""
    from bubbleflow.flow import vof_redistance

    def both(phi, c, spacing):
        runs = []
        for threshold in (0, 1 << 40):
            monkeypatch.setattr(vof_redistance, "SKIP_MIN_ENTRIES", threshold)
            info = {}
            runs.append((reference(phi, c, spacing, band=CLSVOF_BAND, reach=CLSVOF_BAND + 1,
                                   info=info), info))
        (a, ia), (b, ib) = runs
        assert np.array_equal(a.view(np.uint64), b.view(np.uint64)) and ia == ib

    phi, c, hx, hy = case(name)
    both(phi, c, (hx, hy))
    n = 16
    z = (np.arange(n) + 0.5) / n
    Z, Y, X = np.meshgrid(z, z, z, indexing="ij")
    shapes3 = {
        "circle": np.sqrt((X - 0.47) ** 2 + (Y - 0.52) ** 2 + (Z - 0.45) ** 2) - 0.27,
        "two-circles": np.minimum(
            np.sqrt((X - 0.3) ** 2 + (Y - 0.5) ** 2 + (Z - 0.5) ** 2) - 0.17,
            np.sqrt((X - 0.68) ** 2 + (Y - 0.52) ** 2 + (Z - 0.49) ** 2) - 0.16),
        "box-and-circle": Z - 0.5,
        "noise": np.sin(7.0 * X + 1.0) * np.cos(5.0 * Y) * np.cos(3.0 * Z) * 0.1,
    }
    phi3 = shapes3[name]
    c3 = np.where(phi3 < 0, 1.0, 0.0) if name == "box-and-circle" else volume_fraction(
        phi3, (1 / n,) * 3)
    if name == "noise":
        rng = np.random.default_rng(5)
        c3 = np.where(rng.uniform(size=c3.shape) < 0.2, rng.uniform(size=c3.shape), c3)
    both(phi3, c3, (1 / n,) * 3)


def test_the_search_batch_follows_the_band_on_numpy_and_is_fixed_elsewhere():
    from bubbleflow.flow.vof_redistance import (SEARCH_BATCH, SEARCH_ENTRIES_PER_CELL,
                                                search_batch)

    per_cell = SEARCH_ENTRIES_PER_CELL["numpy"]
    assert search_batch(np, 2378) == per_cell * 2378
    assert search_batch(np, 0) == per_cell

    class Other:
        __name__ = "cupy"
    assert search_batch(Other, 2378) == SEARCH_BATCH


def test_the_nearest_pair_grouped_by_cell_is_the_filled_batchs_argmin():
    """The NumPy variant of nearest_of_pairs (the pairs grouped by cell)
    against the array code (the batch filled, then argmin): the same
    distances and sides, ties to the first entry, on batches with many ties,
    columns without a pair, no pair at all, every pair, and a NaN (left to
    the array code)."""
    from bubbleflow.flow.vof_redistance import nearest_of_pairs

    rng = np.random.default_rng(11)
    for entries, cells, pairs in ((16, 400, 120), (16, 2000, 300), (3, 50, 150), (40, 7, 200),
                                  (5, 9, 0), (4, 6, 24)):
        flat = np.sort(rng.choice(entries * cells, pairs, replace=False))
        pair = np.divmod(flat, cells)
        measured = np.round(rng.uniform(0.0, 2.0, pairs), 1)          # ties
        signs = rng.choice([-1.0, 0.0, 1.0], pairs)
        if pairs:
            measured[rng.integers(pairs)] = np.nan if entries == 40 else measured[0]
        want = nearest_of_pairs.reference(pair, measured, signs, (entries, cells), np)
        got = nearest_of_pairs(pair, measured, signs, (entries, cells), np)
        for g, w in zip(got, want):
            assert g.shape == (cells,)
            np.testing.assert_array_equal(g, w)


@pytest.mark.parametrize("name", ["circle", "two-circles", "noise"])
def test_the_rebuild_is_the_same_with_the_pairs_grouped_or_the_batch_filled(monkeypatch,
                                                                             name):
    """The whole rebuild on NumPy with nearest_of_pairs' variant and with
    its array code alone: the same bits, in 2-D and 3-D."""
    from bubbleflow.flow import vof_redistance

    phi, c, hx, hy = case(name)
    n = 16
    z = (np.arange(n) + 0.5) / n
    Z, Y, X = np.meshgrid(z, z, z, indexing="ij")
    phi3 = np.sqrt((X - 0.47) ** 2 + (Y - 0.52) ** 2 + (Z - 0.45) ** 2) - 0.27
    c3 = volume_fraction(phi3, (1 / n,) * 3)
    runs = []
    for variants in (dict(vof_redistance.nearest_of_pairs.variants), {}):
        monkeypatch.setattr(vof_redistance.nearest_of_pairs, "variants", variants)
        runs.append((reference(phi, c, (hx, hy), band=CLSVOF_BAND),
                     reference(phi3, c3, (1 / n,) * 3, band=CLSVOF_BAND)))
    for a, b in zip(*runs):
        assert np.array_equal(a.view(np.uint64), b.view(np.uint64))
