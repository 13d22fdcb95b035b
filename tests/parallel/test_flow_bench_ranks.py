"""``mpiexec -n N bubbleflow bench --flow``: the step on the ranks phase by
phase, the messages counted per phase, the model of a step beside it."""
import csv
import re
import subprocess
import sys

import numpy as np
import pytest

from bubbleflow.apps.bench import ranks_flow
from bubbleflow.apps.bench.ranks_flow import (SMALL_SIDE, CountingComm, issue_times, model_rows,
                                               small_cells)
from bubbleflow.apps.bench.ranks_model import Link
from bubbleflow.case.config import load_case
from bubbleflow.compute.comm import SingleProcess
from helpers.launcher import ROOT, child_env, mpiexec, said


class Quiet(SingleProcess):
    """One process whose swaps go nowhere (a counting test needs no neighbours)."""

    def exchange(self, lower, upper, send_lower, send_upper, recv_lower, recv_upper):
        return None


def test_the_counting_communicator_counts_calls_and_bytes_by_kind():
    comm = CountingComm(Quiet())
    assert (comm.size, comm.rank) == (1, 0)                 # everything else passes through
    plane = np.zeros((4, 5))
    comm.exchange(None, 1, plane, plane, plane.copy(), plane.copy())   # an edge slab: one side
    comm.exchange(0, 1, plane, plane, plane.copy(), plane.copy())
    assert float(comm.allreduce_sum(np.ones(3)).sum()) == 3.0
    comm.allreduce_max(2.0)
    comm.gather(np.zeros(7))
    assert comm.take() == {"halo": (2, 3 * plane.nbytes), "reduce": (2, 3 * 8 + 8),
                           "collective": (1, 7 * 8)}
    assert comm.take() == {}


def test_a_graphs_captured_calls_count_at_each_replay_not_at_its_capture():
    """A solver that captures its messages into a CUDA graph counts them
    with ``counted_during`` (kept apart) and ``replayed`` (once a replay)."""
    comm = CountingComm(Quiet())
    plane = np.zeros((2, 3))
    comm.allreduce_max(1.0)
    made = comm.counted_during(lambda: (comm.exchange(0, 1, plane, plane, plane, plane),
                                        comm.allgather_into(np.ones(4), np.empty(4))))
    assert made == {"halo": (1, 2 * plane.nbytes), "collective": (1, 4 * 8)}
    assert comm.take() == {"reduce": (1, 8)}             # the capture sent nothing
    comm.replayed(made)
    comm.replayed(made)
    assert comm.take() == {"halo": (2, 4 * plane.nbytes), "collective": (2, 8 * 8)}


def test_the_model_adds_a_phases_bytes_and_messages():
    case = load_case(f"{ROOT}/cases/two_phase.yaml", [("grid.nx", 20), ("grid.ny", 40)])
    link = Link(copy_bandwidth=1e10, latency=1e-5, bandwidth=1e9, allreduce=2e-5)
    names = ["correction", "pressure solve"]
    ms = {"correction": np.array([1.0, 3.0, 2.0]), "pressure solve": np.array([5.0, 5.0, 6.0])}
    messages = {"correction": {"halo": (2.0, 4000.0), "reduce": (1.0, 8.0)},
                "pressure solve": {"halo": (30.0, 1e5), "reduce": (60.0, 480.0)}}
    rows = model_rows(case, 2, names, ms, messages, dict(solve_bytes=2e7), link)
    correction, solve, step = rows
    assert correction["memory_ms"] > 0 and correction["rank_bytes"] > 0
    assert correction["message_ms"] == pytest.approx(1e3 * (2 * 1e-5 + 4000 / 1e9 + 1 * 2e-5))
    assert solve["memory_ms"] == pytest.approx(1e3 * 2e7 / 1e10)
    assert solve["message_ms"] == pytest.approx(1e3 * (30 * 1e-5 + 1e5 / 1e9 + 60 * 2e-5))
    assert correction["median_ms"] == 2.0 and solve["median_ms"] == 5.0
    assert step["model_ms"] == pytest.approx(correction["model_ms"] + solve["model_ms"])
    assert step["median_ms"] == 8.0 and step["halo_swaps"] == 32 and step["reductions"] == 61
    assert solve["ratio_to_model"] == pytest.approx(5.0 / solve["model_ms"])


class _TwoRanks:
    """Rank 0 of two whose gather hands back its own and the other's array."""

    rank = 0

    def __init__(self, other):
        self.other = other

    def gather(self, local, root=0):
        return [local, self.other]


