"""What a flow run says at its end is what its file holds: the gas volume
change (a warning beyond the tolerance, naming the method), the final
quantities with their units, and, when it stops, the whole command that
continues it."""
import os
import shlex
import signal
import subprocess
import sys
import time

import h5py
import numpy as np
import pytest
from matplotlib.text import Text

from bubbleflow.apps.cli import build_parser, main, restart_command
from bubbleflow.apps.plots import run_figures
from bubbleflow.apps.run import restart_hint
from bubbleflow.flow.bubble_tracking import sample_interval
from bubbleflow.io.flow_output import GAS_VOLUME_TOLERANCE
from helpers.cli import ROOT, run_interrupted

CASE = os.path.join(ROOT, "cases", "two_phase.yaml")
SMALL = ["--no-progress", "--set", "grid.nx=16", "--set", "grid.ny=32",
         "--set", "output.interval=0.05",
         "--set", "time.end=0.1"]


def run(tmp, backend, method, *extra):
    return main(["run", CASE, "--backend", backend.name, "-o", str(tmp), *SMALL,
                 "--set", f"levelset.method={method}", *extra])


def stored_change(index):
    """``/diagnostics``' gas volume change, its units and method; the change
    recomputed from the stored area series."""
    with h5py.File(index, "r") as fh:
        d = fh["diagnostics"]
        area = d["area"][()]
        return (float(d.attrs["gas_volume_change"]), d.attrs["gas_volume_change_units"],
                d.attrs["levelset_method"], (area[-1] - area[0]) / area[0])


def test_a_levelset_run_that_loses_gas_warns_once_and_its_file_says_so(tmp_path, backend,
                                                                      capsys):
    assert run(tmp_path, backend, "levelset") == 0
    out, err = capsys.readouterr()
    change, units, method, recomputed = stored_change(tmp_path / "two_phase.h5")
    assert abs(change) > GAS_VOLUME_TOLERANCE and change == recomputed
    assert units == "1" and method == "levelset"
    warnings = [line for line in err.splitlines() if "gas volume" in line]
    assert len(warnings) == 1 and warnings[0].startswith("warning: two_phase: "), err
    assert f"{100 * change:+.3g} %" in warnings[0] and "levelset.method levelset" in warnings[0]
    assert "gas volume" not in out
    # The figure of the diagnostics says it in red.
    fig = run_figures(tmp_path / "two_phase.h5")["two_phase_benchmark.png"]
    red = [t for t in fig.findobj(Text) if "gas volume changed by" in t.get_text()]
    assert len(red) == 1 and red[0].get_color() == "#c62828"
    assert "levelset.method levelset" in red[0].get_text()


def test_a_clsvof_run_keeps_its_gas_and_says_so_without_a_warning(tmp_path, backend, capsys):
    assert run(tmp_path, backend, "clsvof") == 0
    out, err = capsys.readouterr()
    change, units, method, recomputed = stored_change(tmp_path / "two_phase.h5")
    assert abs(change) <= GAS_VOLUME_TOLERANCE and change == recomputed
    assert units == "1" and method == "clsvof"
    assert "gas volume" not in err, err
    lines = out.strip().splitlines()
    assert "gas volume (area in 2-D) changed by" in lines[-1], out
    assert "levelset.method clsvof" in lines[-1] and f"tolerance {GAS_VOLUME_TOLERANCE:g}" in lines[-1]
    fig = run_figures(tmp_path / "two_phase.h5")["two_phase_benchmark.png"]
    assert not [t for t in fig.findobj(Text) if "gas volume" in t.get_text()]


def test_the_final_line_gives_each_quantity_its_unit(tmp_path, backend, capsys):
    assert run(tmp_path, backend, "levelset") == 0
    final = [line for line in capsys.readouterr().out.splitlines() if line.startswith("final: ")]
    assert len(final) == 1
    items = dict(part.split(" ", 1) for part in final[0][len("final: "):].split(", "))
    assert items["area"].endswith(" m^2") and items["rise_velocity"].endswith(" m/s")
    assert items["centroid_y"].endswith(" m") and items["circularity"].endswith(" (-)")
    for name, value in items.items():
        assert len(value.split(" ")) == 2, f"{name} {value}: no unit"


def test_the_final_line_of_several_gas_regions_names_the_whole_gas_phase(tmp_path, backend,
                                                                         capsys):
    """Six bubbles under a free surface: the final quantities are the whole
    gas phase's, and the line says which regions they stand for: the last
    tracking sample's, which says so where it is not the last step."""
    column = os.path.join(ROOT, "cases", "bubbly_column_flow.yaml")

    def final_head(folder, *extra):
        assert main(["run", column, "--backend", backend.name, "-o", str(folder),
                     "--no-progress", "--set", "grid.nx=32", "--set", "grid.ny=64",
                     "--set", "time.end=0.004", *extra]) == 0
        out = capsys.readouterr().out.splitlines()
        final = [line for line in out if line.startswith("final")]
        assert len(final) == 1, out
        head, _, rest = final[0].partition("): ")
        assert head.startswith("final, the whole gas phase (6 bubbles + gas layer at t = ")
        assert rest.startswith("area ") and "circularity" in rest
        with h5py.File(folder / "bubbly_column_flow.h5", "r") as fh:
            return head, int(fh["diagnostics/step"][-1])

    head, steps = final_head(tmp_path / "auto")
    at_end = steps % sample_interval("auto", backend) == 0
    assert head.endswith("at t = 0.004 s" if at_end else ", the last tracking sample"), head
    head, _ = final_head(tmp_path / "first", "--set", f"output.bubbles_every={steps + 1}")
    assert head.endswith("at t = 0 s, the last tracking sample"), head


