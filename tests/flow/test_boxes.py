"""Work confined to boxes of cells (``flow.boxes``) against the whole grid's:
the volume fraction's step on the gas's box (``vof_advection.advect_in_box``),
the same bits wherever each sweep carries the gas at most one cell; the
CLSVOF transport on it (``clsvof_transport``), the same rebuilt level set;
the interface force's coefficients on the box of the cells
near the gas (``interface_force``), the same force on every face; on the
suite's backend (the CUDA sweeps, curvature and box kernel with ``--backend
cupy``), and in the flow with its adaptive step."""
import os

import numpy as np
import pytest

from bubbleflow.case.config import load_case
from bubbleflow.compute.backend import array_module
from bubbleflow.flow import (boxes, clsvof_transport, interface_force, levelset, momentum,
                             navier_stokes, vof_advection)
from bubbleflow.flow.boxes import gas_box, interface_box
from bubbleflow.flow.navier_stokes import FlowSolver
from bubbleflow.flow.vof_advection import BOX_MARGIN, advect, advect_in_box
from bubbleflow.flow.vof_redistance import redistance
from bubbleflow.mesh.grid import Grid, interior_face_heights
from bubbleflow.mesh.levelset import heaviside
from bubbleflow.flow.vof_fraction import volume_fraction
from bubbleflow.flow.vof_limits import CLIP_TOLERANCE
from helpers.cli import ROOT


def _centres(shape, spacing):
    """Cell centres as arrays of the grid's shape, x first."""
    axes = [(np.arange(n) + 0.5) * h for n, h in zip(shape[::-1], spacing)]
    return np.meshgrid(*axes[::-1], indexing="ij")[::-1]


def _gas(shape, spacing, kind):
    """Host ``(phi, c)``: ``phi < 0`` in the gas."""
    x = _centres(shape, spacing)
    L = [n * h for n, h in zip(shape[::-1], spacing)]

    def ball(centre, radius):
        return np.sqrt(sum((xa - ca * La) ** 2 for xa, ca, La in zip(x, centre, L))) \
            - radius * min(L)

    nd = len(shape)
    if kind == "bubble":
        phi = ball((0.43, 0.52, 0.47)[:nd], 0.17)
    elif kind == "two-bubbles":
        phi = np.minimum(ball((0.3, 0.35, 0.5)[:nd], 0.1), ball((0.62, 0.6, 0.55)[:nd], 0.12))
    elif kind == "wall-bubble":                          # cut by the walls at the origin
        phi = ball((0.05,) * nd, 0.2)
    elif kind == "layer":                               # gas above a free surface, to the walls
        phi = 0.8 * L[-1] - x[-1] + 0.03 * np.sin(7.0 * x[0])
    else:
        raise ValueError(kind)
    return phi, volume_fraction(phi, spacing)


def _velocity(shape, spacing, seed):
    """Random MAC face velocities, zero on the walls, and a step that
    carries at most half a cell along any axis."""
    rng = np.random.default_rng(seed)
    nd = len(shape)
    velocity = []
    for a in range(nd):
        k = nd - 1 - a
        faces = list(shape)
        faces[k] += 1
        v = rng.uniform(-1.0, 1.0, faces)
        ends = [slice(None)] * nd
        for end in (0, -1):
            ends[k] = end
            v[tuple(ends)] = 0.0
        velocity.append(v)
    dt = 0.5 / max(np.abs(v).max() / h for v, h in zip(velocity, spacing))
    return tuple(velocity), dt


GRIDS = {2: ((40, 36), (1 / 36, 1 / 36)), 3: ((22, 18, 20), (0.05, 0.06, 0.05))}
#: Grids fine enough that the force's wider box leaves part of them.
FORCE_GRIDS = {2: ((90, 96), (1 / 96, 1 / 96)), 3: ((40, 36, 44), (0.025, 0.03, 0.025))}
KINDS = ["bubble", "two-bubbles", "wall-bubble", "layer"]