def test_the_step_is_the_slowest_ranks_whole_step_not_the_sum_of_phase_maxima():
    """Rank 0 rebuilds the bubble's level set while rank 1 waits for it in
    the next step's first phase: each phase's row is its slowest rank's, the
    step the slowest rank's whole step (the wait counted once)."""
    names = ["properties", "reinitialisation"]
    ours = {"properties": np.array([0.5, 0.6]), "reinitialisation": np.array([5.0, 5.2])}
    theirs = np.array([[4.6, 4.8], [1.0, 1.1]])          # phases x steps
    phases, step = ranks_flow._slowest(_TwoRanks(theirs), names, ours)
    assert list(phases["properties"]) == [4.6, 4.8]
    assert list(phases["reinitialisation"]) == [5.0, 5.2]
    assert list(step) == pytest.approx([5.6, 5.9])       # not 9.6 and 10.0
    case = load_case(f"{ROOT}/cases/two_phase.yaml", [("grid.nx", 20), ("grid.ny", 40)])
    link = Link(copy_bandwidth=1e10, latency=1e-5, bandwidth=1e9, allreduce=2e-5)
    rows = model_rows(case, 2, names, phases, {}, dict(solve_bytes=0.0), link, None, step)
    assert rows[-1]["phase"] == "step" and rows[-1]["median_ms"] == pytest.approx(5.75)


def test_the_issue_time_comes_from_a_small_copy_and_joins_the_model():
    """The small copy shrinks every axis alike to SMALL_SIDE on the shortest
    (4 planes a rank or more on the slabs' axis); a phase's issue time is
    the copy's time less its messages (the solve's per iteration, scaled);
    the model is the messages plus the larger of the bytes and the issue."""
    assert small_cells((20, 40), 2) is None and small_cells((SMALL_SIDE, 64), 2) is None
    assert small_cells((2048, 4096), 2) == (SMALL_SIDE, 2 * SMALL_SIDE)
    assert small_cells((256, 256, 512), 4) == (SMALL_SIDE, SMALL_SIDE, 2 * SMALL_SIDE)
    assert small_cells((4096, 96), 32) == (1365, 128)            # (4 planes a rank)
    link = Link(copy_bandwidth=1e10, latency=1e-5, bandwidth=1e9, allreduce=2e-5)
    small = {"correction": np.array([0.5, 0.7, 0.6]), "pressure solve": np.array([2.0, 2.0])}
    sent = {"correction": {"reduce": (1.0, 8.0)}}
    issue = issue_times(["correction", "pressure solve"], small, sent, dict(iterations=4.0),
                        link, iterations=12.0)
    assert issue["correction"] == pytest.approx(0.6 - 1e3 * 2e-5)
    assert issue["pressure solve"] == pytest.approx(2.0 * 12.0 / 4.0)
    case = load_case(f"{ROOT}/cases/two_phase.yaml", [("grid.nx", 20), ("grid.ny", 40)])
    ms = {"correction": np.array([1.0]), "pressure solve": np.array([9.0])}
    messages = {"correction": {"reduce": (1.0, 8.0)}, "pressure solve": {"reduce": (24.0, 192.0)}}
    correction, solve, step = model_rows(case, 2, ["correction", "pressure solve"], ms, messages,
                                         dict(solve_bytes=1e3), link, issue)
    assert solve["issue_ms"] == pytest.approx(6.0) and solve["memory_ms"] < 6.0
    assert solve["model_ms"] == pytest.approx(6.0 + solve["message_ms"])
    assert correction["model_ms"] == pytest.approx(
        max(correction["memory_ms"], correction["issue_ms"]) + correction["message_ms"])
    assert step["issue_ms"] == pytest.approx(correction["issue_ms"] + 6.0)
    assert step["model_ms"] == pytest.approx(correction["model_ms"] + solve["model_ms"])
    # Without a small copy, no issue time: the bytes and messages alone.
    assert model_rows(case, 2, ["correction"], ms, messages, {}, link)[0]["issue_ms"] is None


