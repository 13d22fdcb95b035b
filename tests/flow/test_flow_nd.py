"""The flow of any dimension (levelset, momentum, FlowSolver).

In 2-D it must give the 2-D solver's numbers (the schemes written once over
the axes); in 3-D: the sphere's geometry, transport, the rising bubble's
symmetry and conservation, the case keys, the command line with its output
and restart.
"""
import os

import h5py
import numpy as np
import pytest

from bubbleflow.case.config import CaseError, load_case
from bubbleflow.flow import bubble_measures, flow_solver, levelset, momentum
from bubbleflow.flow.navier_stokes import FlowSolver
from helpers.cli import ROOT, run_cli, run_interrupted

RISING_3D = os.path.join(ROOT, "cases/rising_bubble_3d.yaml")
SMALL_3D = ["grid.nx=12", "grid.ny=12", "grid.nz=24"]


def _field_2d(seed=0):
    rng = np.random.default_rng(seed)
    ny, nx = 24, 18
    hx, hy = 1 / 18, 2 / 24
    y, x = np.meshgrid((np.arange(ny) + .5) * hy, (np.arange(nx) + .5) * hx, indexing="ij")
    phi = np.sqrt((x - .5) ** 2 + (y - .9) ** 2) - .25 + 0.02 * np.sin(7 * x)
    u = rng.standard_normal((ny, nx + 1))
    v = rng.standard_normal((ny + 1, nx))
    u[:, [0, -1]] = 0
    v[[0, -1]] = 0
    return phi, u, v, hx, hy


def _close(a, b, tol=1e-13):
    np.testing.assert_allclose(a, b, rtol=0, atol=tol * max(np.abs(b).max(), 1e-300))


def test_2d_measures_agree_on_a_circle():
    """In 2-D the benchmark's measure is the contour's; the volume measure's
    co-area length and circularity describe the same circle."""
    n = 64
    h = 1.0 / n
    c = (np.arange(n) + 0.5) * h
    y, x = np.meshgrid(c, c, indexing="ij")
    phi = np.hypot(x - 0.47, y - 0.52) - 0.2
    zero = (np.zeros((n, n + 1)), np.zeros((n + 1, n)))
    d = bubble_measures.bubble_diagnostics(phi, zero, (h, h), 1.5 * h)
    assert "interface_length" in d and "volume" not in d
    v = bubble_measures.bubble_diagnostics(phi, zero, (h, h), 1.5 * h,
                                           measure=bubble_measures.VolumeMeasure(sharp=False))
    assert v["surface"] == pytest.approx(d["interface_length"], rel=2e-3)
    assert v["volume"] == pytest.approx(d["area"], rel=1e-12)
    assert v["sphericity"] == pytest.approx(d["circularity"], abs=3e-3)
    assert (v["centroid_x"], v["centroid_y"]) == pytest.approx((0.47, 0.52), abs=1e-3 * h)


def _extruded(f, ny):
    """A 2-D (z, x) array repeated along y: the 3-D (z, y, x) array."""
    return np.repeat(f[:, None, :], ny, axis=1)