@pytest.mark.parametrize("use_phi", [True, False], ids=["phi", "youngs"])
@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("nd", [2, 3])
def test_the_step_on_the_gas_box_gives_the_whole_grids_bits(nd, kind, use_phi, backend):
    shape, spacing = GRIDS[nd]
    phi, c = _gas(shape, spacing, kind)
    velocity, dt = _velocity(shape, spacing, seed=len(kind) + nd)
    xp = backend.xp
    c, phi = xp.asarray(c), xp.asarray(phi)
    velocity = tuple(xp.asarray(v) for v in velocity)
    normal_from = phi if use_phi else None
    box = gas_box(c)
    region = [(max(lo - BOX_MARGIN, 0), min(hi + BOX_MARGIN, n - 1) + 1)
              for (lo, hi), n in zip(box, shape)]
    if kind != "layer":                                 # the box spares part of the grid
        assert np.prod([hi - lo for lo, hi in region]) < 0.8 * np.prod(shape), region
    for first_axis in range(nd):
        whole = advect(c, velocity, dt, spacing, first_axis, normal_from)
        boxed = advect_in_box(c, velocity, dt, spacing, box, first_axis, normal_from)
        assert type(boxed) is type(c) and boxed.shape == c.shape
        assert bool(xp.array_equal(boxed, whole)), (first_axis, float(xp.abs(boxed - whole).max()))
        # (The gas reached new cells, and stayed inside the widened box.)
        moved = gas_box(whole)
        assert all(rlo <= lo and hi < rhi for (lo, hi), (rlo, rhi) in zip(moved, region))
    assert bool(xp.array_equal(c, xp.asarray(_gas(shape, spacing, kind)[1])))   # input kept


def test_the_gas_box_holds_every_cell_a_step_may_change(backend):
    """Gas, NaN and the small negatives the clip would zero; not zeros (of
    either sign) or negatives past the clip."""
    xp = backend.xp
    for shape in ((7, 9), (5, 6, 8)):
        c = np.zeros(shape)
        c[(2,) * len(shape)] = -0.0
        c[(0,) * len(shape)] = -2 * CLIP_TOLERANCE
        assert gas_box(xp.asarray(c)) is None
        cases = [((1,) * len(shape), 0.3), ((3,) * len(shape), np.nan),
                 ((len(shape) - 1,) * len(shape), -0.5 * CLIP_TOLERANCE),
                 (tuple(n - 1 for n in shape), 1.0)]
        for at, value in cases:
            one = c.copy()
            one[at] = value
            assert gas_box(xp.asarray(one)) == tuple((i, i) for i in at), (shape, value)
        both = c.copy()
        both[(1,) * len(shape)] = 1.0
        both[tuple(n - 2 for n in shape)] = 0.25
        assert gas_box(xp.asarray(both)) == tuple((1, n - 2) for n in shape)


def test_the_interface_box_holds_the_cells_below_its_bound(backend):
    xp = backend.xp
    phi = np.full((6, 7, 9), 0.5)
    assert interface_box(xp.asarray(phi), 0.5) is None
    phi[1, 2, 3], phi[4, 5, 0] = 0.49, np.nan
    assert interface_box(xp.asarray(phi), 0.5) == ((1, 4), (2, 5), (0, 3))
    assert interface_box(xp.asarray(phi[0]), 0.5) is None


def test_the_interface_box_bounds_read_back_are_the_box(backend):
    xp = backend.xp
    phi = np.full((6, 7, 9), 0.5)
    for cells in ([], [(1, 2, 3)], [(1, 2, 3), (4, 5, 0)], [(0, 0, 0), (5, 6, 8)]):
        for at in cells:
            phi[at] = 0.1
        for a in (phi, phi[3]):
            bounds = boxes.interface_box_bounds(xp.asarray(a), 0.5)
            assert array_module(bounds) is xp and bounds.shape == (6,)
            assert boxes.box_of_bounds(backend.to_host(bounds), a.ndim) == \
                interface_box(xp.asarray(a), 0.5), cells


