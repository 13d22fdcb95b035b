"""``bubbleflow.open_result``: a result file as an ``xarray.Dataset`` whose
dimensions, coordinates, values and units are those of the HDF5 file."""
import os

import h5py
import numpy as np
import pytest

import bubbleflow
from bubbleflow.apps.cli import main
from bubbleflow.flow.bubble_tracking import EVENT_KINDS
from bubbleflow.io import xarray_view

xr = pytest.importorskip("xarray")

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COMMON = ["--backend", "numpy", "--no-progress", "-q"]


@pytest.fixture(scope="module")
def pressure_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("pressure")
    assert main(["run", os.path.join(ROOT, "cases", "bubbly_column.yaml"), *COMMON,
                 "-o", str(out), "--set", "grid.nx=16", "--set", "grid.ny=24",
                 "--set", "grid.ly=1.5"]) == 0
    return out / "bubbly_column.h5"


@pytest.fixture(scope="module")
def flow_file(tmp_path_factory):
    out = tmp_path_factory.mktemp("flow")
    assert main(["run", os.path.join(ROOT, "cases", "two_phase.yaml"), *COMMON,
                 "-o", str(out), "--set", "grid.nx=16", "--set", "grid.ny=32",
                 "--set", "time.end=0.02",
                 "--set", "output.interval=0.01"]) == 0
    return out / "two_phase.h5"


def test_a_pressure_result_has_its_fields_on_the_grid(pressure_file):
    ds = bubbleflow.open_result(pressure_file)
    assert isinstance(ds, xr.Dataset)
    with h5py.File(pressure_file, "r") as fh:
        for name in ("phi", "rho", "p"):
            assert ds[name].dims == ("y", "x")
            np.testing.assert_array_equal(ds[name].values, fh["fields"][name][()])
            assert ds[name].attrs["units"] == fh["fields"][name].attrs["units"]
            assert ds[name].attrs["long_name"]
        np.testing.assert_array_equal(ds.x.values, fh["grid/x"][()])
        np.testing.assert_array_equal(ds.y.values, fh["grid/y"][()])
        assert ds.attrs["mode"] == "pressure" and ds.attrs["case"] == fh.attrs["case"]
        assert ds.attrs["solver_method"] == fh["solver"].attrs["method"]
        np.testing.assert_array_equal(ds.residual_history.values,
                                      fh["solver/residual_history"][()])
        assert ds.solver_iterations.values.tolist() == fh["solver/iterations"][()].tolist()
    assert ds.sizes["x"] == 16 and ds.sizes["y"] == 24
    assert ds.x.attrs["units"] == "m" and ds.y.values[-1] < 1.5
    assert "x_faces" not in ds.dims                     # no face field in a pressure result
    # Labels select: the pressure at the bottom exceeds that at the top.
    column = ds.p.sel(x=0.5, method="nearest")
    assert float(column.isel(y=0)) > float(column.isel(y=-1))


def test_a_3d_pressure_result_has_z_first(tmp_path):
    assert main(["run", os.path.join(ROOT, "cases", "bubbly_column_3d.yaml"), *COMMON,
                 "-o", str(tmp_path), "--set", "grid.nx=8", "--set", "grid.ny=6",
                 "--set", "grid.nz=12", "--set", "geometry.bubbles=[]"]) == 0
    path = tmp_path / "bubbly_column_3d.h5"
    ds = bubbleflow.open_result(path)
    with h5py.File(path, "r") as fh:
        assert ds.p.dims == ("z", "y", "x") and ds.p.shape == (12, 6, 8)
        np.testing.assert_array_equal(ds.p.values, fh["fields/p"][()])
        np.testing.assert_array_equal(ds.z.values, fh["grid/z"][()])


