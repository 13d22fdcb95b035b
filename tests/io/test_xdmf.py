"""The XDMF sidecar, read back with VTK's XDMF reader(s)."""
import os
import shutil
import types
import xml.etree.ElementTree as ET

import h5py
import numpy as np
import pytest

from bubbleflow.mesh.grid import Grid
from bubbleflow.io.result_writer import write_pressure_result
from bubbleflow.io.xdmf import write_xdmf

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

# (module, class): the pip wheel has vtkIOXdmf2 only; test Xdmf3 where a VTK has it.
READERS = [("vtkmodules.vtkIOXdmf2", "vtkXdmfReader"),
           ("vtkmodules.vtkIOXdmf3", "vtkXdmf3Reader")]


@pytest.fixture(params=READERS, ids=[cls for _, cls in READERS])
def read_xdmf(request):
    """``read(path) -> [(time, dataset)]``, one per time step, with the reader of the param."""
    pytest.importorskip("vtkmodules")    # the vtk wheel; lighter than importing all of vtk
    module, cls = request.param
    reader_cls = getattr(pytest.importorskip(module), cls)
    from vtkmodules.vtkCommonExecutionModel import vtkStreamingDemandDrivenPipeline as sddp

    def read(path):
        reader = reader_cls()
        reader.SetFileName(str(path))
        reader.UpdateInformation()
        info = reader.GetOutputInformation(0)
        times = info.Get(sddp.TIME_STEPS()) if info.Has(sddp.TIME_STEPS()) else (None,)
        out = []
        for t in times:
            if t is None:
                reader.Update()
            else:
                reader.UpdateTimeStep(t)
            data = reader.GetOutputDataObject(0)
            if data.IsA("vtkCompositeDataSet"):
                it = data.NewIterator()
                it.InitTraversal()
                data = it.GetCurrentDataObject()
            copy = data.NewInstance()
            copy.DeepCopy(data)
            out.append((t, copy))
        return out
    return read


def _cell_array(ds, name):
    from vtkmodules.util.numpy_support import vtk_to_numpy

    arr = ds.GetCellData().GetArray(name)
    assert arr is not None, f"no cell array {name!r}"
    return vtk_to_numpy(arr)


def _check_geometry_and_field(ds, g, name, data):
    """Bounds, cell count, and every cell's value against data[j, i] by position."""
    np.testing.assert_allclose(ds.GetBounds(), (0.0, g.lx, 0.0, g.ly, 0.0, 0.0),
                               rtol=0, atol=1e-12 * max(g.lx, g.ly))
    assert ds.GetNumberOfCells() == g.nx * g.ny
    values = _cell_array(ds, name)
    assert values.shape[0] == g.nx * g.ny
    for c in range(ds.GetNumberOfCells()):
        x0, x1, y0, y1, _, _ = ds.GetCell(c).GetBounds()
        i, j = int((x0 + x1) / 2 / g.hx), int((y0 + y1) / 2 / g.hy)
        assert np.isclose(x1 - x0, g.hx) and np.isclose(y1 - y0, g.hy)
        assert values[c] == pytest.approx(data[j, i], rel=1e-6), (c, i, j)


def _record():
    return types.SimpleNamespace(
        method="dpcg", variant="standard", preconditioner="jacobi", deflation="subdomain",
        deflation_vectors=4, rtol=1e-8, iterations=3, residual=1e-9, converged=True,
        reason="converged", setup_seconds=0.1, solve_seconds=0.2,
        residual_history=[1.0, 1e-3, 1e-9], true_residual_checks=[(3, 1e-9)])


def _pressure_file(folder, g, dtype=np.float64):
    rng = np.random.default_rng(7)
    data = {k: rng.standard_normal(g.shape).astype(dtype) for k in ("phi", "rho", "p")}
    write_pressure_result(folder / "case.h5", case_yaml="name: case\n", version="0",
                          backend="numpy", device="cpu", precision=np.dtype(dtype).name,
                          face_density="harmonic", grid=g, record=_record(), **data)
    write_xdmf(folder / "case.xdmf", g, [(0.0, "case.h5", "/fields")], ("p", "rho", "phi"))
    return data


