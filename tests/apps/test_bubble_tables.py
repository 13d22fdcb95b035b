"""A flow run tracks its bubbles: ``/bubbles`` and ``/bubbles/events`` in the
index, the tracker's state in every snapshot.  Two bubbles one above the
other merge once, at the sample where their gas first makes one region (the
snapshots' own volume fraction says when); Hysing's case 2 sheds two
satellites from its skirt, recorded as split off the bubble at the sample
where the gas first makes three regions; a run killed before the merge and
restarted writes the uninterrupted run's tables; ``bubbleflow plot`` draws
them.  The runs take the suite's backend (``pytest --backend``)."""
import os
import signal
import subprocess
import sys

import h5py
import numpy as np
import pytest
from scipy import ndimage

from bubbleflow.apps.cli import main
from bubbleflow.apps.plots import run_figures
from bubbleflow.flow.bubble_tracking import COLUMN_UNITS, EVENT_KINDS, bubble_columns
from bubbleflow.io.run_paths import run_folder
from helpers.cli import ROOT
from helpers.launcher import child_env

KILLER = os.path.join(ROOT, "tests", "helpers", "killed_run.py")

CASE = os.path.join(ROOT, "cases", "two_phase.yaml")
#: Two bubbles on the axis, a cell apart: the lower one, rising in the
#: upper one's wake, catches it up at t = 0.40 s on this grid.
MERGE = ["--backend", "numpy", "--no-progress", "-q", "--set", "grid.nx=20",
         "--set", "grid.ny=40",
         "--set", "output.interval=0.05", "--set", "output.bubbles_every=1",
         "--set", "geometry.bubbles=[{center: [0.5, 0.45], radius: 0.2}, "
                  "{center: [0.5, 0.92], radius: 0.2}]"]
MERGED = EVENT_KINDS.index("merged")


@pytest.fixture(scope="module", autouse=True)
def on_the_suites_backend(backend):
    """The module's runs on the suite's backend."""
    MERGE[1] = backend.name


def run(folder, end, *extra):
    assert main(["run", CASE, "-o", str(folder), *MERGE, "--set", f"time.end={end}",
                 *extra]) == 0
    return folder / "two_phase.h5"


def tables(index):
    """Every dataset under ``/bubbles`` of ``index``: ``{path: array}``."""
    out = {}
    with h5py.File(index, "r") as fh:
        fh["bubbles"].visititems(lambda name, obj: out.__setitem__(name, obj[()])
                                 if isinstance(obj, h5py.Dataset) else None)
    return out


@pytest.fixture(scope="module")
def merged_run(tmp_path_factory):
    return run(tmp_path_factory.mktemp("merge"), 0.5)


def test_two_bubbles_merge_once_when_their_gas_joins(merged_run):
    t = tables(merged_run)
    assert set(t) == set(bubble_columns(2)) | {"events/" + c for c in
                                               ("step", "time", "kind", "id", "other")}
    kinds = [EVENT_KINDS[k] for k in t["events/kind"]]
    assert kinds == ["created", "created", "merged"]
    assert t["events/id"][:2].tolist() == [1, 2] and set(t["events/step"][:2]) == {0}
    merge_step, survivor, gone = (int(t["events/" + c][2]) for c in ("step", "id", "other"))
    assert {survivor, gone} == {1, 2}
    assert t["events/time"][2] == pytest.approx(0.4, abs=0.03)
    # Both ids at every sample before the merge, the survivor alone from it on.
    step, ids = t["step"], t["id"]
    for s in np.unique(step):
        assert sorted(ids[step == s]) == ([1, 2] if s < merge_step else [survivor]), s
    np.testing.assert_array_equal(np.unique(step), np.arange(step.max() + 1))
    # The snapshots' volume fraction: two regions of c > 0.5 before, one after.
    with h5py.File(merged_run, "r") as fh:
        regions = [ndimage.label(c > 0.5)[1] for c in fh["fields/c"][()]]
        snaps = fh["fields/step"][()]
        units = {name: fh["bubbles/" + name].attrs["units"] for name in t}
    assert min(snaps) < merge_step <= max(snaps)
    assert regions == [2 if s < merge_step else 1 for s in snaps]
    assert all(u == COLUMN_UNITS[name.rsplit("/", 1)[-1]] for name, u in units.items())
    # The last snapshot holds the tracker after the merge.
    folder = run_folder(merged_run)
    with h5py.File(os.path.join(folder, sorted(os.listdir(folder))[-1]), "r") as fh:
        assert fh["bubble_tracker/ids"][()].tolist() == [survivor]
        assert int(fh["bubble_tracker/next_id"][()]) == 3


