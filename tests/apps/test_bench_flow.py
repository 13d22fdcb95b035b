"""`bubbleflow bench --flow`: every phase the flow reports is timed and set beside
its floor, the CSV's numbers agree with each other, and bad arguments or a size
that cannot fit are one line (exit 2) before any work.

Small and quick, on NumPy; timings are never asserted on, only their consistency.
"""
import contextlib
import csv
import io
import os
import subprocess
import sys

import pytest

from bubbleflow.apps import bench as bench_mod
from bubbleflow.apps.bench import flow_floors
from bubbleflow.apps.bench.flow_cases import (NAMED_CASES, build_configs, named_case,
                                              named_case_data, nearest_divisor)
from bubbleflow.apps.cli import main
from bubbleflow.case.config import case_from_dict, load_case
from bubbleflow.flow import navier_stokes

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
MODELLED = set(flow_floors.PHASE_FIELDS) | {flow_floors.SOLVE, flow_floors.OUTPUT}


def read_rows(path):
    with open(path, newline="") as fh:
        reader = csv.DictReader(fh)
        return reader.fieldnames, list(reader)


def run_cli(args):
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(args)
    return code, stdout.getvalue(), stderr.getvalue()


def table_lines(stdout, title):
    """The phase lines of the table of the configuration ``title`` (``"hysing 20 x 40"``)."""
    lines = stdout.splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith(f"# {title} ("))
    assert lines[start + 1].split()[:3] == ["phase", "median", "ms"]
    out = []
    for line in lines[start + 2:]:
        if line.startswith("#"):
            break
        out.append(line)
    return out


@pytest.fixture(scope="module")
def small_run(tmp_path_factory):
    """Both cases at 20 x 40 (their deflation subdomains do not divide it), 3 steps after 1."""
    folder = tmp_path_factory.mktemp("bench_flow")
    reported = []
    step = navier_stokes.FlowSolver.step

    def recording(self, state):
        new, report = step(self, state)
        # (None: a step with the phase clock off)
        reported.append(None if report.phases is None else list(report.phases))
        return new, report

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(navier_stokes.FlowSolver, "step", recording)
        code, out, err = run_cli(["bench", "--flow", "--cases", "hysing,column", "--sizes", "20",
                                  "--steps", "3", "--skip", "1", "--backend", "numpy",
                                  "--copy-mib", "4", "--csv", str(folder)])
    return dict(code=code, out=out, err=err, folder=folder, reported=reported,
                path=folder / "bench_flow.csv")


def test_runs_and_prints_every_phase_beside_its_floor(small_run):
    assert small_run["code"] == 0, small_run["err"]
    phases = []
    for names in small_run["reported"]:
        phases += [n for n in names or () if n not in phases]
    assert "pressure solve" in phases
    # Each configuration: 1 + 3 steps with the phase clock, then 3 without.
    assert [names is None for names in small_run["reported"]] == \
        ([False] * 4 + [True] * 3) * 2
    for title in ("hysing 20 x 40", "column 20 x 40"):
        lines = table_lines(small_run["out"], title)
        # The phases the flow reported, in its order, then output, the whole
        # step, and the step with the clock off.
        assert [line[:18].strip() for line in lines] == \
            phases + ["output", "step", "step, clock off"]
        for line in lines[:-1]:
            name, cells = line[:18].strip(), line[18:].split()
            assert len(cells) == 5, line
            if name in MODELLED or name == "step":
                assert all(c != "-" for c in cells[:4]), line     # a floor
                # and a ratio to it, unless the phase moves nothing on the device
                assert (cells[4] == "-") == (float(cells[3]) == 0), line
    # Progress: a line as each configuration starts (with the subdomains it
    # uses) and as it finishes.
    err = small_run["err"].splitlines()
    assert sum("started" in line for line in err) == 2
    assert sum("finished" in line for line in err) == 2
    for title, note in (("hysing 20 x 40", "deflation none"),
                        ("column 20 x 40", "deflation none")):
        assert any(f"{title}: started; {note}" in line for line in err), err