def test_a_flow_run_has_snapshots_in_time_and_diagnostics_per_step(flow_file):
    ds = bubbleflow.open_result(flow_file)
    with h5py.File(flow_file, "r") as fh:
        f, d = fh["fields"], fh["diagnostics"]
        np.testing.assert_array_equal(ds.time.values, f["time"][()])
        np.testing.assert_array_equal(ds.snapshot_step.values, f["step"][()])
        for name in ("phi", "rho", "p"):
            assert ds[name].dims == ("time", "y", "x")
            np.testing.assert_array_equal(ds[name].values, f[name][()])
        assert ds.u.dims == ("time", "y", "x_faces") and ds.v.dims == ("time", "y_faces", "x")
        np.testing.assert_array_equal(ds.u.values, f["u"][()])
        np.testing.assert_array_equal(ds.v.values, f["v"][()])
        np.testing.assert_allclose(ds.x_faces.values, np.linspace(0.0, 1.0, 17))
        np.testing.assert_allclose(ds.y_faces.values, np.linspace(0.0, 2.0, 33))
        np.testing.assert_array_equal(ds.step.values, d["step"][()])
        np.testing.assert_array_equal(ds.step_time.values, d["time"][()])
        for name in ("dt", "area", "rise_velocity", "circularity"):
            assert ds[name].dims == ("step",)
            np.testing.assert_array_equal(ds[name].values, d[name][()])
        assert ds.solver_iterations.dims == ("solve",)
        np.testing.assert_array_equal(ds.solve_step.values, fh["solver/step"][()])
    assert ds.sizes["time"] == 3 and ds.attrs["mode"] == "flow"
    assert (ds.time.attrs["units"], ds.step_time.attrs["units"]) == ("s", "s")
    assert (ds.u.attrs["units"], ds.area.attrs["units"], ds.p.attrs["units"]) == (
        "m/s", "m^2", "Pa")
    assert all("long_name" in ds[v].attrs for v in ("phi", "u", "rise_velocity", "time", "x"))
    # The last snapshot by time label.
    last = ds.phi.sel(time=0.02, method="nearest")
    np.testing.assert_array_equal(last.values, ds.phi.isel(time=-1).values)


def test_a_flow_run_has_its_bubble_tables_by_row_and_event(flow_file):
    ds = bubbleflow.open_result(flow_file)
    with h5py.File(flow_file, "r") as fh:
        b, e = fh["bubbles"], fh["bubbles/events"]
        columns = [k for k in b if k != "events"]
        assert {"id", "area", "centroid_y", "diameter"} <= set(columns)
        for name in columns:
            var = ds["bubble_" + name]
            assert var.dims == ("bubble_row",)
            np.testing.assert_array_equal(var.values, b[name][()])
            assert var.attrs["units"] == b[name].attrs["units"]
        for name in e:
            var = ds["event_" + name]
            assert var.dims == ("event",)
            np.testing.assert_array_equal(var.values, e[name][()])
            assert var.attrs["units"] == e[name].attrs["units"]
        kinds = e["kind"].attrs["kinds"]
        kinds = kinds.decode() if isinstance(kinds, bytes) else kinds
    assert ds.sizes["bubble_row"] > 0 and ds.sizes["event"] > 0
    # The sample's step and time label the rows, as a solve's label the solves.
    assert {"bubble_step", "bubble_time", "event_step", "event_time"} <= set(ds.coords)
    assert ds.bubble_time.attrs["units"] == "s" and ds.bubble_area.attrs["units"] == "m^2"
    # One bubble's area is not the gas phase's: its own variable and long name.
    assert ds.area.dims == ("step",)
    assert ds.bubble_area.attrs["long_name"] != ds.area.attrs["long_name"]
    on_tables = [v for v in ds.variables
                 if set(ds[v].dims) & {"bubble_row", "event"}]
    assert all("long_name" in ds[v].attrs and "units" in ds[v].attrs for v in on_tables)
    # The kind codes' names: the file's attribute and CF's flags.
    kind = ds.event_kind
    assert kind.attrs["kinds"] == kinds
    meanings = kind.attrs["flag_meanings"].split()
    assert meanings == list(EVENT_KINDS) == [k.strip() for k in kinds.split(",")]
    assert kind.attrs["flag_values"].tolist() == list(range(len(EVENT_KINDS)))
    assert meanings[int(kind.values[0])] == "created"
    # One bubble's rows by its id: one per sample, in step order.
    steps = ds.bubble_step.where(ds.bubble_id == ds.bubble_id[0], drop=True)
    assert steps.size > 1 and np.all(np.diff(steps.values) > 0)


def test_a_file_that_is_not_a_result_is_one_line(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such file"):
        bubbleflow.open_result(tmp_path / "absent.h5")
    (tmp_path / "notes.h5").write_text("not hdf5")
    with pytest.raises(ValueError, match="not an HDF5 file") as info:
        bubbleflow.open_result(tmp_path / "notes.h5")
    assert "\n" not in str(info.value)
    with h5py.File(tmp_path / "other.h5", "w") as fh:
        fh["data"] = np.zeros(3)
    with pytest.raises(ValueError, match="no /grid group"):
        bubbleflow.open_result(tmp_path / "other.h5")


def test_without_xarray_the_error_names_the_extra(monkeypatch, pressure_file):
    import builtins

    real = builtins.__import__

    def no_xarray(name, *args, **kwargs):
        if name == "xarray":
            raise ImportError("no xarray here")
        return real(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_xarray)
    with pytest.raises(ImportError, match=r"pip install 'bubbleflow\[xarray\]'"):
        xarray_view.open_result(pressure_file)
