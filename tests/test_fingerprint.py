"""scripts/fingerprint.py and fingerprint_compare.py: what a flow's record
keeps and leaves out, and that the comparison names a changed hash and exits 1.
Synthetic files only: no solve, no run."""
import importlib.util
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

h5py = pytest.importorskip("h5py")

SCRIPTS = Path(__file__).resolve().parents[1] / "scripts"


def load_script(name):
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def compare(tmp_path, base, new):
    paths = []
    for name, content in (("base.json", base), ("new.json", new)):
        paths.append(tmp_path / name)
        paths[-1].write_text(json.dumps(content))
    return subprocess.run([sys.executable, str(SCRIPTS / "fingerprint_compare.py"), *map(str, paths)],
                          capture_output=True, text=True, timeout=60)


BASE = {"64 1000 diagonals cg none none adef2": {"it": 3611, "x": "0123456789abcdef"},
        "flow 3d rising_bubble_3d clsvof ranks=2": {"field phi": "aaaa float64(32, 16, 16)",
                                                    "iterations": [9, 7, 7, 8]}}


def test_identical_fingerprints_exit_0(tmp_path):
    proc = compare(tmp_path, BASE, json.loads(json.dumps(BASE)))
    assert proc.returncode == 0, proc.stdout
    assert "DIFF " not in proc.stdout
    assert proc.stdout.strip().splitlines()[-1].startswith("IDENTICAL: all 2 entries")


def test_a_changed_hash_is_named_and_exits_1(tmp_path):
    new = json.loads(json.dumps(BASE))
    new["flow 3d rising_bubble_3d clsvof ranks=2"]["field phi"] = "bbbb float64(32, 16, 16)"
    proc = compare(tmp_path, BASE, new)
    assert proc.returncode == 1
    diff_lines = [line for line in proc.stdout.splitlines() if line.startswith("DIFF ")]
    assert len(diff_lines) == 1
    assert "flow 3d rising_bubble_3d clsvof ranks=2" in diff_lines[0]
    assert "field phi" in diff_lines[0] and "iterations" not in diff_lines[0]
    assert proc.stdout.strip().splitlines()[-1].startswith("DIFFERENT: 1 of 2 entries")


def test_an_entry_in_one_file_only_differs(tmp_path):
    proc = compare(tmp_path, BASE, {"64 1000 diagonals cg none none adef2": BASE[
        "64 1000 diagonals cg none none adef2"]})
    assert proc.returncode == 1
    assert "DIFF flow 3d rising_bubble_3d clsvof ranks=2 only in base" in proc.stdout


def write_result(path, out_dir, seconds, phi_scale=1.0):
    """A result file of a flow run's layout (2 snapshots, 3 steps)."""
    with h5py.File(path, "w") as f:
        f["fields/phi"] = np.arange(24.0).reshape(2, 3, 4) * phi_scale
        f["fields/p"] = np.ones((2, 3, 4))
        f["fields/step"] = np.array([0, 3])
        f["fields/time"] = np.array([0.0, 0.1])
        f["diagnostics/area"] = np.array([0.2, 0.2, 0.2, 0.2])
        f["solver/iterations"] = np.array([9, 7, 8])
        f["solver/reason"] = np.array([b"converged"] * 3, dtype=object)
        f["solver/solve_seconds"] = np.full(3, seconds)
        f.attrs["case"] = f"name: x\noutput: {{directory: {out_dir}, interval: 0.05}}\n"
        f.attrs["run_status"] = "finished"
        f.attrs["wall_seconds"] = seconds
        f.attrs["run_id"] = f"run-{seconds}"


def test_a_flow_record_leaves_out_timings_and_stamps(tmp_path):
    fingerprint = load_script("fingerprint")
    write_result(tmp_path / "a.h5", "/tmp/one", 1.0)
    write_result(tmp_path / "b.h5", "/tmp/two", 2.0)
    record = fingerprint.result_record(tmp_path / "a.h5")
    assert record == fingerprint.result_record(tmp_path / "b.h5")
    assert record["iterations"] == [9, 7, 8] and record["steps"] == 3
    assert record["field phi"].endswith("float64(3, 4)")     # the final snapshot
    assert "solver reason" in record and not any("seconds" in key for key in record)


def test_a_flow_record_sees_a_changed_field(tmp_path):
    fingerprint = load_script("fingerprint")
    write_result(tmp_path / "a.h5", "/tmp/one", 1.0)
    write_result(tmp_path / "b.h5", "/tmp/one", 1.0, phi_scale=1.0 + 2.0 ** -52)
    a, b = (fingerprint.result_record(tmp_path / name) for name in ("a.h5", "b.h5"))
    assert {key for key in a if a[key] != b[key]} == {"field phi"}