def snapshot_regions(index):
    """``(steps, regions)``: every snapshot's step and its number of regions
    of ``c > 0.5`` (face-connected, SciPy's labelling on the host)."""
    with h5py.File(index, "r") as fh:
        return (fh["fields/step"][()].tolist(),
                [ndimage.label(c > 0.5)[1] for c in fh["fields/c"][()]])


def test_hysing_case2_sheds_two_satellites_split_off_the_bubble(tmp_path, backend):
    """Hysing's case 2 at h = 1/40 (the shipped case) to t = 2.4 s: its skirt
    pinches off two satellites, one each side.  The bubble keeps id 1
    throughout; both satellites are split off it at one sample, the first
    whose gas makes three regions, which the snapshots' volume fraction
    confirms; they mirror each other, and the pieces' areas add up to the
    gas area."""
    case2 = os.path.join(ROOT, "cases", "hysing_case2.yaml")
    assert main(["run", case2, "-o", str(tmp_path), "--backend", backend.name, "-q",
                 "--no-progress", "--set", "time.end=2.4", "--set", "output.interval=0.05",
                 "--set", "output.bubbles_every=1"]) == 0
    index = tmp_path / "hysing_case2.h5"
    t = tables(index)
    kinds = [EVENT_KINDS[k] for k in t["events/kind"]]
    assert kinds == ["created", "split", "split"], kinds
    split_step = int(t["events/step"][1])
    assert t["events/step"][2] == split_step and 2.0 < t["events/time"][1] < 2.4
    assert t["events/id"].tolist() == [1, 1, 1] and t["events/other"].tolist() == [-1, 2, 3]
    step, ids, area = t["step"], t["id"], t["area"]
    np.testing.assert_array_equal(np.unique(step), np.arange(step.max() + 1))
    for s in np.unique(step):
        assert sorted(ids[step == s]) == ([1] if s < split_step else [1, 2, 3]), s
    after = step == split_step
    x = dict(zip(ids[after], t["centroid_x"][after]))
    assert x[2] + x[3] == pytest.approx(1.0, abs=1e-9) and abs(x[2] - x[3]) > 0.1
    pieces = dict(zip(ids[after], area[after]))
    assert pieces[2] == pytest.approx(pieces[3], rel=1e-9) and pieces[1] > 10 * pieces[2]
    with h5py.File(index, "r") as fh:
        total = fh["diagnostics/area"][()]
    np.testing.assert_allclose([area[step == s].sum() for s in np.unique(step)], total,
                               rtol=1e-9)
    snaps, regions = snapshot_regions(index)
    assert min(snaps) < split_step <= max(snaps)
    assert regions == [1 if s < split_step else 3 for s in snaps]