def test_csv_columns_and_consistent_numbers(small_run):
    columns, rows = read_rows(small_run["path"])
    assert tuple(columns) == bench_mod.FLOW_COLUMNS
    for name in ("case", "nx", "ny", "phase", "median_ms", "mean_ms", "share", "floor_ms",
                 "ratio_to_floor", "iterations_mean", "iterations_max", "ms_per_iteration",
                 "step_ms", "wall_s_per_sim_s", "projected_wall_s", "snapshot_ms", "copy_gb_s"):
        assert name in columns
    # Written atomically: nothing else left in the folder.
    assert sorted(os.listdir(small_run["folder"])) == ["bench_flow.csv"]
    for case in ("hysing", "column"):
        these = [r for r in rows if r["case"] == case]
        assert these[-1]["phase"] == "step" and these[-2]["phase"] == "output"
        step = these[-1]
        means = [float(r["mean_ms"]) for r in these[:-1]]
        assert float(step["mean_ms"]) == pytest.approx(sum(means), rel=1e-9)
        assert float(step["step_ms"]) == pytest.approx(sum(means), rel=1e-9)
        assert sum(float(r["share"]) for r in these[:-1]) == pytest.approx(1.0, rel=1e-9)
        for r in these:
            assert (r["status"], r["steps"], r["skip"], r["nx"], r["ny"], r["nz"], r["cells"]) == (
                "ok", "3", "1", "20", "40", "", "800")
            if r["floor_ms"] and float(r["floor_ms"]) > 0:
                assert float(r["ratio_to_floor"]) == pytest.approx(
                    float(r["mean_ms"]) / float(r["floor_ms"]), rel=1e-9)
        assert float(step["floor_ms"]) == pytest.approx(
            sum(float(r["floor_ms"] or 0) for r in these[:-1]), rel=1e-9)
        assert float(step["projected_wall_s"]) == pytest.approx(
            float(step["wall_s_per_sim_s"]) * float(step["time_end"]), rel=1e-9)
        assert float(step["wall_s_per_sim_s"]) == pytest.approx(
            float(step["step_ms"]) / 1e3 / float(step["dt_mean"]), rel=1e-9)
        assert 0 < float(step["iterations_mean"]) <= int(step["iterations_max"])
        assert float(step["ms_per_iteration"]) > 0 and int(step["bytes_per_iteration"]) > 0
        assert float(step["snapshot_ms"]) > 0 and float(step["snapshot_bytes"]) > 0
        assert 0 < float(step["snapshots_per_step"]) <= 1
        # The step with the clock off: its own steps' times, on every row.
        off_mean, off_median = float(step["clock_off_mean_ms"]), float(step["clock_off_median_ms"])
        assert off_mean > 0 and off_median > 0
        assert float(step["clock_off_ratio_to_floor"]) == pytest.approx(
            off_mean / float(step["floor_ms"]), rel=1e-9)
        assert {r["clock_off_mean_ms"] for r in these} == {step["clock_off_mean_ms"]}


def test_a_new_phase_of_the_flow_is_shown_without_a_floor(monkeypatch, tmp_path):
    step = navier_stokes.FlowSolver.step

    def with_new_phase(self, state):
        new, report = step(self, state)
        if report.phases is not None:          # (None: a step with the phase clock off)
            report.phases["something new"] = 1e-3
        return new, report

    monkeypatch.setattr(navier_stokes.FlowSolver, "step", with_new_phase)
    code, out, err = run_cli(["bench", "--flow", "--cases", "hysing", "--sizes", "16",
                              "--steps", "1", "--skip", "0", "--backend", "numpy",
                              "--copy-mib", "4", "--no-progress"])
    assert code == 0, err
    assert err == ""
    line = next(x for x in table_lines(out, "hysing 16 x 32") if x.startswith("something new"))
    assert line.split()[-2:] == ["-", "-"] and float(line.split()[3]) == pytest.approx(1.0)