@pytest.mark.parametrize("rule", ["arithmetic", "harmonic", "levelset"])
def test_momentum_terms_of_a_flow_uniform_along_y_are_the_2d_terms(rule):
    """A 3-D flow that does not vary along y (v = 0, free-slip y walls, so
    the mirrored ghosts keep it uniform) has in every (x, z) plane the 2-D
    flow's momentum terms, to rounding (the 3-D sums run in other orders):
    the schemes are written once over the axes."""
    phi, u, w, hx, hz = _field_2d(1)
    nz, nx = phi.shape
    ny, hy = 3, 0.07
    p = np.random.default_rng(2).standard_normal(phi.shape)
    two = dict(vel=(u, w), phi=phi, p=p, spacing=(hx, hz), signs=((-1.0, 1.0), (-1.0, -1.0)),
               heights=(((np.arange(nz) + 0.5) * hz)[:, None], (np.arange(1, nz) * hz)[:, None]))
    three = dict(vel=(_extruded(u, ny), np.zeros((nz, ny + 1, nx)), _extruded(w, ny)),
                 phi=_extruded(phi, ny), p=_extruded(p, ny), spacing=(hx, hy, hz),
                 signs=((-1.0, 1.0), (1.0, 1.0), (-1.0, -1.0)),
                 heights=tuple(h[..., None] for h in (two["heights"][0],) * 2 + two["heights"][1:]))
    dt, rg = 1e-3, momentum.ReducedGravity(9.81, 100.0, 1000.0)
    out = {}
    for nd, f in ((2, two), (3, three)):
        vel, spacing, signs = f["vel"], f["spacing"], f["signs"]
        H, rho, mu, faces = momentum.fluid_properties(f["phi"], 1.5 * hz, 1000, 100, 10, 1, rule)
        coef = momentum.interface_coefficients(f["phi"], spacing, 24.5, f["heights"],
                                                  9.81 * 900, 0.8)
        adv = momentum.advection_terms(vel, faces, mu, spacing, signs)
        rhss = momentum.implicit_rhs(vel, mu, faces, adv, dt, spacing)
        x = [0.5 * r / rf for r, rf in zip(rhss, faces)]
        div = momentum.divergence(vel, spacing)
        out[nd] = dict(
            properties=(H, rho, mu), faces=faces, coef=coef, central=momentum.advection_terms(
                vel, faces, 1e4 * mu, spacing, signs), adv=adv, rhs=rhss,
            volumetric=momentum.provisional_velocity(vel, H, mu, faces, coef, dt, spacing, signs,
                                                        0.98),
            reduced=momentum.provisional_velocity(vel, H, mu, faces, coef, dt, spacing, signs,
                                                     0.0, rg),
            implicit=momentum.implicit_velocity(x, vel, H, faces, coef, dt, spacing, 0.0, rg),
            div=(div,), corrected=momentum.correct_velocity(vel, f["p"], faces, div, dt,
                                                              spacing)[0])
    for name, two_d in out[2].items():
        three_d = out[3][name]
        if len(three_d) == 3 and len(two_d) == 2:             # per axis: x and z
            if name not in ("faces", "coef"):                 # (a y velocity stays 0)
                assert not np.asarray(three_d[1]).any(), name
            three_d = (three_d[0], three_d[2])
        for a, b in zip(two_d, three_d):
            for j in range(ny):
                _close(np.broadcast_to(b, b.shape)[:, j, :], a, 1e-12)


def _sphere(n, centre=(0.5, 0.5, 0.53), radius=0.25):
    h = 1.0 / n
    c = (np.arange(n) + 0.5) * h
    z, y, x = np.meshgrid(c, c, c, indexing="ij")
    phi = np.sqrt((x - centre[0]) ** 2 + (y - centre[1]) ** 2 + (z - centre[2]) ** 2) - radius
    zero = tuple(np.zeros(s) for s in ((n, n, n + 1), (n, n + 1, n), (n + 1, n, n)))
    return phi, zero, (h, h, h)


@pytest.mark.parametrize("n", [32, 48])
def test_sphere_volume_surface_sphericity_and_curvature(n):
    phi, zero, spacing = _sphere(n)
    d = bubble_measures.bubble_diagnostics(phi, zero, spacing, 1.5 / n)
    r = 0.25
    assert d["volume"] == pytest.approx(4 / 3 * np.pi * r ** 3, rel=1e-4)
    assert d["surface"] == pytest.approx(4 * np.pi * r * r, rel=2e-3)
    assert d["sphericity"] == pytest.approx(1.0, abs=2e-3)
    assert (d["centroid_x"], d["centroid_y"], d["centroid_z"]) == pytest.approx((0.5, 0.5, 0.53), abs=1e-5)
    band = np.abs(phi) < 1.0 / n
    kappa = levelset.curvature(phi, spacing)[band]
    assert np.median(kappa) == pytest.approx(2 / r, rel=0.02)
    # A spheroid is less spherical.
    z, y, x = np.meshgrid(*(np.arange(n) + 0.5,) * 3, indexing="ij")
    flat = np.sqrt(((x + 0.5) / n - 0.5) ** 2 + ((y + 0.5) / n - 0.5) ** 2
                   + (1.6 * ((z + 0.5) / n - 0.5)) ** 2) - r
    assert bubble_measures.bubble_diagnostics(flat, zero, spacing, 1.5 / n)["sphericity"] < 0.99


