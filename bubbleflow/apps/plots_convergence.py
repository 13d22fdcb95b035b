"""The convergence figure of a run (``<stem>_convergence.png``): the
relative residual of its pressure solves against the iteration, on a log
scale.

Each solve drawn shows its recursive residual (the solver's update, a
line), its true-residual checks ``||b - A x_k|| / ||b||`` (hollow circles)
and its final true residual (a star), with ``rtol`` dashed, so that a
recursive residual below ``rtol`` cannot pass for convergence.  A pressure
run has one solve.  Of a flow run's solves the first, the last, the one
with the most iterations and the worst unconverged one are drawn in colour,
up to 60 others in grey.  A run whose every solve ended at iteration 0 has
no residual for a log axis: its panel says so
(:func:`.plots_figure.no_data_note`).
"""
from __future__ import annotations

import numpy as np

from .plots_figure import no_data_note, run_figure, solver_text

__all__ = ["convergence_figure"]


def _semilogy_safe(ax, it, res, **kw):
    res = np.asarray(res, dtype=np.float64)
    keep = np.isfinite(res) & (res > 0)
    return ax.semilogy(np.asarray(it)[keep], res[keep], **kw)


def convergence_figure(run):
    """Recursive residual histories (lines), true-residual checks (hollow
    circles) and the final true residual (stars) of the pressure solves."""
    fig, body = run_figure(run, 7.8, 5.4)
    ax = body.subplots()
    extra = []              # legend proxies for the marker kinds
    if run["mode"] == "pressure":
        title = _pressure_convergence(ax, run, extra)
    else:
        title = _flow_convergence(ax, run, extra)
    if not any(np.any(np.isfinite(h) & (h > 0)) for _, h in run["histories"]):
        # Solved at once (b = 0): residual 0 has no place on a log axis.
        no_data_note(ax, "no residual above 0: every solve was done at iteration 0")
        ax.set_yscale("log")
        ax.set_ylim(min(run["rtol"] or 1e-8, 1e-8) / 10, 10.0)
        ax.set_xlim(-0.5, 0.5)
    if run["rtol"] is not None and run["rtol"] > 0:
        ax.axhline(run["rtol"], color="k", ls="--", lw=1.0, label=f"rtol = {run['rtol']:.0e}")
    ax.set_xlabel("iteration (-)")
    ax.set_ylabel("relative residual $\\|r_k\\| / \\|b\\|$ (-)")
    ax.set_title(title, fontsize=10)
    ax.grid(True, which="major", alpha=0.4)
    ax.grid(True, which="minor", alpha=0.12)
    handles, labels = ax.get_legend_handles_labels()
    for h, lab in extra:
        handles.append(h)
        labels.append(lab)
    ax.legend(handles, labels, fontsize=8, loc="best")
    return fig


def _checks_and_final(ax, final, i, it_checks, res_checks, last_it, colour):
    """Solve ``i``'s true-residual checks (hollow circles) and final true residual (a star)."""
    if it_checks is not None and len(it_checks):
        # Above the star: a check at the last iteration stays visible.
        _semilogy_safe(ax, it_checks, res_checks, ls="none", marker="o", ms=6.5, mfc="white",
                       mec=colour, mew=1.4, zorder=6)
    if final is not None and i < len(final) and np.isfinite(final[i]) and final[i] > 0:
        ax.semilogy([last_it], [final[i]], ls="none", marker="*", ms=15, color=colour,
                    mec="k", mew=0.6, zorder=5)


def _pressure_convergence(ax, run, extra):
    """The one solve of a pressure run; returns the title."""
    from matplotlib.lines import Line2D

    solves = run["solves"] or {}
    its, final, conv = solves.get("iterations"), solves.get("residual"), solves.get("converged")
    _, hist = run["histories"][0]
    _semilogy_safe(ax, np.arange(hist.size), hist, color="C0", lw=1.5,
                   label="recursive residual (the solver's update)")
    checks = solves.get("checks")
    last_it = int(its[0]) if its is not None and len(its) else hist.size - 1
    if checks is not None and len(checks):
        _checks_and_final(ax, final, 0, checks[:, 0], checks[:, 1], last_it, "C3")
        extra.append((Line2D([], [], ls="none", marker="o", ms=6.5, mfc="white", mec="C3",
                             mew=1.4), "true residual checks $\\|b - A x_k\\| / \\|b\\|$"))
    else:
        _checks_and_final(ax, final, 0, None, None, last_it, "C3")
    if final is not None and len(final):
        extra.append((Line2D([], [], ls="none", marker="*", ms=15, color="C3", mec="k",
                             mew=0.6), f"final true residual {float(final[0]):.2e}"))
    status = ""
    if its is not None and len(its):
        ok = conv is None or not len(conv) or bool(conv[0])
        status = f"{int(its[0])} iterations, " + ("converged" if ok else "NOT CONVERGED")
        reason = (solves.get("reason") or [None])[0]
        if reason and reason != "converged":
            status += f" ({reason})"
        finite = hist[np.isfinite(hist)]
        if finite.size:
            status += f"; at the end: recursive {float(finite[-1]):.2e}"
            if final is not None and len(final):
                status += f", true {float(final[0]):.2e}"
    title = f"{run['name']}: convergence of the pressure solve\n{solver_text(run)}"
    return title + (f"\n{status}" if status else "")


