"""Every bubble tracked: the gas regions labelled and measured in 2-D and
3-D (volumes adding up to the gas volume, the PLIC interface's measure),
identities kept across samples through merges, splits, fast moves, the
free surface, and a restart of the tracker."""
import math
import os

import numpy as np
import pytest

from bubbleflow.case.config import load_case
from bubbleflow.flow.bubble_tracking import (COLUMN_UNITS, EVENT_COLUMNS, EVENT_KINDS,
                                             STATE_KEYS, BubbleTracker, bubble_columns)
from bubbleflow.compute.regions import label_regions
from bubbleflow.flow.gas_regions import (gas_regions, interface_measure, layer_labels,
                                         nearest_labels, state_regions)
from bubbleflow.flow.navier_stokes import FlowSolver
from bubbleflow.flow.state import FlowState
from bubbleflow.flow.vof_diagnostics import gas_volume
from bubbleflow.flow.vof_fraction import volume_fraction
from helpers.cli import ROOT

N = 64
H = 1.0 / N


def centres(n, dims):
    """The cell centres of the unit square or cube, one array per grid axis
    (x first), each of the grid's array shape."""
    x = (np.arange(n) + 0.5) / n
    return tuple(reversed(np.meshgrid(*([x] * dims), indexing="ij")))


def balls(n, spheres, dims=2):
    """The signed distance to the union of ``spheres`` ``(centre, radius)``
    (1 everywhere without any)."""
    X = centres(n, dims)
    return np.min([np.ones_like(X[0])] + [np.sqrt(sum((X[a] - p[a]) ** 2 for a in range(dims)))
                                         - r for p, r in spheres], axis=0)


def still(xp, shape):
    """Zero MAC face velocities for cells of ``shape``."""
    nd = len(shape)
    out = []
    for a in range(nd):
        s = list(shape)
        s[nd - 1 - a] += 1
        out.append(xp.zeros(tuple(s)))
    return tuple(out)


def sample(xp, spheres, n=N, dims=2, velocity=None):
    """The regions of a level-set state made of ``spheres``."""
    phi = xp.asarray(balls(n, spheres, dims))
    state = FlowState(phi=phi, velocity=velocity or still(xp, phi.shape), p=None)
    return state_regions(state, (1.0 / n,) * dims)


def kinds(tracker, step=None):
    return [(EVENT_KINDS[e[2]], e[3], e[4]) for e in tracker.events()
            if step is None or e[0] == step]


