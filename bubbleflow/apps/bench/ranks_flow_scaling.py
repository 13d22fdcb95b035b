"""``bubbleflow bench --flow --scaling 1 2 4``: a flow step's strong scaling,
each count of ranks started by ``mpiexec -n N`` (:mod:`.ranks_flow` on
every rank), one table with the model beside each measurement.

For each configuration (a case at a size) and count ``N``: the step's
median ms (the slowest rank's, the output left out), the efficiency
``T_1 / (N T_N)`` against the one-rank run of the same launcher, and the
model's step, a sum over the phases.  A phase takes on one rank its issue
time ``I_1`` (what it takes on a small copy of the grid, the host's part:
:func:`.ranks_flow.issue_times`) and the device's work the host does not
hide, ``T_1 - I_1``; on N ranks the model is ``I_N + (T_1 - I_1) / N +
M_N``, the issue time measured on the N ranks, the exposed work shared out
and the messages ``M_N`` it sends at the measured link's latency and
bandwidth (:func:`.ranks_flow.model_rows`); on one rank it is ``T_1``.
Where the one-rank run has no issue time, ``max(T_1 / N, I_N) + M_N``;
where a run has no phase rows, or neither has issue times, the step's
``T_1 / N + M_N``.  Where the measured time stays above the model, the
ranks wait on each other, or on the host more than a small grid shows.

With ``rounds`` K every count runs K times, the counts one after the other
in each round, so that a machine whose speed drifts between runs drifts
for every count alike: each figure is then its median over the rounds,
and each round's step on N ranks over its one-rank step is printed
beside them (:func:`round_ratios`).
"""
from __future__ import annotations

import sys

__all__ = ["FLOW_SCALING_COLUMNS", "flow_scaling_rows", "format_flow_scaling",
           "run_flow_scaling", "median_rows", "round_ratios", "format_round_ratios"]

#: The table's columns (also the CSV's).
FLOW_SCALING_COLUMNS = ("case", "nx", "ny", "nz", "ranks", "comm", "backend", "step_ms",
                        "message_ms", "model_ms", "model_error", "efficiency",
                        "model_efficiency")


def _key(row):
    return (row["case"], row["nx"], row["ny"], row.get("nz"))


def _phases(rows, key, ranks):
    """``{phase: row}`` of one run's phase rows (the step's left out)."""
    return {r["phase"]: r for r in rows
            if r["phase"] != "step" and _key(r) == key and r["ranks"] == ranks}


def _phase_model(one, row, n):
    """A phase's model in ms on ``n`` ranks from its one-rank row ``one``
    (None: not measured there) and its row ``row`` on the ranks (the
    module docstring)."""
    t1 = 0.0 if one is None else one["median_ms"]
    i1 = None if one is None else one.get("issue_ms")
    i_n = row.get("issue_ms")
    if i1 is not None and i_n is not None:
        return i_n + max(t1 - i1, 0.0) / n + row["message_ms"]
    return max(t1 / n, i_n or 0.0) + row["message_ms"]


def _model(one, r, one_phases, phases):
    """The model's step in ms on ``r["ranks"]`` ranks (the module docstring)."""
    n = r["ranks"]
    if n == 1:
        return one["median_ms"]
    if not phases or not one_phases:
        return one["median_ms"] / n + r["message_ms"]
    return sum(_phase_model(one_phases.get(name), row, n) for name, row in phases.items())


def flow_scaling_rows(rows):
    """The table's rows from every count's run (one rank's among them; its
    ``step`` and phase rows): per configuration its counts in order, the
    efficiencies and the model against the one-rank row (None without it)."""
    steps = [r for r in rows if r["phase"] == "step"]
    out = []
    for key in dict.fromkeys(_key(r) for r in steps):
        group = sorted((r for r in steps if _key(r) == key), key=lambda r: r["ranks"])
        one = group[0] if group[0]["ranks"] == 1 else None
        for r in group:
            n = r["ranks"]
            model = eff = model_eff = None
            if one is not None:
                model = _model(one, r, _phases(rows, key, 1), _phases(rows, key, n))
                eff = one["median_ms"] / (n * r["median_ms"])
                model_eff = one["median_ms"] / (n * model)
            out.append(dict(case=key[0], nx=key[1], ny=key[2], nz=key[3], ranks=n,
                            comm=r["comm"], backend=r["backend"], step_ms=r["median_ms"],
                            message_ms=r["message_ms"], model_ms=model,
                            model_error=(None if model is None
                                         else (model - r["median_ms"]) / r["median_ms"]),
                            efficiency=eff, model_efficiency=model_eff))
    return out