def _ranks_flow_bench(tmp_path, case, size):
    """``mpiexec -n 2 bubbleflow bench --flow`` of ``case`` at ``size`` on
    NumPy, two steps after one: the process (checked to have ended well)
    and the CSV's rows by phase."""
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich mpi4py: the test extras)")
    pytest.importorskip("mpi4py")
    out = tmp_path / "ranks.csv"
    proc = subprocess.run([mpiexec(), "-n", "2", sys.executable, "-m", "bubbleflow", "bench",
                           "--flow", "--cases", case, "--sizes", str(size), "--steps", "2",
                           "--skip", "1", "--backend", "numpy", "--no-progress", "--csv",
                           str(out)], capture_output=True, text=True, timeout=600,
                          env=child_env(), cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return proc, {r["phase"]: r for r in csv.DictReader(out.open())}


def test_mpiexec_bench_flow_prints_the_ranks_table_and_writes_its_csv(tmp_path):
    proc, rows = _ranks_flow_bench(tmp_path, "hysing", 20)
    assert not said(proc.stderr), proc.stderr
    assert "hysing 20 x 40 on 2 ranks" in proc.stdout and "x model" in proc.stdout
    assert proc.stdout.count("on 2 ranks") == 1                    # rank 0 alone prints
    solve, step = rows["pressure solve"], rows["step"]
    assert solve["ranks"] == "2" and solve["comm"] == "mpi"
    # A solve swaps halos and sums over the ranks every iteration.
    assert float(solve["halo_swaps"]) > 0 and float(solve["reductions"]) > 0
    assert float(solve["model_ms"]) > 0 and float(step["model_ms"]) >= float(solve["model_ms"])
    assert float(step["median_ms"]) > 0 and "output" not in rows
    assert step["issue_ms"] == ""                   # (20 x 40: no smaller copy is made)


def test_mpiexec_bench_flow_takes_the_issue_time_from_a_small_copy(tmp_path):
    proc, rows = _ranks_flow_bench(tmp_path, "column", 64)
    assert "issue ms" in proc.stdout
    for name, r in rows.items():
        if name == "step":
            continue
        assert float(r["issue_ms"]) >= 0
        bytes_ms = float(r["memory_ms"]) if r["memory_ms"] else 0.0
        assert float(r["model_ms"]) == pytest.approx(
            max(bytes_ms, float(r["issue_ms"])) + float(r["message_ms"]))
    assert float(rows["step"]["issue_ms"]) > 0


def test_flow_scaling_rows_share_the_one_ranks_step_and_add_the_messages():
    from bubbleflow.apps.bench.ranks_flow_scaling import flow_scaling_rows

    base = dict(case="hysing", nx=20, ny=40, nz=None, comm="mpi", backend="numpy")
    rows = [dict(base, phase="momentum", ranks=1, median_ms=1.0, message_ms=0.0),
            dict(base, phase="step", ranks=1, median_ms=10.0, message_ms=0.0),
            dict(base, phase="step", ranks=4, median_ms=4.0, message_ms=1.5),
            dict(base, phase="step", ranks=2, median_ms=6.0, message_ms=0.5)]
    one, two, four = flow_scaling_rows(rows)
    assert [r["ranks"] for r in (one, two, four)] == [1, 2, 4]
    assert one["efficiency"] == 1.0 and one["model_ms"] == 10.0
    assert two["model_ms"] == pytest.approx(10.0 / 2 + 0.5)
    assert four["model_ms"] == pytest.approx(10.0 / 4 + 1.5)
    assert four["efficiency"] == pytest.approx(10.0 / (4 * 4.0))
    assert four["model_efficiency"] == pytest.approx(10.0 / (4 * 4.0))
    assert two["model_error"] == pytest.approx((5.5 - 6.0) / 6.0)
    alone = flow_scaling_rows(rows[2:3])                    # no one-rank run: no model
    assert alone[0]["model_ms"] is None and alone[0]["efficiency"] is None


def test_flow_scaling_models_each_phase_by_its_share_or_its_issue_time():
    """With phase rows on both counts and no issue times on one rank, the
    model's step is per phase the larger of the one rank's phase shared out
    and the phase's issue time on the ranks, plus its messages; the
    one-rank row is its own step."""
    from bubbleflow.apps.bench.ranks_flow_scaling import flow_scaling_rows

    base = dict(case="column", nx=64, ny=128, nz=None, comm="mpi", backend="numpy")

    def row(phase, ranks, ms, message=0.0, issue=None):
        return dict(base, phase=phase, ranks=ranks, median_ms=ms, message_ms=message,
                    issue_ms=issue)

    rows = [row("momentum", 1, 4.0), row("pressure solve", 1, 6.0), row("step", 1, 10.0),
            row("momentum", 2, 3.0, 0.25, issue=2.5), row("pressure solve", 2, 4.0, 0.5,
                                                            issue=1.0),
            row("step", 2, 7.0, 0.75)]
    one, two = flow_scaling_rows(rows)
    assert one["model_ms"] == 10.0
    # momentum: max(4 / 2, 2.5) + 0.25; the solve: max(6 / 2, 1.0) + 0.5
    assert two["model_ms"] == pytest.approx(2.75 + 3.5)
    assert two["model_error"] == pytest.approx((6.25 - 7.0) / 7.0)


def test_flow_scaling_shares_the_work_the_host_does_not_hide():
    """With issue times on one rank and on the ranks, a phase's model is the
    ranks' issue time, the one rank's time beyond its own issue time shared
    out, and the messages; a phase quicker on one rank than its issue time
    shares nothing; a phase without a one-rank issue time keeps the larger
    of its share and its issue time."""
    from bubbleflow.apps.bench.ranks_flow_scaling import flow_scaling_rows

    base = dict(case="column", nx=64, ny=128, nz=None, comm="nccl", backend="cupy")

    def row(phase, ranks, ms, message=0.0, issue=None):
        return dict(base, phase=phase, ranks=ranks, median_ms=ms, message_ms=message,
                    issue_ms=issue)

    rows = [row("momentum", 1, 4.0, issue=1.5), row("pressure solve", 1, 6.0, issue=1.0),
            row("correction", 1, 0.4, issue=0.5), row("advection", 1, 3.0),
            row("step", 1, 13.4),
            row("momentum", 2, 3.8, 0.25, issue=2.5), row("pressure solve", 2, 4.5, 0.5,
                                                            issue=1.2),
            row("correction", 2, 0.7, 0.1, issue=0.6), row("advection", 2, 1.9, 0.2, issue=1.0),
            row("step", 2, 10.9, 1.05)]
    one, two = flow_scaling_rows(rows)
    assert one["model_ms"] == 13.4
    momentum = 2.5 + (4.0 - 1.5) / 2 + 0.25
    solve = 1.2 + (6.0 - 1.0) / 2 + 0.5
    correction = 0.6 + 0.0 + 0.1
    advection = max(3.0 / 2, 1.0) + 0.2
    assert two["model_ms"] == pytest.approx(momentum + solve + correction + advection)


def _flow_scaling_run(tmp_path, *options):
    """``bench --flow --scaling 2`` of Hysing at 20 x 40 (two steps after
    one) with ``options``, its table to ``tmp_path/scaling.csv``: ``(proc,
    csv path)``; skipped without an MPI launcher."""
    if mpiexec() is None:
        pytest.skip("no mpiexec (pip install mpich mpi4py: the test extras)")
    pytest.importorskip("mpi4py")
    out = tmp_path / "scaling.csv"
    proc = subprocess.run([sys.executable, "-m", "bubbleflow", "bench", "--flow", "--scaling",
                           "2", *options, "--cases", "hysing", "--sizes", "20", "--steps", "2",
                           "--skip", "1", "--backend", "numpy", "--csv", str(out)],
                          capture_output=True, text=True, timeout=600, env=child_env(),
                          cwd=tmp_path)
    return proc, out


def test_bench_flow_scaling_launches_each_count_and_prints_one_table(tmp_path):
    proc, out = _flow_scaling_run(tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "model eff." in proc.stdout
    rows = list(csv.DictReader(out.open()))
    assert [r["ranks"] for r in rows] == ["1", "2"]
    assert float(rows[0]["efficiency"]) == 1.0 and float(rows[1]["message_ms"]) > 0
    # (20 x 40: no small copy, no issue times) the phases shared out plus the messages
    assert float(rows[1]["model_ms"]) == pytest.approx(
        float(rows[0]["step_ms"]) / 2 + float(rows[1]["message_ms"]), rel=1e-6)


def test_rounds_take_each_figure_s_median_and_pair_each_round_s_steps():
    """Rounds of the same runs: each figure the median over the rounds that
    have it; each round's N-rank step beside that round's one-rank step."""
    from bubbleflow.apps.bench.ranks_flow_scaling import (format_round_ratios, median_rows,
                                                          round_ratios)

    base = dict(case="column", nx=64, ny=128, nz=None, comm="nccl", backend="cupy")

    def rows(one, two, issue=None):
        return [dict(base, phase="momentum", ranks=1, median_ms=one / 2, message_ms=0.0,
                     issue_ms=issue),
                dict(base, phase="step", ranks=1, median_ms=one, message_ms=0.0, issue_ms=None),
                dict(base, phase="step", ranks=2, median_ms=two, message_ms=0.5, issue_ms=None)]

    rounds = [rows(10.0, 8.0, issue=1.0), rows(20.0, 12.0), rows(12.0, 9.0, issue=3.0)]
    merged = {(r["phase"], r["ranks"]): r for r in median_rows(rounds)}
    assert merged["step", 1]["median_ms"] == 12.0 and merged["step", 2]["median_ms"] == 9.0
    assert merged["momentum", 1]["median_ms"] == 6.0
    assert merged["momentum", 1]["issue_ms"] == 2.0         # of the two rounds that have it
    assert merged["step", 2]["message_ms"] == 0.5 and merged["step", 2]["issue_ms"] is None
    [(key, ranks, pairs)] = round_ratios(rounds)
    assert key == ("column", 64, 128, None) and ranks == 2
    assert pairs == [(10.0, 8.0), (20.0, 12.0), (12.0, 9.0)]
    line = format_round_ratios(round_ratios(rounds))
    assert "0.80, 0.60, 0.75 (median 0.75" in line and line.startswith("# column 64 x 128")
    # A round whose one-rank run failed pairs nothing.
    assert round_ratios([[r for r in rows(10.0, 8.0) if r["ranks"] == 2]]) == []


def test_bench_flow_scaling_rounds_run_every_count_each_round(tmp_path):
    proc, out = _flow_scaling_run(tmp_path, "--rounds", "2")
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    # Two rounds of the two counts: four runs, each printing its own table.
    assert proc.stdout.count("# hysing 20 x 40 on 1 ranks") == 2
    assert proc.stdout.count("# hysing 20 x 40 on 2 ranks") == 2
    [line] = [l for l in proc.stdout.splitlines() if "round by round" in l]
    ratios = [float(v) for v in line.split("round by round: ")[1].split(" (")[0].split(", ")]
    ones, twos = ([float(v) for v in text.split(", ")] for text in
                  re.search(r"one rank ([0-9., ]+) ms, 2 ranks ([0-9., ]+) ms\)$", line).groups())
    assert len(ratios) == len(ones) == len(twos) == 2
    # Each printed figure is rounded to 0.01: a ratio of the rounded steps
    # moves by up to q (0.005 / a + 0.005 / b), the printed one by 0.005.
    for q, a, b in zip(ratios, ones, twos):
        assert abs(q - b / a) <= 0.005 + (b / a) * (0.005 / a + 0.005 / b) + 1e-9, (q, a, b)
    rows = list(csv.DictReader(out.open()))
    assert [r["ranks"] for r in rows] == ["1", "2"]
    assert float(rows[0]["step_ms"]) == pytest.approx(np.median(ones), abs=0.006)
    assert float(rows[1]["step_ms"]) == pytest.approx(np.median(twos), abs=0.006)


def test_rounds_without_flow_scaling_is_one_line_before_any_launch(tmp_path):
    for extra in (["--flow"], ["--scaling", "2"], []):
        proc = subprocess.run([sys.executable, "-m", "bubbleflow", "bench", "--rounds", "3",
                               "--backend", "numpy", *extra], capture_output=True, text=True,
                              timeout=120, env=child_env(), cwd=tmp_path)
        lines = said(proc.stderr)
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr
        assert "--rounds" in lines[0] and "without --flow --scaling" in lines[0], proc.stderr
        assert not proc.stdout.strip()


def test_bench_flow_scaling_refuses_bad_options_before_any_launch(tmp_path):
    proc = subprocess.run([sys.executable, "-m", "bubbleflow", "bench", "--flow", "--scaling",
                           "2", "--cases", "nowhere.yaml"], capture_output=True, text=True,
                          timeout=120, env=child_env(), cwd=tmp_path)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "nowhere.yaml" in lines[0], proc.stderr
    assert "Traceback" not in proc.stderr


@pytest.mark.parametrize("option", [["--set", "solver.preconditioner.w_levels=1"],
                                    ["--steps", "3"], ["--cases", "column"]])
def test_the_solver_scaling_refuses_flow_options_in_one_line(tmp_path, option):
    """``bench --scaling`` of the solver (no ``--flow``) does not read the
    flow benchmark's options: given, they are one line, before any launch
    (under ``mpiexec`` too)."""
    command = [sys.executable, "-m", "bubbleflow", "bench", "--sizes", "64", "--backend",
               "numpy", *option]
    for launch in (command + ["--scaling", "2"], [mpiexec(), "-n", "2"] + command):
        if launch[0] is None:
            continue
        proc = subprocess.run(launch, capture_output=True, text=True, timeout=120,
                              env=child_env(), cwd=tmp_path)
        lines = said(proc.stderr)
        assert proc.returncode == 2 and len(lines) == 1, proc.stderr
        assert option[0] in lines[0] and "without --flow" in lines[0], proc.stderr
        assert "Traceback" not in proc.stderr and not proc.stdout.strip(), proc.stdout