@pytest.mark.gpu
def test_the_box_kernel_is_its_array_code(cp):
    from bubbleflow.flow import boxes_cuda

    rng = np.random.default_rng(3)
    for shape in ((33, 70), (9, 31, 40), (1, 1, 5)):
        for fill in (0.0, 0.01, 0.3):
            c = np.where(rng.uniform(size=shape) < fill, rng.uniform(-1e-13, 1.0, shape), 0.0)
            d = cp.asarray(c)
            assert boxes_cuda.gas_box(d) == gas_box.reference(d) == gas_box.reference(c), \
                (shape, fill)
            phi = rng.uniform(-1.0, 1.0, shape)
            bound = 2 * fill - 1.0
            assert boxes_cuda.interface_box(cp.asarray(phi), bound) == \
                interface_box.reference(phi, bound), (shape, fill)
            bounds = boxes_cuda.interface_box_bounds(cp.asarray(phi), bound)
            assert isinstance(bounds, cp.ndarray)
            assert boxes.box_of_bounds(bounds.get(), len(shape)) == \
                interface_box.reference(phi, bound), (shape, fill)


@pytest.mark.parametrize("kind", ["bubble", "two-bubbles", "wall-bubble"])
@pytest.mark.parametrize("nd", [2, 3])
def test_the_transport_on_the_gas_box_rebuilds_the_whole_grids_level_set(monkeypatch, backend,
                                                                        nd, kind):
    """Both fields carried on the gas's box, then the level set rebuilt: the
    whole grid's volume fraction and rebuilt level set, bit for bit, though
    the carried level set was left as it was away from the gas, and though
    it was carried into an array of NaN (``carried``) that kept them there:
    the rebuild reads none of its cells away from the gas."""
    shape, spacing = FORCE_GRIDS[nd]
    phi, c = _gas(shape, spacing, kind)
    velocity, dt = _velocity(shape, spacing, seed=nd + len(kind))
    xp = backend.xp
    phi, c = xp.asarray(phi), xp.asarray(c)
    velocity = tuple(xp.asarray(v) for v in velocity)
    band = navier_stokes.CLSVOF_BAND
    rebuilt = []
    for min_cells in (1 << 62, 1):
        monkeypatch.setitem(boxes.MIN_CELLS, backend.name, min_cells)
        monkeypatch.setattr(boxes, "MAX_SHARE", 0.99)
        into = xp.full_like(phi, xp.nan) if min_cells == 1 else None
        carried, c_new = clsvof_transport.transport(phi, c, velocity, dt, spacing, nd - 1, True,
                                                    carried=into)
        assert into is None or carried is into
        rebuilt.append((carried, c_new, redistance(carried, c_new, spacing, band=band,
                                                   reach=band + 1)))
    (whole, c_whole, phi_whole), (boxed, c_boxed, phi_boxed) = rebuilt
    assert bool(xp.any(boxed != whole))               # the box left cells out
    assert bool(xp.array_equal(c_boxed, c_whole))
    assert bool(xp.array_equal(phi_boxed, phi_whole))
    # Unbounded steps, or a box of more than MAX_SHARE: the whole grid.
    for bounded, share in ((False, 0.99), (True, 0.01)):
        monkeypatch.setattr(boxes, "MAX_SHARE", share)
        carried, _ = clsvof_transport.transport(phi, c, velocity, dt, spacing, nd - 1, bounded)
        assert bool(xp.array_equal(carried, whole)), (bounded, share)