def _flow_files(folder, g, times):
    """Snapshot files as a flow run writes them: fields at the root of each file."""
    snap_dir = folder / "run.snapshots" / "abc123"
    snap_dir.mkdir(parents=True)
    rng = np.random.default_rng(3)
    snaps, data = [], []
    for k, t in enumerate(times):
        name = f"step_{k:09d}.h5"
        d = {n: rng.standard_normal(g.shape) for n in ("phi", "rho", "p")}
        d["velocity"] = np.stack([rng.standard_normal(g.shape), rng.standard_normal(g.shape),
                                  np.zeros(g.shape)], axis=-1)
        with h5py.File(snap_dir / name, "w") as fh:
            for n, arr in d.items():
                fh[n] = arr
        snaps.append((t, os.path.join("run.snapshots", "abc123", name), "/"))
        data.append(d)
    write_xdmf(folder / "run.xdmf", g, snaps, ("p", "rho", "phi", "velocity"))
    return data


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_pressure_result_reads_back(tmp_path, read_xdmf, dtype, monkeypatch):
    g = Grid(7, 4, 2.0, 0.5)    # lx != ly and hx != hy: a swap of axes shows
    data = _pressure_file(tmp_path, g, dtype)
    monkeypatch.chdir(ROOT)     # the paths in the file are relative to its folder, not the cwd
    steps = read_xdmf(tmp_path / "case.xdmf")
    assert len(steps) == 1 and steps[0][0] in (None, 0.0)
    ds = steps[0][1]
    _check_geometry_and_field(ds, g, "p", data["p"])
    for name in ("rho", "phi"):
        np.testing.assert_allclose(_cell_array(ds, name), data[name].ravel(), rtol=1e-6)


def test_flow_snapshots_read_back_after_moving_the_folder(tmp_path, read_xdmf, monkeypatch):
    g = Grid(6, 5, 0.3, 0.45)
    times = (0.0, 0.125, 0.25)
    run = tmp_path / "out"
    run.mkdir()
    data = _flow_files(run, g, times)
    moved = tmp_path / "elsewhere" / "moved"
    shutil.move(str(run), str(moved))
    monkeypatch.chdir(tmp_path)
    steps = read_xdmf(moved / "run.xdmf")
    assert [t for t, _ in steps] == pytest.approx(list(times))
    for (t, ds), d in zip(steps, data):
        _check_geometry_and_field(ds, g, "p", d["p"])
        vel = _cell_array(ds, "velocity")
        assert vel.shape == (g.nx * g.ny, 3)
        np.testing.assert_array_equal(vel, d["velocity"].reshape(-1, 3))
        np.testing.assert_array_equal(_cell_array(ds, "phi"), d["phi"].ravel())


def test_cli_pressure_run_sidecar(tmp_path, read_xdmf):
    from bubbleflow.apps.cli import main

    rc = main(["run", os.path.join(ROOT, "cases", "bubbly_column.yaml"),
               "--set", "grid.nx=32", "--set", "grid.ny=16", "--set", "grid.lx=2.0",
               "-o", str(tmp_path), "--backend", "numpy", "-q"])
    assert rc == 0
    xdmf = tmp_path / "bubbly_column.xdmf"
    if not xdmf.exists():
        pytest.skip("the app does not write the XDMF sidecar")
    with h5py.File(tmp_path / "bubbly_column.h5", "r") as fh:
        p = fh["fields/p"][()]
        assert fh["grid/x"].is_scale and len(fh["fields/p"].dims[1].values()) == 1
    g = Grid(32, 16, 2.0, 1.0)
    (t, ds), = read_xdmf(xdmf)
    _check_geometry_and_field(ds, g, "p", p)