def test_sphere_carried_by_a_uniform_flow_keeps_its_shape():
    n = 32
    phi, zero, spacing = _sphere(n, centre=(0.4, 0.45, 0.4), radius=0.2)
    velocity = tuple(np.full(z.shape, s) for z, s in zip(zero, (0.5, 0.25, 1.0)))
    dt, steps = 0.25 / n, 24                            # CFL 0.44 along z
    for k in range(steps):
        phi = levelset.advect(phi, velocity, dt, spacing)
        if k % 6 == 5:
            phi = levelset.reinitialize(phi, spacing, iterations=4)
    d = bubble_measures.bubble_diagnostics(phi, velocity, spacing, 1.5 / n)
    t = dt * steps
    assert (d["centroid_x"], d["centroid_y"], d["centroid_z"]) == pytest.approx(
        (0.4 + 0.5 * t, 0.45 + 0.25 * t, 0.4 + t), abs=2e-3)
    assert d["volume"] == pytest.approx(4 / 3 * np.pi * 0.2 ** 3, rel=0.02)
    assert d["sphericity"] > 0.995
    assert d["rise_velocity"] == pytest.approx(1.0)


@pytest.mark.parametrize("method,asymmetry", [("levelset", 1e-10), ("clsvof", 5e-2)])
def test_3d_bubble_rises_symmetric_divergence_free(backend, method, asymmetry):
    """The case is symmetric in x <-> y: the level set keeps it to rounding;
    CLSVOF's split advection sweeps the axes one after the other (the order
    rotating with the step), which breaks the swap by a few per cent of the
    velocity at 12 x 12 x 24, while the mirror symmetries about the centre
    planes (the centroid) hold to rounding."""
    case = load_case(RISING_3D, SMALL_3D + ["time.end=0.4", f"levelset.method={method}"])
    solver = flow_solver(case, backend)
    assert isinstance(solver, FlowSolver)
    state = solver.initial_state()
    v0 = solver.diagnostics(state)["volume"]
    while state.time < case.time.end:
        state, rep = solver.step(state)
        assert rep.record.converged and rep.divergence < 1e-6
    d = rep.diagnostics
    assert d["rise_velocity"] > 0.1 and d["centroid_z"] > 0.52
    assert (d["centroid_x"], d["centroid_y"]) == pytest.approx((0.5, 0.5), abs=1e-9)
    assert d["volume"] == pytest.approx(v0, rel=0.03)
    u, v = (backend.to_host(f) for f in (state.u, state.v))
    np.testing.assert_allclose(np.swapaxes(u, 1, 2), v, atol=asymmetry * np.abs(v).max())


def test_3d_case_keys_and_what_3d_refuses(tmp_path):
    case = load_case(RISING_3D)
    assert case.grid.ndim == 3 and case.grid.cells == (32, 32, 64)
    assert case.geometry.bubbles[0].center == (0.5, 0.5, 0.5)

    def error(*overrides):
        with pytest.raises(CaseError) as info:
            load_case(RISING_3D, list(overrides))
        return str(info.value)

    assert "geometry.bubbles[0].center: got [0.5, 0.5]; expected three numbers" in error(
        "geometry.bubbles[0].center=[0.5,0.5]")
    assert "a sphere inside the domain" in error("geometry.bubbles[0].center=[0.1,0.5,0.5]")
    assert "solver.deflation.subdomains" in error("solver.deflation.type=subdomains",
                                                  "solver.method=dpcg",
                                                  "solver.deflation.subdomains=[4,4]")
    two = os.path.join(ROOT, "cases/two_phase.yaml")
    with pytest.raises(CaseError, match="expected two numbers"):
        load_case(two, ["geometry.bubbles[0].center=[0.5,0.5,0.5]"])
    with pytest.raises(CaseError, match="boundaries.front"):
        load_case(two, ["boundaries.front=free_slip"])


