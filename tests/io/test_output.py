"""Atomic output (permissions, durability, failure) and HDF5 dimension scales."""
import os
import stat
import types

import h5py
import numpy as np
import pytest

from bubbleflow.apps.plots import save_figure
from bubbleflow.io import atomic
from bubbleflow.io.atomic import atomic_h5, atomic_path, atomic_text
from bubbleflow.io.dimension_scales import attach_dimension_scales
from bubbleflow.io.result_units import UNITS
from bubbleflow.io.result_writer import write_pressure_result
from bubbleflow.mesh.grid import Grid

posix_only = pytest.mark.skipif(os.name != "posix", reason="POSIX permission bits")


@pytest.fixture
def umask():
    """Set the process umask for one test (restored afterwards)."""
    old = os.umask(0o022)
    os.umask(old)

    def set_(mask):
        os.umask(mask)
        # Where /proc cannot tell, the module uses the value read at import.
        if atomic._read_umask() is None:
            atomic._UMASK_AT_IMPORT = mask
    yield set_
    os.umask(old)
    atomic._UMASK_AT_IMPORT = old


def _mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def _writers(tmp_path):
    def h5(path):
        with atomic_h5(path) as fh:
            fh["a"] = 1

    return {"atomic_h5": h5,
            "atomic_text": lambda path: atomic_text(path, "x\n"),
            "save_figure": lambda path: save_figure(_figure(), path)}


def _figure():
    from matplotlib.figure import Figure

    return Figure(figsize=(1, 1))


@posix_only
@pytest.mark.parametrize("mask, mode", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
@pytest.mark.parametrize("writer", ["atomic_h5", "atomic_text", "save_figure"])
def test_files_get_the_umask_permissions(tmp_path, umask, mask, mode, writer):
    umask(mask)
    path = tmp_path / "out.file"
    _writers(tmp_path)[writer](path)
    assert _mode(path) == mode
    # Replacing an existing file: the new one again follows the umask.
    umask(0o022)
    _writers(tmp_path)[writer](path)
    assert _mode(path) == 0o644
    assert os.listdir(tmp_path) == ["out.file"]


def test_file_mode_reads_the_current_umask(umask):
    umask(0o027)
    assert atomic.file_mode() == 0o640
    umask(0o022)
    assert atomic.file_mode() == 0o644


@pytest.mark.parametrize("writer", ["h5", "text", "path"])
def test_error_leaves_nothing_and_keeps_the_old_file(tmp_path, writer):
    path = tmp_path / "result.h5"
    path.write_bytes(b"old contents")
    with pytest.raises((RuntimeError, TypeError)):
        if writer == "h5":
            with atomic_h5(path) as fh:
                fh["a"] = np.arange(3)
                raise RuntimeError("boom")
        elif writer == "path":
            with atomic_path(path) as tmp:
                with open(tmp, "w") as fh:
                    fh.write("half")
                raise RuntimeError("boom")
        else:
            atomic_text(path, None)    # not text: fails while writing
    assert path.read_bytes() == b"old contents"
    assert os.listdir(tmp_path) == ["result.h5"]


def test_error_in_a_new_file_leaves_no_file(tmp_path):
    path = tmp_path / "sub" / "new.txt"
    with pytest.raises(KeyboardInterrupt):
        with atomic_path(path) as tmp:
            assert os.path.dirname(tmp) == str(tmp_path / "sub")
            raise KeyboardInterrupt
    assert os.listdir(tmp_path / "sub") == []


def test_atomic_writes_are_synced_before_the_rename(tmp_path, monkeypatch):
    events = []
    real_fsync, real_replace = os.fsync, os.replace

    def fsync(fd):
        st = os.fstat(fd)
        events.append(("fsync-dir" if stat.S_ISDIR(st.st_mode) else "fsync-file"))
        real_fsync(fd)

    def replace(a, b):
        events.append("replace")
        real_replace(a, b)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "replace", replace)
    atomic_text(tmp_path / "a.txt", "line 1\r\nline 2\n")
    assert (tmp_path / "a.txt").read_bytes() == b"line 1\r\nline 2\n"
    if os.name == "posix":
        assert events == ["fsync-file", "replace", "fsync-dir"]
    else:
        assert events[:2] == ["fsync-file", "replace"]


# --------------------------------------------------------------------------
# Dimension scales
# --------------------------------------------------------------------------

def _record():
    return types.SimpleNamespace(
        method="dpcg", variant="standard", preconditioner="jacobi", deflation="subdomain",
        deflation_vectors=4, rtol=1e-8, iterations=3, residual=1e-9, converged=True,
        reason="converged", setup_seconds=0.1, solve_seconds=0.2,
        residual_history=[1.0, 1e-3, 1e-9], true_residual_checks=[(3, 1e-9)])


def _scale_of(ds, dim):
    scales = list(ds.dims[dim].values())
    assert scales, f"{ds.name} dim {dim} has no scale"
    return scales[0]