@pytest.mark.parametrize("nd", [2, 3])
def test_a_grid_without_gas_is_left_as_it_is_with_the_whole_grids_results(monkeypatch, backend,
                                                                          nd):
    """A slab far from the bubbles (no gas, no interface within the
    Heaviside's reach): neither field is carried and no face has a force,
    and the volume fraction, the rebuilt level set and the force are the
    whole grid's."""
    shape, spacing = FORCE_GRIDS[nd]
    xp = backend.xp
    x = _centres(shape, spacing)
    phi = xp.asarray(0.2 + 0.1 * x[0] + 0.05 * np.sin(5.0 * x[-1]))     # liquid everywhere
    c = xp.zeros_like(phi)
    velocity, dt = _velocity(shape, spacing, seed=11 + nd)
    velocity = tuple(xp.asarray(v) for v in velocity)
    band = navier_stokes.CLSVOF_BAND
    grid = Grid.regular(shape[::-1], tuple(n * h for n, h in zip(shape[::-1], spacing)))
    args = (4, spacing, 0.07, interior_face_heights(grid, xp), 2.5, 0.31, 1.5 * max(spacing))
    results = []
    for min_cells in (1 << 62, 1):
        monkeypatch.setitem(boxes.MIN_CELLS, backend.name, min_cells)
        carried, c_new = clsvof_transport.transport(phi, c, velocity, dt, spacing, 0, True)
        results.append((carried, c_new, redistance(carried, c_new, spacing, band=band,
                                                   reach=band + 1),
                        interface_force.coefficients(phi, *args)))
    (whole, c_whole, phi_whole, f_whole), (kept, c_kept, phi_kept, f_kept) = results
    assert bool(xp.array_equal(kept, phi)) and kept is not phi
    assert bool(xp.any(whole != phi))                    # the whole grid's transport moved it
    assert bool(xp.array_equal(c_kept, c_whole)) and bool(xp.array_equal(phi_kept, phi_whole))
    H = heaviside(phi, 1.5 * max(spacing), xp)
    for a in range(nd):
        dH = xp.diff(H, axis=nd - 1 - a)
        assert not bool(xp.any(f_kept[a])) and f_kept[a].shape == f_whole[a].shape
        assert bool(xp.array_equal(-f_kept[a] * dH, -f_whole[a] * dH))


def _forces(nd, kind, passes, buoyancy, backend):
    """The interface force ``-c dH/dx`` on each axis's interior faces from
    the coefficients of the whole grid and of the box, and the two sets of
    coefficients."""
    shape, spacing = FORCE_GRIDS[nd]
    phi, _ = _gas(shape, spacing, kind)
    xp = backend.xp
    phi = xp.asarray(phi)
    grid = Grid.regular(shape[::-1], tuple(n * h for n, h in zip(shape[::-1], spacing)))
    heights = interior_face_heights(grid, xp)
    eps = 1.5 * max(spacing)
    args = (spacing, 0.07, heights, buoyancy, 0.31)
    whole = momentum.interface_coefficients(levelset.smooth(phi, passes), *args)
    box = interface_box(phi, eps + max(spacing))
    boxed = interface_force.coefficients_in_box(phi, passes, *args, box)
    H = heaviside(phi, eps, xp)
    forces = []
    for a in range(nd):
        k = nd - 1 - a
        dH = xp.diff(H, axis=k)
        forces.append((-whole[a] * dH, -boxed[a] * dH, dH))
    cut = boxes.region(box, passes + interface_force.REACH, shape)
    return forces, cut, shape


@pytest.mark.parametrize("buoyancy", [0.0, 2.5], ids=["tension", "reduced-gravity"])
@pytest.mark.parametrize("passes", [0, 4])
@pytest.mark.parametrize("kind", ["bubble", "two-bubbles", "wall-bubble"])
@pytest.mark.parametrize("nd", [2, 3])
def test_the_force_from_the_interface_box_is_the_whole_grids(nd, kind, passes, buoyancy,
                                                             backend):
    xp = backend.xp
    forces, cut, shape = _forces(nd, kind, passes, buoyancy, backend)
    assert np.prod([s.stop - s.start for s in cut]) < 0.8 * np.prod(shape), cut
    for whole, boxed, dH in forces:
        assert bool(xp.array_equal(whole, boxed))
        assert bool(xp.any(dH != 0))


def test_uncovered_slabs_hold_the_old_region_outside_the_new():
    rng = np.random.default_rng(5)
    shape = (9, 11, 10)
    for _ in range(200):
        old, new = (tuple(slice(*sorted(rng.integers(0, n + 1, 2))) for n in shape)
                    for _ in range(2))
        held = np.zeros(shape, dtype=bool)
        for slab in boxes.uncovered(old, new):
            held[slab] = True
        want = np.zeros(shape, dtype=bool)
        want[old] = True
        want[new] = False
        assert np.array_equal(held, want), (old, new)