def test_3d_flow_from_the_command_line_writes_and_restarts(tmp_path):
    common = ["--backend", "numpy", "-q", "--no-progress", "--set", "output.interval=0.2",
              *[x for o in SMALL_3D for x in ("--set", o)]]
    full, part, cont = run_interrupted(RISING_3D, tmp_path, common, 0.2, 0.4)
    with h5py.File(full) as a, h5py.File(cont) as b:
        assert a["fields/w"].shape == (3, 25, 12, 12) and a["fields/u"].shape == (3, 24, 12, 13)
        assert a["fields/w"].dims[1].label == "z_faces" and a["fields/p"].dims[0].label == "time"
        for name in ("volume", "centroid_z", "rise_velocity", "sphericity"):
            np.testing.assert_array_equal(a["diagnostics"][name][()], b["diagnostics"][name][()])
        np.testing.assert_array_equal(a["fields/w"][-1], b["fields/w"][-1])
    xdmf = open(str(full).replace(".h5", ".xdmf")).read()
    assert 'TopologyType="3DRectMesh" Dimensions="25 13 13"' in xdmf
    assert 'GeometryType="VXVYVZ"' in xdmf and 'Dimensions="24 12 12 3"' in xdmf
    res = run_cli("plot", str(full), "-o", str(tmp_path / "png"))
    assert res.returncode == 0, res.stderr
    for kind in ("fields", "convergence", "benchmark", "iterations"):
        assert (tmp_path / "png" / f"rising_bubble_3d_{kind}.png").stat().st_size > 10_000


def test_rising_bubble_3d_case_is_recognised_for_its_reference_markers():
    from bubbleflow.apps.plots_3d import is_rising_bubble_3d

    case = load_case(RISING_3D, SMALL_3D).to_dict()
    assert is_rising_bubble_3d(case)
    assert not is_rising_bubble_3d(load_case(RISING_3D, ["physics.surface_tension=10"]).to_dict())


def test_3d_pressure_case_from_the_command_line(tmp_path):
    res = run_cli("run", "cases/bubbly_column_3d.yaml", "--backend", "numpy", "-o", str(tmp_path),
                  "--set", "grid.nx=24", "--set", "grid.ny=24", "--set", "grid.nz=24")
    assert res.returncode == 0, res.stderr
    assert "24 x 24 x 24 cells, 8 spheres" in res.stdout and "converged" in res.stdout
    res = run_cli("plot", str(tmp_path / "bubbly_column_3d.h5"))
    assert res.returncode == 0 and "bubbly_column_3d_fields.png" in res.stdout, res.stderr
    with h5py.File(tmp_path / "bubbly_column_3d.h5") as f:
        p = f["fields/p"][()]
        assert p.shape == (24, 24, 24)
    # The answer of a direct solve of the same system (grounded at one cell).
    from scipy.sparse.linalg import spsolve

    from bubbleflow.case.problem import build_pressure_problem
    from bubbleflow.compute.backend import get_backend

    case = load_case(os.path.join(ROOT, "cases/bubbly_column_3d.yaml"),
                     ["grid.nx=24", "grid.ny=24", "grid.nz=24"])
    prob = build_pressure_problem(case, get_backend("numpy"))
    A = prob.A.to_scipy().tocsr()
    exact = np.zeros(A.shape[0])
    exact[1:] = spsolve(A[1:, 1:].tocsc(), np.ravel(prob.rhs)[1:])
    exact = np.ravel(prob.whole_pressure(exact))
    exact -= exact.mean()
    got = p.ravel() - p.mean()
    assert np.abs(got - exact).max() <= 1e-6 * np.abs(exact).max()