def format_flow_scaling(table):
    """The rows of :func:`flow_scaling_rows` as an aligned text table."""
    head = ("case", "size", "ranks", "comm", "step ms", "messages ms", "model ms",
            "model error", "efficiency", "model eff.")
    pct = (lambda v, sign="": "-" if v is None else f"{100 * v:{sign}.1f} %")
    lines = []
    for t in table:
        size = " x ".join(str(v) for v in (t["nx"], t["ny"], t["nz"]) if v is not None)
        lines.append((t["case"], size, str(t["ranks"]), t["comm"], f"{t['step_ms']:.3f}",
                      f"{t['message_ms']:.3f}",
                      "-" if t["model_ms"] is None else f"{t['model_ms']:.3f}",
                      pct(t["model_error"], "+"), pct(t["efficiency"]),
                      pct(t["model_efficiency"])))
    widths = [max([len(h)] + [len(row[i]) for row in lines]) for i, h in enumerate(head)]
    fmt = lambda row: "  ".join(c.rjust(w) for c, w in zip(row, widths))   # noqa: E731
    return "\n".join([fmt(head), fmt(["-" * w for w in widths])] + [fmt(r) for r in lines])


#: The figures of a benchmark row that :func:`median_rows` takes the median of.
ROUND_FIGURES = ("median_ms", "mean_ms", "memory_ms", "message_ms", "issue_ms", "model_ms")


def median_rows(rounds):
    """The rows of several rounds of the same runs as one set: per
    configuration, count and phase the first round's row with each of
    :data:`ROUND_FIGURES` the median over the rounds that have it (None
    where none has)."""
    import numpy as np

    groups = {}
    for rows in rounds:
        for r in rows:
            groups.setdefault((_key(r), r["ranks"], r["phase"]), []).append(r)
    out = []
    for same in groups.values():
        row = dict(same[0])
        for name in ROUND_FIGURES:
            values = [r[name] for r in same if r.get(name) is not None]
            row[name] = float(np.median(values)) if values else None
        out.append(row)
    return out


def round_ratios(rounds):
    """Per configuration and count above one: ``(key, ranks, [(one-rank
    step ms, N-rank step ms), ...])`` over the rounds that ran both."""
    steps = {}
    for k, rows in enumerate(rounds):
        for r in rows:
            if r["phase"] == "step":
                steps.setdefault((_key(r), r["ranks"]), {})[k] = r["median_ms"]
    out = []
    for (key, ranks), by_round in steps.items():
        one = steps.get((key, 1), {})
        pairs = [(one[k], ms) for k, ms in sorted(by_round.items()) if k in one]
        if ranks > 1 and pairs:
            out.append((key, ranks, pairs))
    return out


def format_round_ratios(ratios):
    """Lines of :func:`round_ratios`: each round's step on N ranks over its
    one-rank step, and their median."""
    import numpy as np

    lines = []
    for key, ranks, pairs in ratios:
        size = " x ".join(str(v) for v in key[1:] if v is not None)
        each = [n_ms / one_ms for one_ms, n_ms in pairs]
        lines.append(f"# {key[0]} {size}: the step on {ranks} ranks over one rank's, round by "
                     f"round: {', '.join(f'{q:.2f}' for q in each)} (median {np.median(each):.2f}"
                     f"; one rank {', '.join(f'{a:.2f}' for a, _ in pairs)} ms, {ranks} ranks "
                     f"{', '.join(f'{b:.2f}' for _, b in pairs)} ms)")
    return "\n".join(lines)


def _worker_command(mpiexec, ranks, flow_args, backend, rows_path):
    return ([mpiexec, "-n", str(ranks), sys.executable, "-m", "bubbleflow", "bench", "--flow",
             "--backend", backend, "--rows", str(rows_path), "--no-progress"] + list(flow_args))


def run_flow_scaling(counts, flow_args, backend="numpy", csv=None, out=print, err=None,
                     mpiexec=None, rounds=1):
    """The flow benchmark on each of ``counts`` ranks (1 added: the
    baseline), ``rounds`` times (the module docstring), ``flow_args`` the
    ``--cases``/``--sizes``/``--steps``/``--skip``/``--set`` options as
    given; prints the table (and with rounds each round's ratios), writes
    it to ``csv`` (after each count, atomically); returns ``(table, failed
    counts)``."""
    from .ranks_scaling import run_counts

    def command(ranks, path, launcher):
        return _worker_command(launcher, ranks, flow_args, backend, path)

    done, failed = [], []
    for _ in range(rounds):
        rows, bad = run_counts(
            counts, command, FLOW_SCALING_COLUMNS,
            lambda got: flow_scaling_rows(median_rows(done + [got])), csv, err, mpiexec,
            "bench --flow --scaling")
        done.append(rows)
        failed += [n for n in bad if n not in failed]
    table = flow_scaling_rows(median_rows(done))
    out(format_flow_scaling(table))
    if rounds > 1:
        out(format_round_ratios(round_ratios(done)))
    return table, failed