def _picked_solves(hists, solves):
    """``{index in hists: [why]}``: the first, last and longest solve, and the worst unconverged."""
    its, final, conv = solves.get("iterations"), solves.get("residual"), solves.get("converged")
    chosen = [0, len(hists) - 1, int(np.argmax([h.size for _, h in hists]))]
    names = ["first", "last", "most iterations"]
    # The unconverged solve with the largest final true residual.
    if conv is not None and its is not None and len(conv) == len(its) and not np.all(conv):
        solve_ids = [i for i, _ in hists]
        bad = [k for k, i in enumerate(solve_ids) if i < len(conv) and not conv[i]]
        if bad:
            if final is not None and len(final) == len(conv):
                worst = max(bad, key=lambda k: (np.nan_to_num(final[solve_ids[k]], nan=np.inf)))
            else:
                worst = bad[0]
            chosen.append(worst)
            names.append("NOT CONVERGED")
    picked = {}
    for idx, nm in zip(chosen, names):
        picked.setdefault(idx, []).append(nm)
    return picked


def _flow_convergence(ax, run, extra):
    """The picked solves of a flow run in colour, up to 60 others in grey; returns the title."""
    from matplotlib.lines import Line2D

    solves = run["solves"] or {}
    its, final = solves.get("iterations"), solves.get("residual")
    hists = run["histories"]
    steps = solves.get("step")
    step_checks = solves.get("step_checks")

    def step_of(i):
        return int(steps[i]) if steps is not None and i < len(steps) else i + 1

    picked = _picked_solves(hists, solves)
    others = [k for k in range(len(hists)) if k not in picked]
    if len(others) > 60:
        others = [others[int(k)] for k in np.linspace(0, len(others) - 1, 60)]
    for n, k in enumerate(others):
        _, h = hists[k]
        _semilogy_safe(ax, np.arange(h.size), h, color="0.75", lw=0.7,
                       label="other steps" if n == 0 else None, zorder=1)
    any_checks = False
    for c, (k, nms) in enumerate(sorted(picked.items())):
        i, h = hists[k]
        colour = "C3" if "NOT CONVERGED" in nms else f"C{[0, 1, 2, 4][c % 4]}"
        _semilogy_safe(ax, np.arange(h.size), h, color=colour, lw=1.8, zorder=3,
                       label=f"step {step_of(i)} ({h.size - 1} iterations): {', '.join(nms)}")
        it_c = res_c = None
        if step_checks is not None and len(step_checks):
            m = step_checks[:, 0] == step_of(i)
            it_c, res_c = step_checks[m, 1], step_checks[m, 2]
            any_checks = any_checks or bool(m.any())
        last_it = int(its[i]) if its is not None and i < len(its) else h.size - 1
        _checks_and_final(ax, final, i, it_c, res_c, last_it, colour)
    extra.insert(0, (Line2D([], [], color="0.3", lw=1.8),
                     "lines: recursive residual (the solver's update)"))
    if any_checks:
        extra.append((Line2D([], [], ls="none", marker="o", ms=6.5, mfc="white", mec="0.3",
                             mew=1.4), "circles: true residual checks $\\|b - A x_k\\| / \\|b\\|$"))
    if final is not None and len(final):
        extra.append((Line2D([], [], ls="none", marker="*", ms=15, color="0.5", mec="k",
                             mew=0.6), "stars: final true residual"))
    return (f"{run['name']}: convergence of the pressure solves ({len(hists)} steps)\n"
            f"{solver_text(run)}")