def test_sharp_moments_remove_the_smoothing_bias_of_the_rise_velocity():
    """A gas sphere moving at 1 in liquid whose speed falls off as (R/r)^3
    (the potential flow's decay): the sharp region's mean speed is 1; the
    smoothed weights mix in the slower liquid (1.5 % here); the sharp
    moments take a third of that (the speed's kink at the interface leaves
    an eps^3 term)."""
    n = 32
    phi, zero, spacing = _sphere(n, centre=(0.5, 0.5, 0.5))
    r = phi + 0.25
    speed = np.minimum(1.0, (0.25 / np.maximum(r, 1e-12)) ** 3)
    w = np.zeros((n + 1, n, n))
    w[1:-1] = 0.5 * (speed[1:] + speed[:-1])
    w[0], w[-1] = speed[0], speed[-1]
    velocity = (zero[0], zero[1], w)
    smooth = bubble_measures.bubble_diagnostics(
        phi, velocity, spacing, 1.5 / n, measure=bubble_measures.VolumeMeasure(sharp=False))
    sharp = bubble_measures.bubble_diagnostics(phi, velocity, spacing, 1.5 / n)
    assert 1.0 - smooth["rise_velocity"] > 5e-3
    assert abs(1.0 - sharp["rise_velocity"]) < 0.4 * (1.0 - smooth["rise_velocity"])


COLUMN_3D = os.path.join(ROOT, "cases/bubbly_column_3d.yaml")


def test_3d_lattice_and_random_spheres():
    from bubbleflow.mesh.grid import Grid
    from bubbleflow.mesh.levelset import build_levelset, geometry_circles

    case = load_case(COLUMN_3D, ["geometry.bubbles=[]", "grid.nx=16", "grid.ny=16", "grid.nz=16",
                                 "geometry.bubble_lattice={columns: 2, rows: 3, layers: 2, "
                                 "radius: 0.08, x_range: [0.3, 0.7], y_range: [0.2, 0.8], "
                                 "z_range: [0.3, 0.6]}",
                                 "geometry.random_bubbles={count: 5, radius: 0.05, seed: 3, "
                                 "region: [0.1, 0.9, 0.1, 0.9, 0.1, 0.8]}"])
    grid = Grid.from_config(case.grid)
    spheres = geometry_circles(case.geometry, grid)
    assert len(spheres) == 12 + 5 and all(s.z is not None for s in spheres)
    assert [s.centre for s in spheres[:2]] == [(0.3, 0.2, 0.3), (0.7, 0.2, 0.3)]
    random = spheres[12:]
    assert random == geometry_circles(case.geometry, grid)[12:]           # reproducible
    for i, a in enumerate(spheres):
        for b in spheres[:i]:
            assert np.linalg.norm(np.subtract(a.centre, b.centre)) >= a.radius + b.radius
    phi = build_levelset(grid, case.geometry.free_surface, spheres)
    assert phi.shape == (16, 16, 16) and (phi < 0).any()


@pytest.mark.parametrize("overrides, fragment", [
    (["geometry.bubble_lattice={columns: 2, rows: 2, radius: 0.1, x_range: [0.3, 0.7], "
      "y_range: [0.3, 0.7]}"], "geometry.bubble_lattice.layers: missing on a 3-D grid"),
    (["geometry.random_bubbles={count: 3, radius: 0.05, region: [0.1, 0.9, 0.1, 0.5]}"],
     "six numbers [x0, x1, y0, y1, z0, z1] in 3-D"),
    (["geometry.random_bubbles={count: 2000, radius: 0.05, region: [0, 1, 0, 1, 0, 0.8]}"],
     "geometry.random_bubbles.count"),
    (["geometry.bubbles=[{center: [0.5, 0.5, 0.8], radius: 0.1}]"], "free surface"),
])
def test_3d_geometry_errors_are_one_line(overrides, fragment):
    with pytest.raises(CaseError) as info:
        load_case(COLUMN_3D, overrides)
    assert fragment in str(info.value) and "\n" not in str(info.value)


def test_2d_case_refuses_3d_lattice_keys():
    with pytest.raises(CaseError, match="geometry.bubble_lattice.layers"):
        load_case(os.path.join(ROOT, "cases/bubbly_column.yaml"),
                  ["geometry.bubble_lattice.layers=2"])