def test_a_restart_counts_the_change_from_the_first_state(tmp_path):
    common = ["--backend", "numpy", *SMALL, "--set", "levelset.method=levelset"]
    full, part, cont = run_interrupted(CASE, tmp_path, common, 0.05, 0.1)
    whole = stored_change(full)
    assert stored_change(cont) == whole
    assert stored_change(part)[0] != whole[0]         # the half run's own change is smaller
    with h5py.File(cont, "r") as fh:
        assert fh["diagnostics/step"][0] == 0


def test_the_restart_command_holds_what_decides_the_result():
    args = build_parser().parse_args(
        ["run", "my case.yaml", "-o", "out dir", "--backend", "numpy", "--set", "grid.nx=8",
         "--set", "solver.deflation.subdomains=[2, 2]", "--quiet", "--overwrite",
         "--no-progress", "--restart", "old.h5"])
    words = restart_command(args)
    assert words == ["bubbleflow", "run", "my case.yaml", "-o", "out dir", "--backend", "numpy",
                     "--set", "grid.nx=8", "--set", "solver.deflation.subdomains=[2, 2]"]
    hint = restart_hint(words, "out dir/x.h5")
    assert shlex.split(hint) == words + ["--restart", "out dir/x.h5"]
    assert restart_hint(None, "a b.h5") == "--restart 'a b.h5'"


def _env():
    return dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))


def test_the_command_printed_by_a_stopped_run_continues_it(tmp_path):
    """SIGTERM a run whose -o and --set hold spaces; the line it prints,
    typed as shown (from the same folder), finishes the run."""
    out = tmp_path / "out dir"
    args = ["run", "cases/two_phase.yaml", "-o", str(out), "--backend", "numpy",
            "--no-progress", "--set", "grid.nx=16", "--set", "grid.ny=32",
            "--set", "solver.deflation.subdomains=[4, 4]", "--set", "output.interval=0.1",
            "--set", "time.end=1.5"]
    proc = subprocess.Popen([sys.executable, "-m", "bubbleflow.apps.cli", *args], cwd=ROOT,
                            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    index = out / "two_phase.h5"
    deadline = time.monotonic() + 120
    while not index.exists() and time.monotonic() < deadline:
        time.sleep(0.01)
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=300)
    if proc.returncode == 0:
        pytest.skip("the run finished before SIGTERM on this machine")
    assert proc.returncode == 128 + signal.SIGTERM, err
    said = [line for line in err.splitlines() if "continue with: " in line]
    assert len(said) == 1, err
    words = shlex.split(said[0].split("continue with: ", 1)[1])
    assert words[:2] == ["bubbleflow", "run"] and words[-2:] == ["--restart", str(index)]
    assert words[2:-2] == args[1:6] + args[7:]         # less --no-progress
    cont = subprocess.run([sys.executable, "-m", "bubbleflow.apps.cli", *words[1:]], cwd=ROOT,
                          env=_env(), capture_output=True, text=True, timeout=600)
    assert cont.returncode == 0, cont.stderr
    with h5py.File(index, "r") as fh:
        assert fh.attrs["run_status"] == "finished"
        assert np.isclose(fh["diagnostics/time"][-1], 1.5)


def test_the_command_printed_after_a_failed_write_continues_the_run(tmp_path, backend,
                                                                     monkeypatch, capsys):
    """A snapshot the disk refuses ends the run with one line holding the
    command that continues it from its last checkpoint; typed, it does."""
    import errno

    from bubbleflow.io import result_writer
    from bubbleflow.io.flow_output import FlowWriter

    write = result_writer.write_snapshot

    def full_after_the_first(path, step, time, fields, compression=None):
        if step > 0:
            raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), path)
        return write(path, step, time, fields, compression)

    monkeypatch.setattr(FlowWriter, "background", False)
    monkeypatch.setattr(result_writer, "write_snapshot", full_after_the_first)
    assert run(tmp_path, backend, "clsvof") == 1
    err = capsys.readouterr().err
    said = [line for line in err.splitlines() if "continue from its last checkpoint with: " in line]
    assert len(said) == 1 and said[0].startswith("error: two_phase: cannot write"), err
    words = shlex.split(said[0].split(" with: ", 1)[1])
    index = tmp_path / "two_phase.h5"
    assert words[-2:] == ["--restart", str(index)] and words[:2] == ["bubbleflow", "run"]
    monkeypatch.setattr(result_writer, "write_snapshot", write)
    assert main(words[1:]) == 0
    with h5py.File(index, "r") as fh:
        assert fh.attrs["run_status"] == "finished"
        assert np.isclose(fh["diagnostics/time"][-1], 0.1)


def test_the_figure_note_reads_the_volume_of_a_3d_run_and_stays_quiet_within_tolerance():
    from bubbleflow.apps.plots_figure import gas_volume_note

    def note(volume, method="levelset"):
        return gas_volume_note({"diagnostics": {"area": None, "volume": np.asarray(volume)},
                                "case": {"levelset": {"method": method}}})

    assert note([2.0, 2.02]) == ("gas volume changed by +1 % from the first row to the last "
                                 "(levelset.method levelset)")
    assert note([2.0, 2.0 * (1 + 1e-9)], "clsvof") is None
    assert note([0.0, 0.0]) is None                      # no gas: nothing to conserve