def test_a_failing_configuration_is_recorded_and_the_others_go_on(monkeypatch, tmp_path):
    calls = []
    step = navier_stokes.FlowSolver.step

    def boom_once(self, state):
        calls.append(1)
        if len(calls) == 1:
            raise RuntimeError("out of\nmemory")
        return step(self, state)

    monkeypatch.setattr(navier_stokes.FlowSolver, "step", boom_once)
    path = tmp_path / "f.csv"
    code, out, err = run_cli(["bench", "--flow", "--cases", "hysing", "--sizes", "16", "24",
                              "--steps", "1", "--skip", "0", "--backend", "numpy",
                              "--copy-mib", "4", "--csv", str(path)])
    assert code == 1
    assert "# hysing 16 x 32: failed: RuntimeError: out of memory" in out
    rows = read_rows(path)[1]
    assert rows[0]["status"] == "failed: RuntimeError: out of memory" and rows[0]["phase"] == ""
    assert rows[-1]["phase"] == "step" and rows[-1]["nx"] == "24" and rows[-1]["status"] == "ok"


def test_a_flow_outside_its_physical_bounds_is_a_failed_configuration(tmp_path):
    # A fixed step inside the gravity limit at rest, beyond the convective one once moving.
    path = tmp_path / "f.csv"
    code, out, err = run_cli(["bench", "--flow", "--cases", "hysing", "--sizes", "16",
                              "--steps", "12", "--skip", "0", "--backend", "numpy",
                              "--copy-mib", "4", "--csv", str(path), "--set", "time.dt=0.007",
                              "--set", "physics.gravity=500"])
    assert code == 1
    assert "failed: FloatingPointError: the flow left its physical bounds at step" in out, out
    assert read_rows(path)[1][0]["status"].startswith("failed: FloatingPointError")


def one_error_line(err):
    lines = err.splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith("error: "), err
    assert "Traceback" not in err
    return lines[0]


@pytest.mark.parametrize("args, fragment", [
    (["--flow", "--contrasts", "1"], "bubbleflow bench: --contrasts: given with --flow"),
    (["--flow", "--repeat", "3"], "--repeat: given with --flow"),
    (["--steps", "3"], "bubbleflow bench: --steps: given without --flow"),
    (["--set", "grid.nx=8"], "--set: given without --flow"),
    (["--flow", "--cases", "nope"], "--cases: got 'nope'; expected a comma-separated list of "
                                    "hysing, column"),
    (["--flow", "--cases", "cases/bubbly_column.yaml"], "a case of mode 'pressure'"),
    (["--flow", "--steps", "0"], "--steps: got '0'; expected an integer >= 1"),
    (["--flow", "--skip", "-1"], "--skip: got '-1'; expected an integer >= 0"),
    (["--flow", "--sizes", "3"], "--sizes: got '3'; expected NX"),
    (["--flow", "--sizes", "40x"], "--sizes: got '40x'"),
    (["--flow", "--sizes", "32", "--set", "grid.nx=32"], "grid.nx together with --sizes"),
    (["--flow", "--cases", "hysing", "--set", "solver.bogus=1"], "solver.bogus"),
    (["--flow", "--cases", "hysing", "--sizes", "24", "--set", "solver.method=dpcg", "--set",
      "solver.deflation.type=subdomains", "--set", "solver.deflation.subdomains=[5,5]"],
     "solver.deflation.subdomains: got [5, 5]"),
    (["--flow", "--csv", "/proc/no/such/dir/b.csv"], "--csv: got"),
    (["--flow", "--bogus"], "unrecognized arguments: --bogus"),
])
def test_bad_arguments_are_one_line(args, fragment, capsys, monkeypatch):
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(bench_mod, "run_flow_bench", lambda *a, **k: pytest.fail("it ran"))
    assert main(["bench", "--backend", "numpy", *args]) == 2
    out, err = capsys.readouterr()
    assert fragment in one_error_line(err)
    assert out == ""