def test_3d_grid_without_lz_is_a_unit_height_and_sweeps_run_in_3d(tmp_path):
    from bubbleflow.mesh.grid import Grid

    case = load_case(COLUMN_3D, ["grid.lz=null", "grid.nx=8", "grid.ny=8", "grid.nz=8"])
    assert Grid.from_config(case.grid).lengths == (1.0, 1.0, 1.0)
    study = tmp_path / "study3d.yaml"
    study.write_text(
        "name: s3\nmode: pressure\nbackend: numpy\ngrid: {nx: 16, ny: 16, nz: 16}\n"
        "geometry:\n  free_surface: 0.85\n  bubble_lattice: {columns: 2, rows: 2, layers: 2, "
        "radius: 0.1, x_range: [0.3, 0.7], y_range: [0.3, 0.7], z_range: [0.3, 0.6]}\n"
        "solver: {rtol: 1.0e-6}\n"
        "sweep:\n  name: s3\n  parameters:\n    contrast: [1, 1000000]\n")
    res = run_cli("sweep", str(study), "-o", str(tmp_path / "out"), "--no-progress")
    assert res.returncode == 0, res.stderr
    rows = (tmp_path / "out" / "s3" / "summary.csv").read_text().splitlines()
    assert len(rows) == 3 and all(",ok," in r for r in rows[1:])


class _Ranks:
    """What a stepper reads of a communicator to place rank 0 of two."""

    rank, size = 0, 2


@pytest.mark.parametrize("path,sets", [
    ("cases/two_phase.yaml", ["grid.nx=20", "grid.ny=40", "levelset.method=levelset"]),
    ("cases/rising_bubble_3d.yaml", SMALL_3D + ["levelset.method=levelset"])])
def test_one_stepper_class_for_every_dimension_and_rank_count(path, sets):
    case = load_case(os.path.join(ROOT, path), sets)
    from bubbleflow.compute.backend import get_backend

    backend = get_backend("numpy")
    steppers = [flow_solver(case, backend, comm) for comm in (None, _Ranks())]
    assert case.levelset.method == "levelset"        # (CLSVOF needs thicker slabs on 2 ranks)
    assert {type(s) for s in steppers} == {FlowSolver}
    assert [type(s.partition).__name__ for s in steppers] == ["WholeGrid", "RankSlabs"]
    assert steppers[0].slab is None and steppers[1].slab.lo == 0


@pytest.mark.parametrize("ranks", [None, _Ranks()], ids=["one-process", "a-rank"])
@pytest.mark.parametrize("backend_name", ["numpy", pytest.param("cupy", marks=pytest.mark.gpu)])
def test_the_initial_state_is_built_on_the_backend(backend_name, ranks, monkeypatch):
    # The level set and the initial fraction (4^3 sub-cells a cut cell) are
    # built where the run computes, on each rank's own planes: never on the host
    # of a GPU run.
    from bubbleflow.compute.backend import get_backend
    from bubbleflow.flow import initial_state as first_state
    from bubbleflow.flow import vof_fraction

    backend = get_backend(backend_name)
    seen = []

    def spy(module, name, record):
        real = getattr(module, name)

        def call(*args, **kwargs):
            out = real(*args, **kwargs)
            seen.append(record(args, kwargs, out))
            return out

        monkeypatch.setattr(module, name, call)

    spy(first_state, "build_levelset", lambda a, k, out: ("phi", k.get("backend"), type(out)))
    spy(vof_fraction, "volume_fraction", lambda a, k, out: ("c", type(a[0]), type(out)))
    case = load_case(os.path.join(ROOT, "cases/rising_bubble_3d.yaml"),
                     ["grid.nx=12", "grid.ny=12", "grid.nz=48", "levelset.method=clsvof"])
    state = flow_solver(case, backend, ranks).initial_state()
    array = backend.xp.ndarray
    assert seen == [("phi", backend, array), ("c", array, array)]
    assert type(state.c) is array and state.c.shape == state.phi.shape
    assert state.phi.shape[0] == (48 if ranks is None else 24)