def test_cli_flow_run_sidecar_every_snapshot(tmp_path, read_xdmf):
    """A real flow run: every snapshot in VTK, physical bounds, p and velocity as in HDF5."""
    from bubbleflow.apps.cli import main

    rc = main(["run", os.path.join(ROOT, "cases", "two_phase.yaml"), "--backend", "numpy",
               "--set", "grid.nx=16", "--set", "grid.ny=32",
               "--set", "time.end=0.1",
               "--set", "output.interval=0.05", "-o", str(tmp_path), "-q", "--no-progress"])
    assert rc == 0
    with h5py.File(tmp_path / "two_phase.h5", "r") as fh:
        times = fh["fields/time"][()]
        p = fh["fields/p"][()]
        u, v = fh["fields/u"][()], fh["fields/v"][()]
    g = Grid(16, 32, 1.0, 2.0)
    steps = read_xdmf(tmp_path / "two_phase.xdmf")
    assert [t for t, _ in steps] == pytest.approx(list(times)) and len(steps) == 3
    for k, (_, ds) in enumerate(steps):
        _check_geometry_and_field(ds, g, "p", p[k])
        vel = _cell_array(ds, "velocity")
        assert vel.shape == (g.nx * g.ny, 3)
        uc = 0.5 * (u[k][:, 1:] + u[k][:, :-1])
        vc = 0.5 * (v[k][1:, :] + v[k][:-1, :])
        for c in range(ds.GetNumberOfCells()):
            x0, x1, y0, y1, _, _ = ds.GetCell(c).GetBounds()
            i, j = int((x0 + x1) / 2 / g.hx), int((y0 + y1) / 2 / g.hy)
            assert vel[c, :2] == pytest.approx([uc[j, i], vc[j, i]], abs=1e-12), (c, i, j)
            assert vel[c, 2] == 0.0


# --------------------------------------------------------------------------
# Without VTK: the file itself
# --------------------------------------------------------------------------

def test_xml_structure_and_relative_paths(tmp_path):
    g = Grid(3, 2, 1.5, 1.0)
    (tmp_path / "s").mkdir()
    snaps = [(0.0, str(tmp_path / "s" / "a.h5"), "/"), (1.5, "s/b.h5", "/fields/")]
    write_xdmf(tmp_path / "r.xdmf", g, snaps, ("p", "velocity"))
    assert sorted(os.listdir(tmp_path)) == ["r.xdmf", "s"]
    root = ET.parse(tmp_path / "r.xdmf").getroot()
    assert root.tag == "Xdmf" and root.get("Version") == "2.0"
    coll = root.find("Domain/Grid")
    assert coll.get("CollectionType") == "Temporal"
    grids = coll.findall("Grid")
    assert [gr.find("Time").get("Value") for gr in grids] == ["0.0", "1.5"]
    topo = grids[0].find("Topology")
    assert topo.get("TopologyType") == "2DRectMesh" and topo.get("Dimensions") == "3 4"
    vx, vy = grids[0].findall("Geometry/DataItem")
    assert [float(v) for v in vx.text.split()] == [0.0, 0.5, 1.0, 1.5]
    assert [float(v) for v in vy.text.split()] == [0.0, 0.5, 1.0]
    assert grids[1].find("Topology") is None    # included from the first grid
    items = [a.find("DataItem") for gr in grids for a in gr.findall("Attribute")]
    assert [i.text for i in items] == ["s/a.h5:/p", "s/a.h5:/velocity",
                                       "s/b.h5:/fields/p", "s/b.h5:/fields/velocity"]
    assert [i.get("Dimensions") for i in items[:2]] == ["2 3", "2 3 3"]
    p_attr = grids[0].find("Attribute")
    assert p_attr.get("Center") == "Cell" and p_attr.find("Information").get("Value") == "Pa"


def test_face_fields_are_refused(tmp_path):
    with pytest.raises(ValueError, match="u"):
        write_xdmf(tmp_path / "r.xdmf", Grid(2, 2), [(0.0, "a.h5", "/")], ("p", "u"))
    assert not os.listdir(tmp_path)