# ---------------------------------------------------------------- measures
def test_two_circles_are_two_regions_with_their_measures(backend):
    """Per region: area, centroid, mean velocity, equivalent diameter and
    circularity (near 1 for a circle, below for two overlapping ones);
    numbered by centroid y."""
    xp = backend.xp
    phi = balls(N, [((0.7, 0.65), 0.15), ((0.3, 0.3), 0.1)])
    c = volume_fraction(xp.asarray(phi), (H, H))
    u, v = np.zeros((N, N + 1)), np.zeros((N + 1, N))
    v[: N // 2 + 1] = 0.25                       # the lower half rises
    velocity = (xp.asarray(u), xp.asarray(v))
    r = gas_regions(c, velocity, (H, H), normal_from=xp.asarray(phi))
    assert r.count == 2 and not r.layer.any()
    np.testing.assert_allclose(r.volume, [math.pi * 0.1 ** 2, math.pi * 0.15 ** 2], rtol=3e-3)
    np.testing.assert_allclose(r.centroid, [[0.3, 0.3], [0.7, 0.65]], atol=1e-3)
    assert r.velocity[0, 1] == pytest.approx(0.25) and abs(r.velocity[1, 1]) < 0.25
    np.testing.assert_allclose(r.velocity[:, 0], 0.0)
    np.testing.assert_allclose(r.diameter, [0.2, 0.3], rtol=2e-3)
    np.testing.assert_allclose(r.shape_factor, 1.0, atol=1e-2)
    pair = balls(N, [((0.4, 0.5), 0.15), ((0.6, 0.5), 0.15)])
    merged = gas_regions(volume_fraction(xp.asarray(pair), (H, H)), velocity, (H, H))
    assert merged.count == 1 and merged.shape_factor[0] < 0.95
    labels = backend.to_host(r.labels)
    assert labels[int(0.3 * N), int(0.3 * N)] == 1 and labels[int(0.65 * N), int(0.7 * N)] == 2


def test_region_volumes_add_up_to_the_gas_volume(backend):
    """Two circles whose interface cells touch stay two regions; a wisp of
    gas holding no core and the gas layer at the top are shared out, so the
    regions' volumes add up to sum(c) h^2 to rounding."""
    xp = backend.xp
    phi = balls(N, [((0.35, 0.4), 0.12), ((0.6, 0.4), 0.12)])   # 0.01 apart
    c = np.asarray(backend.to_host(volume_fraction(xp.asarray(phi), (H, H)))).copy()
    c[int(0.8 * N), int(0.2 * N)] = 0.3                          # a wisp
    c[-6:] = 1.0                                                # a layer
    c[-7] = 0.4
    c = xp.asarray(c)
    r = gas_regions(c, still(xp, c.shape), (H, H))
    assert r.count == 3 and r.layer.tolist() == [False, False, True]
    assert float(np.sum(r.volume)) == pytest.approx(gas_volume(c, (H, H)), rel=1e-12)
    empty = gas_regions(xp.zeros((N, N)), still(xp, (N, N)), (H, H))
    assert empty.count == 0 and empty.centroid.shape == (0, 2)


@pytest.mark.parametrize("dims", [2, 3])
def test_the_layers_of_a_label_array_are_the_regions_the_tracker_flags(dims):
    """The figures' rule (layer_labels on the host) and the tracker's (its
    cores' top-plane count on the device) call the same regions layers."""
    n = 32
    phi = balls(n, [((0.3,) * dims, 0.12), ((0.7,) * (dims - 1) + (0.85,), 0.2)], dims)
    c = np.asarray(volume_fraction(phi, (1.0 / n,) * dims)).copy()
    c[-3:] = 1.0                                                # a layer
    labels, count = label_regions(c > 0.5)
    layers = layer_labels(labels)
    assert count == 2 and layers.tolist() == [int(labels[-1].max())]   # the cap joins the layer
    r = gas_regions(c, still(np, c.shape), (1.0 / n,) * dims)
    assert r.count == count and int(r.layer.sum()) == layers.size
    assert layer_labels(np.zeros((4, 4), dtype=np.int32)).size == 0


def test_nearest_labels_share_every_cell_out():
    labels = np.zeros((4, 6), dtype=np.int32)
    labels[0, 0], labels[3, 5] = 1, 2
    near = nearest_labels(labels, (1.0, 1.0))
    assert near[0, 2] == 1 and near[3, 3] == 2 and near[0, 0] == 1 and near[3, 5] == 2
    # Cells three times taller than wide: distance counts in length units.
    near = nearest_labels(labels, (1.0, 3.0))
    assert near[2, 0] == 2


def test_two_spheres_are_two_regions_in_3d(backend):
    """3-D: face-connected labelling, volumes of 4/3 pi R^3, centroids,
    diameters, and a sphericity near 1 from the PLIC polygons' areas."""
    xp = backend.xp
    n = 32
    r = sample(xp, [((0.3, 0.5, 0.3), 0.18), ((0.65, 0.5, 0.7), 0.22)], n=n, dims=3)
    assert r.count == 2 and r.ndim == 3
    np.testing.assert_allclose(r.volume, [4 / 3 * math.pi * 0.18 ** 3,
                                          4 / 3 * math.pi * 0.22 ** 3], rtol=1e-2)
    np.testing.assert_allclose(r.centroid, [[0.3, 0.5, 0.3], [0.65, 0.5, 0.7]], atol=2e-3)
    np.testing.assert_allclose(r.diameter, [0.36, 0.44], rtol=4e-3)
    # The cut fractions overstate a sphere's volume by 0.26 (h/R)^2
    # (volume_fraction): R = 5.8 and 7 cells measure 1.011 and 1.007.
    np.testing.assert_allclose(r.shape_factor, 1.0, atol=1.5e-2)
    # Two spheres touching along an edge only are two regions (faces connect).
    c = np.zeros((4, 4, 4))
    c[1, 1, 1] = c[2, 2, 1] = 1.0
    assert gas_regions(xp.asarray(c), still(xp, c.shape), (0.1,) * 3).count == 2


def test_plic_polygon_area_in_3d(backend):
    """A tilted plane's PLIC polygons add up to its area in the box to
    about 1e-8; a sphere's to 4 pi R^2 within 1e-3 at R = 8 cells."""
    xp = backend.xp
    n = 16
    h = 1.0 / n
    X = centres(n, 3)
    phi = (X[2] - 0.4 - 0.2 * X[0]) / math.sqrt(1.04)
    c = volume_fraction(xp.asarray(phi), (h,) * 3)
    area = float(xp.sum(interface_measure(c, (h,) * 3, normal_from=xp.asarray(phi))))
    assert area == pytest.approx(math.sqrt(1.04), rel=1e-8)
    n = 32
    phi = balls(n, [((0.5, 0.5, 0.5), 0.25)], dims=3)
    c = volume_fraction(xp.asarray(phi), (1.0 / n,) * 3)
    area = float(xp.sum(interface_measure(c, (1.0 / n,) * 3, normal_from=xp.asarray(phi))))
    assert area == pytest.approx(4 * math.pi * 0.25 ** 2, rel=1e-3)



@pytest.mark.parametrize("normals", ["level set", "youngs"])
def test_plic_segment_lengths_in_2d(backend, normals):
    """A tilted line's PLIC segments add up to its length in the box (to
    rounding with the level set's normals), a circle's to its perimeter
    within 2 % at R = 10 cells; the
    backend's lengths are the array code's to rounding, cell by cell."""
    xp = backend.xp
    n = 40
    h = 1.0 / n
    X = centres(n, 2)
    phi = (X[1] - 0.4 - 0.2 * X[0]) / math.sqrt(1.04)
    for phi, length, rel in ((phi, math.sqrt(1.04), 1e-12),
                             (balls(n, [((0.5, 0.5), 0.25)]), 2 * math.pi * 0.25, 2e-2)):
        c = volume_fraction(xp.asarray(phi), (h, h))
        normal_from = xp.asarray(phi) if normals == "level set" else None
        got = interface_measure(c, (h, h), normal_from=normal_from)
        assert float(xp.sum(got)) == pytest.approx(length, rel=rel if normals == "level set"
                                                    else max(rel, 1e-2))
        want = interface_measure.reference(c, (h, h), normal_from=normal_from)
        np.testing.assert_allclose(backend.to_host(got), backend.to_host(want), rtol=0,
                                   atol=1e-15)

# ---------------------------------------------------------------- tracking
def test_approaching_bubbles_merge_into_the_larger_ones_id(backend):
    xp = backend.xp
    tracker = BubbleTracker()
    for step, gap in enumerate([0.4, 0.3, 0.1]):
        regions = sample(xp, [((0.5 - gap / 2 - 0.1, 0.5), 0.1),
                              ((0.5 + gap / 2 + 0.12, 0.5), 0.12)])
        ids = tracker.update(step, 0.1 * step, regions)
    sample_ids = [sorted(r[2] for r in tracker.rows() if r[0] == s) for s in range(3)]
    assert sample_ids[0] == [1, 2] and sample_ids[1] == [1, 2]
    assert kinds(tracker, 1) == []
    regions = sample(xp, [((0.42, 0.5), 0.1), ((0.62, 0.5), 0.12)])   # overlapping
    ids = tracker.update(3, 0.3, regions)
    assert regions.count == 1 and ids.tolist() == [2]
    assert kinds(tracker, 3) == [("merged", 2, 1)]
    assert [r[2] for r in tracker.rows() if r[0] == 3] == [2]
    assert kinds(tracker) == [("created", 1, -1), ("created", 2, -1), ("merged", 2, 1)]


def test_pinched_bubble_splits_and_the_larger_piece_keeps_the_id(backend):
    xp = backend.xp
    tracker = BubbleTracker()
    # An elongated bubble: two overlapping circles with a neck...
    tracker.update(0, 0.0, sample(xp, [((0.5, 0.35), 0.12), ((0.5, 0.53), 0.09)]))
    # ...pinched into two (the upper piece the smaller).
    ids = tracker.update(5, 0.5, sample(xp, [((0.5, 0.33), 0.12), ((0.5, 0.63), 0.09)]))
    assert ids.tolist() == [1, 2]
    assert kinds(tracker, 5) == [("split", 1, 2)]
    assert EVENT_COLUMNS == ("step", "time", "kind", "id", "other")
    assert tracker.events()[-1][:2] == (5, 0.5)


def test_fast_bubble_is_found_by_its_centroid(backend):
    """A bubble moving farther than its diameter between samples overlaps
    nothing; it keeps its id through the nearest predicted centroid (by
    distance alone, or by its velocity); past the reach it vanishes and a
    new one is created."""
    xp = backend.xp
    tracker = BubbleTracker(reach=2.0)
    tracker.update(0, 0.0, sample(xp, [((0.5, 0.2), 0.05), ((0.2, 0.8), 0.05)]))
    ids = tracker.update(1, 0.1, sample(xp, [((0.5, 0.35), 0.05), ((0.2, 0.8), 0.05)]))
    assert ids.tolist() == [1, 2] and kinds(tracker, 1) == []
    # Rising at 4 m/s and sinking at 5 m/s: predicted 0.4 higher and 0.5
    # lower, found though far past the reach, crossing each other.
    u, v = np.zeros((N, N + 1)), np.zeros((N + 1, N))
    v[: N // 2 + 1] = 4.0
    v[N // 2 + 1:] = -5.0
    moving = (xp.asarray(u), xp.asarray(v))
    tracker.update(2, 0.2, sample(xp, [((0.5, 0.35), 0.05), ((0.2, 0.8), 0.05)],
                                  velocity=moving))
    ids = tracker.update(3, 0.3, sample(xp, [((0.5, 0.75), 0.05), ((0.2, 0.3), 0.05)]))
    assert kinds(tracker, 3) == [] and ids.tolist() == [2, 1]
    ids = tracker.update(4, 0.4, sample(xp, [((0.8, 0.1), 0.05), ((0.2, 0.3), 0.05)]))
    assert ids.tolist() == [3, 2]
    assert kinds(tracker, 4) == [("created", 3, -1), ("vanished", 1, -1)]


def test_bubble_predicted_past_the_domain_has_left(backend):
    """A bubble gone without a trace whose predicted centroid lies outside
    the domain left it (an open boundary); one predicted inside vanished."""
    xp = backend.xp
    u, v = np.zeros((N, N + 1)), np.zeros((N + 1, N))
    v[N // 2:] = 10.0                            # the upper half rises fast
    tracker = BubbleTracker()
    tracker.update(0, 0.0, sample(xp, [((0.5, 0.9), 0.05), ((0.5, 0.2), 0.05)],
                                  velocity=(xp.asarray(u), xp.asarray(v))))
    tracker.update(1, 0.1, sample(xp, []))
    assert kinds(tracker, 1) == [("left", 2, -1), ("vanished", 1, -1)]


def test_bubble_reaching_the_free_surface_has_left(backend):
    """The gas above a free surface is a layer (no id, no row); a bubble
    that joins it has left; one pinched off it is created."""
    xp = backend.xp
    tracker = BubbleTracker()

    def with_surface(spheres):
        phi = np.minimum(balls(N, spheres), 0.8 - centres(N, 2)[1])
        state = FlowState(phi=xp.asarray(phi), velocity=still(xp, phi.shape), p=None)
        return state_regions(state, (H, H))

    ids = tracker.update(0, 0.0, with_surface([((0.5, 0.6), 0.1), ((0.3, 0.3), 0.08)]))
    assert ids.tolist() == [1, 2, -1]
    ids = tracker.update(1, 0.1, with_surface([((0.5, 0.75), 0.1), ((0.3, 0.3), 0.08)]))
    assert ids.tolist() == [1, -1] and kinds(tracker, 1) == [("left", 2, -1)]
    assert {r[2] for r in tracker.rows() if r[0] == 1} == {1}
    # A drop of the layer's gas pinched off under it.
    ids = tracker.update(2, 0.2, with_surface([((0.3, 0.3), 0.08), ((0.6, 0.7), 0.05)]))
    assert ids.tolist() == [1, 3, -1] and kinds(tracker, 2) == [("created", 3, -1)]


def test_tracker_state_round_trip_continues_identically(backend):
    """state() is plain arrays; from_state() of it (also after a copy, as
    read back from a file) links the next samples as the original does."""
    xp = backend.xp
    path = [[((0.35, 0.3), 0.08), ((0.6, 0.3), 0.1)],
            [((0.38, 0.33), 0.08), ((0.58, 0.34), 0.1)],
            [((0.42, 0.36), 0.08), ((0.56, 0.37), 0.1)],           # merged
            [((0.49, 0.42), 0.1), ((0.49, 0.55), 0.06)],           # stretched
            [((0.49, 0.43), 0.1), ((0.49, 0.6), 0.06)],            # split
            [((0.49, 0.45), 0.1), ((0.49, 0.63), 0.06)]]
    samples = [sample(xp, s) for s in path]
    fresh = BubbleTracker.from_state(BubbleTracker(reach=1.5).state())
    assert fresh.reach == 1.5 and fresh.previous is None
    a = BubbleTracker(reach=1.5)
    for k in range(2):
        a.update(k, 0.1 * k, samples[k])
    state = a.state()
    assert sorted(state) == sorted(STATE_KEYS)
    assert all(isinstance(v, np.ndarray) for v in state.values())
    b = BubbleTracker.from_state({k: np.array(v) for k, v in state.items()})
    rows, events = len(a.rows()), len(a.events())
    for k in range(2, len(samples)):
        assert a.update(k, 0.1 * k, samples[k]).tolist() == b.update(k, 0.1 * k,
                                                                     samples[k]).tolist()
    assert a.rows()[rows:] == b.rows() and a.events()[events:] == b.events()
    assert [e[2] for e in b.events()] == [EVENT_KINDS.index("merged"),
                                          EVENT_KINDS.index("split")]
    with pytest.raises(ValueError, match="key 'labels' missing"):
        BubbleTracker.from_state({k: v for k, v in state.items() if k != "labels"})


def test_tables_name_their_columns_and_units():
    assert bubble_columns(2) == ("step", "time", "id", "area", "centroid_x", "centroid_y",
                                 "velocity_x", "velocity_y", "diameter", "circularity")
    assert bubble_columns(3)[3] == "volume" and bubble_columns(3)[-1] == "sphericity"
    for nd in (2, 3):
        assert set(bubble_columns(nd)) <= set(COLUMN_UNITS)
    assert set(EVENT_COLUMNS) <= set(COLUMN_UNITS)
    assert COLUMN_UNITS["area"] == "m^2" and COLUMN_UNITS["velocity_z"] == "m/s"
    with pytest.raises(ValueError, match="4-D"):
        bubble_columns(4)
    tracker = BubbleTracker()
    tracker.update(0, 0.0, sample(np, [((0.5, 0.5), 0.1)]))
    assert len(tracker.rows()[0]) == len(bubble_columns(2))
    with pytest.raises(ValueError, match="shape"):
        tracker.update(1, 0.1, sample(np, [((0.5, 0.5), 0.1)], n=32))
    with pytest.raises(ValueError, match="reach=-1.0"):
        BubbleTracker(reach=-1)
    with pytest.raises(ValueError, match="spacing"):
        gas_regions(np.zeros((4, 4)), still(np, (4, 4)), (0.1, 0.1, 0.1))
    state = tracker.state()
    state["ids"] = state["ids"][:0]
    with pytest.raises(ValueError, match="labels of shape"):
        BubbleTracker.from_state(state)


def test_two_bubbles_of_a_clsvof_flow_keep_their_ids(backend):
    """A short CLSVOF flow with two bubbles under a free surface: both keep
    their ids, the gas above the surface is a layer, and the regions'
    volumes add up to the flow's gas volume."""
    case = load_case(os.path.join(ROOT, "cases/two_phase.yaml"), [
        ("grid.nx", 20), ("grid.ny", 40), ("levelset.method", "clsvof"),
        ("geometry.bubbles", [{"center": [0.5, 0.4], "radius": 0.2},
                              {"center": [0.5, 1.1], "radius": 0.15}]),
        ("geometry.free_surface", 1.7),
        ("output.interval", None)])
    solver = FlowSolver(case, backend)
    state = solver.initial_state()
    spacing = (1.0 / 20, 2.0 / 40)
    tracker = BubbleTracker()
    for k in range(4):
        regions = state_regions(state, spacing)
        assert tracker.update(state.step, state.time, regions).tolist() == [1, 2, -1]
        total = solver.diagnostics(state)["area"]
        assert float(np.sum(regions.volume)) == pytest.approx(total, rel=1e-12)
        for _ in range(2):
            state, _ = solver.step(state)
    assert kinds(tracker) == [("created", 1, -1), ("created", 2, -1)]
    first, last = tracker.rows()[0], tracker.rows()[-2]
    assert last[2] == 1 and last[0] == 6 and last[5] != first[5]


def test_auto_sampling_is_every_step_on_the_cpu_and_every_tenth_on_a_gpu(backend):
    """``output.bubbles_every: auto`` (the default) resolves per backend; a
    number is taken as it is."""
    from bubbleflow.flow.bubble_tracking import AUTO_SAMPLE_EVERY, sample_interval

    case = load_case(os.path.join(ROOT, "cases", "two_phase.yaml"))
    assert case.output.bubbles_every == "auto"
    assert sample_interval("auto", backend) == (10 if backend.name == "cupy" else 1)
    assert AUTO_SAMPLE_EVERY == {"numpy": 1, "cupy": 10}
    assert sample_interval(3, backend) == 3 and sample_interval(0, backend) == 0


@pytest.mark.gpu
@pytest.mark.parametrize("shape,count,single", [
    ((40, 30), 1, True), ((40, 30), 3, False), ((64, 48), 4, False), ((9, 11, 7), 1, True),
    ((12, 9, 10), 4, False), ((20, 20), 6, False)])
def test_the_region_moments_kernel_is_its_array_code(cp, shape, count, single):
    """Every region's moments in one pass on the GPU (at most four regions;
    more: the array code) against the array code's weights and sums, owners
    given or every cell region 1."""
    from bubbleflow.flow.gas_regions import region_moments

    rng = np.random.default_rng(7)
    nd = len(shape)
    labels = rng.integers(0, count + 1, shape).astype(np.int32)
    labels[-1, ..., : shape[-1] // 2] = count          # core cells on the top plane
    owner = None if single else np.where(labels > 0, labels,
                                         rng.integers(1, count + 1, shape)).astype(np.int32)
    c = rng.random(shape)
    faces = [list(shape) for _ in range(nd)]
    for a in range(nd):
        faces[a][nd - 1 - a] += 1
    velocity = tuple(rng.standard_normal(f) for f in faces)
    spacing = (0.1, 0.2, 0.3)[:nd]
    measure = rng.random(shape)

    def args(xp):
        return (None if owner is None else xp.asarray(owner), xp.asarray(labels), xp.asarray(c),
                tuple(xp.asarray(v) for v in velocity), spacing, xp.asarray(measure), count)

    ref = region_moments.reference(*args(np))
    got = region_moments(*args(cp))
    assert len(got) == len(ref) == 2 * nd + 3
    for g, r in zip(got, ref):
        assert isinstance(g, np.ndarray) and g.shape == (count,)
        np.testing.assert_allclose(g, r, rtol=1e-12, atol=1e-12)
    assert ref[-1].sum() > 0                            # the top plane's cores counted


@pytest.mark.gpu
def test_the_pair_count_kernel_is_its_array_code(cp):
    """Two label fields' overlap table: random labels, and a block of one
    pair wider than a warp (its lanes add once), an empty field, no regions."""
    from bubbleflow.flow.bubble_tracking import pair_counts

    rng = np.random.default_rng(5)
    for shape, counts in (((64, 96), (3, 4)), ((9, 20, 33), (7, 1)), ((5, 5), (0, 2)),
                          ((3, 40), (2, 0))):
        a = rng.integers(0, counts[0] + 1, shape).astype(np.int32)
        b = rng.integers(0, counts[1] + 1, shape).astype(np.int32)
        a[..., : shape[-1] // 2] = counts[0]
        b[..., : shape[-1] // 2] = counts[1]
        ref = pair_counts.reference(a, b, *counts)
        got = pair_counts(cp.asarray(a), cp.asarray(b), *counts)
        assert got.shape == ref.shape == counts
        assert np.array_equal(cp.asnumpy(got).astype(np.int64), ref), (shape, counts)


def test_one_region_owns_every_cell_without_a_distance_transform(backend, monkeypatch):
    """With one region every cell's nearest core cell is its own: the
    measures are those the distance transform's owners give, bit for bit
    (a wisp of gas holding no core counted in), and the transform is not run."""
    from bubbleflow.flow import gas_regions as module

    xp = backend.xp
    phi = balls(N, [((0.45, 0.4), 0.15)])
    c = np.asarray(backend.to_host(volume_fraction(xp.asarray(phi), (H, H)))).copy()
    c[int(0.8 * N), int(0.2 * N)] = 0.3                          # a wisp
    c = xp.asarray(c)
    velocity = still(xp, c.shape)
    labels, count = module.label_regions(c > 0.5)
    assert count == 1
    owners = module.nearest_labels(labels, (H, H))
    assert bool((owners == 1).all())
    calls = []
    monkeypatch.setattr(module, "nearest_labels", lambda *a: calls.append(a) or owners)
    r = module.gas_regions(c, velocity, (H, H), normal_from=xp.asarray(phi))
    assert not calls and r.count == 1
    assert float(r.volume[0]) == pytest.approx(gas_volume(c, (H, H)), rel=1e-12)
    measure = module.interface_measure(c, (H, H), xp.asarray(phi))
    owned = module.region_moments(owners, labels, c, velocity, (H, H), measure, 1)
    assert float(owned[0][0]) * H * H == float(r.volume[0])
