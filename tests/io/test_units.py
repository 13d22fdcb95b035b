"""Every dataset a run writes says its units, and both kinds of result
describe their pressure solver on ``/solver`` the same way."""
import os

import h5py
import pytest

from bubbleflow.apps.cli import main
from bubbleflow.io import layout
from bubbleflow.io.result_units import SERIES_UNITS
from bubbleflow.io.run_paths import run_folder

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

FLOWS = {
    # CLSVOF with reduced gravity: the volume fraction c, p_dynamic and the bubble tables too.
    "two_phase": ["--set", "grid.nx=16", "--set", "grid.ny=32",
                  "--set", "output.interval=0.05",
                  "--set", "time.end=0.1", "--set", "levelset.method=clsvof"],
    "bubbly_column_3d_flow": ["--set", "grid.nx=8", "--set", "grid.ny=8", "--set", "grid.nz=16",
                              "--set", "time.end=0.02"],
}
PRESSURES = {
    "bubbly_column": ["--set", "grid.nx=32", "--set", "grid.ny=32"],
    "bubbly_column_3d": ["--set", "grid.nx=8", "--set", "grid.ny=8", "--set", "grid.nz=8"],
}


def units_of(path):
    """``{dataset name: its units attribute or None}`` of the file at ``path``."""
    found = {}
    with h5py.File(path, "r") as fh:
        fh.visititems(lambda name, obj: found.__setitem__(name, obj.attrs.get("units"))
                      if isinstance(obj, h5py.Dataset) else None)
    return found


def run_case(case, sets, folder, backend):
    code = main(["run", os.path.join(ROOT, "cases", f"{case}.yaml"), "-o", str(folder),
                 "--backend", backend.name, "--no-progress", "-q", *sets])
    assert code == 0
    return folder / f"{case}.h5"


def assert_all_labelled(path):
    units = units_of(path)
    missing = sorted(name for name, u in units.items() if not u)
    assert not missing, f"{path}: no units on {missing}"
    return units


@pytest.mark.parametrize("case", sorted(FLOWS))
def test_every_dataset_of_a_flow_output_has_units(case, tmp_path, backend):
    index = run_case(case, FLOWS[case], tmp_path, backend)
    units = assert_all_labelled(index)
    for name in layout.diagnostics_names(3 if "3d" in case else 2):
        assert units[f"diagnostics/{name}"] == SERIES_UNITS[name]
    assert units["solver/solve_seconds"] == "s" and units["fields/p"] == "Pa"
    size = "volume" if "3d" in case else "area"
    assert units[f"diagnostics/{size}"] == ("m^3" if size == "volume" else "m^2")
    with h5py.File(index, "r") as fh:
        assert fh["bubbles/centroid_x"].attrs["units"] == "m"
        assert fh["diagnostics"].attrs["gas_volume_change_units"] == "1"
    folder = run_folder(index)
    for name in os.listdir(folder):
        assert_all_labelled(os.path.join(folder, name))
    if case == "two_phase":
        assert units["fields/c"] == "1" and units["fields/p_dynamic"] == "Pa"


@pytest.mark.parametrize("case", sorted(PRESSURES))
def test_every_dataset_of_a_pressure_output_has_units(case, tmp_path, backend):
    units = assert_all_labelled(run_case(case, PRESSURES[case], tmp_path, backend))
    assert units["solver/iterations"] == "1" and units["solver/setup_seconds"] == "s"
    assert units["fields/rho"] == "kg/m^3"


def test_a_flow_describes_its_solver_as_a_pressure_result_does(tmp_path, backend):
    sets = ["--set", "grid.nx=16", "--set", "grid.ny=32", "--set", "time.end=0.03",
            "--set", "solver.rtol=1e-8"]
    flow = run_case("two_phase", sets, tmp_path / "flow", backend)
    pressure = run_case("two_phase", sets + ["--set", "mode=pressure"], tmp_path / "p", backend)
    with h5py.File(flow, "r") as f, h5py.File(pressure, "r") as p:
        fa, pa = dict(f["solver"].attrs), dict(p["solver"].attrs)
    assert set(pa) == set(layout.SOLVER_ATTRS)
    assert set(fa) == set(layout.SOLVER_ATTRS) - {"deflation_vectors"}
    for key in fa:
        assert fa[key] == pa[key], key
    assert (fa["method"], fa["variant"], fa["rtol"]) == ("pcg", "", 1e-8)


def test_every_series_a_run_can_write_has_a_unit():
    names = (set(layout.diagnostics_names(2)) | set(layout.diagnostics_names(3))
             | set(layout.SOLVER_DTYPES) | {"reason"})
    assert names <= set(SERIES_UNITS)