def test_size_that_cannot_fit_is_refused_before_any_work(capsys, monkeypatch):
    import bubbleflow.compute.backend as backend_mod

    monkeypatch.setattr(bench_mod, "run_flow_bench", lambda *a, **k: pytest.fail("it ran"))
    monkeypatch.setattr(backend_mod, "host_available_memory", lambda: 2 ** 30)
    assert main(["bench", "--flow", "--backend", "numpy", "--sizes", "16", "4096"]) == 2
    out, err = capsys.readouterr()
    line = one_error_line(err)
    assert "--sizes: got 4096 (hysing 4096 x 8192), which does not fit" in line and "GiB" in line
    assert out == ""


@pytest.mark.parametrize("name", sorted(NAMED_CASES))
def test_named_cases_are_the_shipped_case_files(name):
    """The texts in the package must stay the cases of the source tree's case files."""
    path = os.path.join(ROOT, NAMED_CASES[name].file)
    if not os.path.exists(path):
        pytest.skip("no source tree")
    assert case_from_dict(named_case_data(name)).to_dict() == load_case(path).to_dict(), (
        f"{NAMED_CASES[name].file} changed: update its copy in bubbleflow/apps/bench/flow_cases.py")


def test_sizes_and_subdomains(tmp_path):
    assert [nearest_divisor(n, c) for n, c in ((100, 8), (160, 8), (7, 4), (40, 16))] == \
        [10, 8, 7, 20]
    configs = build_configs(["hysing", "column"], None, [], on_device=True)
    assert [(c.label, c.case.grid.nx, c.case.grid.ny) for c in configs] == [
        ("hysing", 80, 160), ("hysing", 160, 320), ("hysing", 320, 640),
        ("column", 512, 1024), ("column", 1024, 2048), ("column", 2048, 4096)]
    assert [c.subdomains_note.split(" (")[0].split(" ")[:2] for c in configs] == \
        [["deflation", "none"]] * 6
    # A case file with subdomain counts that do not divide a size: the nearest divisors.
    path = tmp_path / "column.yaml"
    text = NAMED_CASES["column"].text
    assert "method: pcg" in text and "deflation: {type: none}" in text
    path.write_text(text.replace("method: pcg", "method: dpcg").replace(
        "deflation: {type: none}", "deflation: {type: subdomains, subdomains: [8, 16]}"))
    (one,) = build_configs([str(path)], [((96, 200), "96x200")], [], on_device=False)
    assert tuple(one.case.solver.deflation.subdomains) == (8, 20)
    assert "subdomains 8 x 20 (the case's 8 x 16 do not divide 96 x 200" in one.subdomains_note
    (kept,) = build_configs([str(path)], [((32,), "32")], [], on_device=False)
    assert (kept.case.grid.ny, kept.subdomains_note) == (64, "deflation subdomains 8 x 16 "
                                                              "(the case's)")
    (fixed,) = build_configs([os.path.join(ROOT, "cases", "two_phase.yaml")], None,
                             ["grid.nx=24", "grid.ny=48"], on_device=False)
    assert (fixed.case.grid.nx, fixed.case.grid.ny) == (24, 48)


def test_script_wrapper():
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    proc = subprocess.run([sys.executable, os.path.join(ROOT, "scripts", "flow_phases.py"),
                           "cases/two_phase.yaml", "--steps", "0"], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 2, proc.stderr
    assert "--steps: got '0'" in one_error_line(proc.stderr)


def test_a_named_case_on_given_cells_with_overrides():
    case = named_case("rising3d", (16, 20, 32), "test", ["output.bubbles_every=0"])
    assert tuple(case.grid.cells) == (16, 20, 32)
    assert case.output.bubbles_every == 0
    assert tuple(named_case("hysing", (24, 48), "test").grid.cells) == (24, 48)