def test_pressure_result_has_scales_and_units(tmp_path):
    g = Grid(6, 4, 3.0, 1.0)
    rng = np.random.default_rng(1)
    data = {k: rng.standard_normal(g.shape) for k in ("phi", "rho", "p")}
    path = tmp_path / "case.h5"
    write_pressure_result(path, case_yaml="name: case\n", version="0", backend="numpy",
                          device="cpu", precision="float64", face_density="harmonic", grid=g,
                          record=_record(), **data)
    with h5py.File(path, "r") as fh:
        assert fh["grid/x"].is_scale and fh["grid/y"].is_scale
        assert fh["grid/x"].attrs["units"] == "m" and fh["grid/y"].attrs["units"] == "m"
        for name, units in (("p", "Pa"), ("rho", "kg/m^3"), ("phi", "m")):
            ds = fh["fields"][name]
            assert ds.attrs["units"] == units
            assert _scale_of(ds, 0).name == "/grid/y" and _scale_of(ds, 1).name == "/grid/x"
            assert ds.dims[0].label == "y" and ds.dims[1].label == "x"
            np.testing.assert_array_equal(_scale_of(ds, 1)[()], g.x)
            np.testing.assert_array_equal(ds[()], data[name])
        # No face-centred field here, so no face coordinates either.
        assert "x_faces" not in fh["grid"]


def _flow_files(folder, g, n):
    """Per-snapshot files and a main file with virtual /fields (the flow layout)."""
    os.makedirs(folder / "snaps")
    shapes = {"phi": (g.ny, g.nx), "rho": (g.ny, g.nx), "p": (g.ny, g.nx),
              "u": (g.ny, g.nx + 1), "v": (g.ny + 1, g.nx)}
    for k in range(n):
        with h5py.File(folder / "snaps" / f"s{k}.h5", "w") as fh:
            for name, shape in shapes.items():
                fh[name] = np.full(shape, 10.0 * k) + np.arange(np.prod(shape)).reshape(shape)
    main = folder / "run.h5"
    with atomic_h5(main) as fh:
        grp = fh.create_group("grid")
        grp["x"], grp["y"] = g.x, g.y
        grp.attrs["nx"], grp.attrs["ny"], grp.attrs["lx"], grp.attrs["ly"] = g.nx, g.ny, g.lx, g.ly
        f = fh.create_group("fields")
        f["time"] = 0.5 * np.arange(n)
        f["step"] = 10 * np.arange(n)
        for name, shape in shapes.items():
            lay = h5py.VirtualLayout(shape=(n,) + shape, dtype="f8")
            for k in range(n):
                lay[k] = h5py.VirtualSource(f"snaps/s{k}.h5", name, shape=shape)
            f.create_virtual_dataset(name, lay, fillvalue=np.nan)
        attach_dimension_scales(fh)
        attach_dimension_scales(fh)    # a second call changes nothing
    return main, shapes


def test_flow_layout_scales_on_virtual_datasets(tmp_path):
    g = Grid(5, 3, 2.0, 0.75)
    main, shapes = _flow_files(tmp_path, g, 3)
    with h5py.File(main, "r") as fh:
        f, grid = fh["fields"], fh["grid"]
        assert f["time"].is_scale and f["time"].attrs["units"] == "s"
        assert f["step"].attrs["units"] == "1"
        np.testing.assert_array_equal(grid["x_faces"][()], np.linspace(0, 2.0, 6))
        np.testing.assert_array_equal(grid["y_faces"][()], np.linspace(0, 0.75, 4))
        assert grid["x_faces"].attrs["units"] == "m" and grid["y_faces"].is_scale
        expect = {"phi": ("y", "x"), "rho": ("y", "x"), "p": ("y", "x"),
                  "u": ("y", "x_faces"), "v": ("y_faces", "x")}
        for name, (ys, xs) in expect.items():
            ds = f[name]
            assert ds.is_virtual and ds.attrs["units"] == UNITS[name]
            assert [s.name for s in ds.dims[0].values()] == ["/fields/time", "/fields/step"]
            assert [s.name for s in ds.dims[1].values()] == [f"/grid/{ys}"]
            assert [s.name for s in ds.dims[2].values()] == [f"/grid/{xs}"]
            assert [d.label for d in ds.dims] == ["time", ys, xs]
            # Still reads through to the snapshot files.
            assert ds[2, 0, 1] == 21.0 and ds.shape == (3,) + shapes[name]


def test_scales_without_extent_attributes(tmp_path):
    g = Grid(4, 2, 1.0, 0.5)
    with atomic_h5(tmp_path / "a.h5") as fh:
        fh["grid/x"], fh["grid/y"] = g.x, g.y
        fh["fields/v"] = np.zeros((g.ny + 1, g.nx))
        fh["fields/other"] = np.zeros((7, 7))
        attach_dimension_scales(fh)
    with h5py.File(tmp_path / "a.h5", "r") as fh:
        np.testing.assert_allclose(fh["grid/y_faces"][()], [0.0, 0.25, 0.5])
        assert fh["fields/v"].attrs["units"] == "m/s"
        assert _scale_of(fh["fields/v"], 0).name == "/grid/y_faces"
        assert "units" not in fh["fields/other"].attrs
        assert len(fh["fields/other"].dims[0].values()) == 0