@pytest.mark.parametrize("nd", [2, 3])
def test_kept_faces_give_each_boxs_coefficients_alone(nd, backend):
    """Coefficients written into the arrays a :class:`KeptFaces` keeps, the
    box moving (up, across, then a smaller box inside the last), are those
    of new arrays: what an earlier box wrote outside the next is zeroed."""
    shape, spacing = FORCE_GRIDS[nd]
    xp = backend.xp
    phi0, _ = _gas(shape, spacing, "bubble")
    grid = Grid.regular(shape[::-1], tuple(n * h for n, h in zip(shape[::-1], spacing)))
    args = (4, spacing, 0.07, interior_face_heights(grid, xp), 2.5, 0.31)
    kept = interface_force.KeptFaces()
    first = None
    for shift, grow in (((0,) * nd, 0.0), ((3,) + (0,) * (nd - 1), 0.0),
                        ((3,) + (-4,) * (nd - 1), 0.0), ((3,) + (-4,) * (nd - 1), 0.04)):
        phi = xp.asarray(np.roll(phi0, shift, axis=tuple(range(nd))) + grow)
        box = interface_box(phi, 2.5 * max(spacing))
        fresh = interface_force.coefficients_in_box(phi, *args, box)
        into = interface_force.coefficients_in_box(phi, *args, box, kept)
        first = into if first is None else first
        for a in range(nd):
            assert into[a] is first[a]                   # the same arrays, step to step
            assert bool(xp.array_equal(into[a], fresh[a])), (shift, grow, a)
            assert bool(xp.any(fresh[a] != 0))


def _run(case, backend, steps):
    solver = FlowSolver(case, backend)
    state = solver.initial_state()
    for _ in range(steps):
        state, _ = solver.step(state)
    return state


def _counted(monkeypatch, module, name):
    """Calls of ``module.name`` counted in the list returned."""
    calls = []
    real = getattr(module, name)
    monkeypatch.setattr(module, name, lambda *a, **k: calls.append(1) or real(*a, **k))
    return calls


@pytest.mark.parametrize("path, sets, steps", [
    ("cases/two_phase.yaml", ["grid.nx=40", "grid.ny=80"], 8),
    ("cases/rising_bubble_3d.yaml", ["grid.nx=24", "grid.ny=24", "grid.nz=48"], 2)],
    ids=["2d", "3d"])
def test_a_clsvof_flow_on_the_boxes_is_the_flow_on_the_whole_grid(monkeypatch, backend, path,
                                                                  sets, steps):
    case = load_case(os.path.join(ROOT, path), [*sets, "levelset.method=clsvof",
                                                f"backend={backend.name}"])
    monkeypatch.setitem(boxes.MIN_CELLS, backend.name, 1 << 62)     # the whole grid's
    whole = _run(case, backend, steps)
    swept = _counted(monkeypatch, vof_advection, "advect_in_box")
    forced = _counted(monkeypatch, interface_force, "coefficients_in_box")
    searched = _counted(monkeypatch, boxes, "gas_box")
    looked = _counted(monkeypatch, boxes, "interface_box")
    into, transport = [], clsvof_transport.transport
    monkeypatch.setattr(clsvof_transport, "transport",
                        lambda *a, **k: into.append(a[8]) or transport(*a, **k))
    # (Small grids: the boxes taken wherever they leave any cell out.)
    monkeypatch.setitem(boxes.MIN_CELLS, backend.name, 1)
    monkeypatch.setattr(boxes, "MAX_SHARE", 0.99)
    boxed = _run(case, backend, steps)
    assert len(swept) == steps and len(forced) == steps
    # The gas box of a step's new fraction serves the next step's transport,
    # and the interface box of its level set, read with its figures, the next
    # step's force: the first step alone looks for one.
    assert len(searched) == steps + 1 and len(looked) == 1
    # The level set carried into one array the flow keeps.
    assert len(into) == steps and len({id(a) for a in into}) == 1 and into[0] is not None
    for name in ("c", "phi", "p"):
        assert bool(backend.xp.array_equal(getattr(boxed, name), getattr(whole, name))), name
    for a, b in zip(boxed.velocity, whole.velocity):
        assert bool(backend.xp.array_equal(a, b))
    assert navier_stokes.TRANSPORT_CFL <= 1.0          # the bound the box's margin assumes