def test_a_run_killed_before_the_merge_restarts_to_the_same_tables(tmp_path, merged_run):
    """Sampled every 2 steps, killed in step 17 (its last checkpoint at step
    15, between two samples, before the merge) and restarted: the tables of
    the run sampled so without a kill, bit for bit."""
    every = ["--set", "output.bubbles_every=2"]
    full = run(tmp_path / "full", 0.5, *every)
    args = ["run", CASE, *MERGE, *every, "--set", "time.end=0.5", "-o", str(tmp_path / "cont")]
    killed = subprocess.run([sys.executable, KILLER, "solve", "17", "--", *args], cwd=ROOT,
                            env=child_env(), capture_output=True, text=True, timeout=600)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    cont = tmp_path / "cont" / "two_phase.h5"
    with h5py.File(cont, "r") as fh:
        checkpoint = int(fh["fields/step"][-1])
        assert fh["bubbles/step"][-1] <= checkpoint < fh["bubbles/step"][-1] + 2
    assert checkpoint % 2 == 1
    assert main(["run", CASE, "-o", str(tmp_path / "cont"), *MERGE, *every,
                 "--set", "time.end=0.5", "--restart", str(cont)]) == 0
    a, b = tables(full), tables(cont)
    assert sorted(a) == sorted(b)
    for name in a:
        np.testing.assert_array_equal(a[name], b[name], err_msg=name)
    assert set(a["step"] % 2) == {0} and a["events/kind"].tolist().count(MERGED) == 1
    assert a["events/step"][-1] > checkpoint
    # Sampled every step, the same merge.
    every_step = tables(merged_run)
    assert every_step["events/id"].tolist() == a["events/id"].tolist()


def test_tracking_off_leaves_empty_tables(tmp_path):
    t = tables(run(tmp_path, 0.05, "--set", "output.bubbles_every=0"))
    assert t and all(v.size == 0 for v in t.values())
    folder = run_folder(tmp_path / "two_phase.h5")
    with h5py.File(os.path.join(folder, os.listdir(folder)[0]), "r") as fh:
        assert "bubble_tracker" not in fh


def test_the_plot_draws_each_bubble(merged_run, tmp_path, capsys):
    assert main(["plot", str(merged_run), "-o", str(tmp_path)]) == 0
    assert str(tmp_path / "two_phase_bubbles.png") in capsys.readouterr().out.split()
    assert os.path.getsize(tmp_path / "two_phase_bubbles.png") > 10000
    fig = run_figures(merged_run)["two_phase_bubbles.png"]
    assert fig._suptitle.get_text().startswith("two_phase: 2 bubbles tracked (1 merged")
    trajectories, rise, sizes = fig.axes[:3]
    assert len(fig.axes) == 3                           # two bubbles: no swarm panels
    assert [t.get_text() for t in rise.get_legend().get_texts()] == ["bubble 1", "bubble 2"]
    assert [t.get_text() for t in trajectories.get_legend().get_texts()] == ["merged (1)"]
    assert sizes.get_xlabel() == "equivalent diameter (m)"


def _last_snapshot(index):
    folder = run_folder(index)
    return os.path.join(folder, sorted(os.listdir(folder))[-1])


def test_a_checkpoint_without_the_trackers_state_restarts_with_fresh_ids(tmp_path):
    """A checkpoint holding rows but no tracker (tracking switched on at the
    restart, or the group removed) starts a tracker whose ids come after
    the table's: none is given twice."""
    index = run(tmp_path, 0.05)
    with h5py.File(_last_snapshot(index), "a") as fh:
        del fh["bubble_tracker"]
    assert main(["run", CASE, "-o", str(tmp_path), *MERGE, "--set", "time.end=0.1",
                 "--restart", str(index)]) == 0
    t = tables(index)
    created = t["events/id"][t["events/kind"] == EVENT_KINDS.index("created")]
    assert created.tolist() == [1, 2, 3, 4]
    assert set(t["id"][t["step"] > t["events/step"][-1] - 1]) == {3, 4}


def test_a_trackers_state_that_cannot_be_read_is_one_line(tmp_path, capsys):
    index = run(tmp_path, 0.05)
    with h5py.File(_last_snapshot(index), "a") as fh:
        del fh["bubble_tracker/ids"]
    code = main(["run", CASE, "-o", str(tmp_path), *MERGE, "--set", "time.end=0.1",
                 "--restart", str(index)])
    err = capsys.readouterr().err.strip().splitlines()
    assert code == 2 and len(err) == 1, err
    assert str(index) in err[0] and "bubble tracker" in err[0] and "'ids' missing" in err[0]
