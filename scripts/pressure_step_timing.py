"""The flow's pressure set-up and solve per time step, two package copies side by side.

    python3 scripts/pressure_step_timing.py BASE_ROOT NEW_ROOT [--rounds 2] [--cases hysing:160,column:1024]

Each ROOT is a folder holding a ``bubbleflow`` package and its ``cases``
(e.g. ``git archive HEAD bubbleflow cases | tar -x -C ROOT``); every
measurement runs in a process of its own with ROOT first on ``sys.path``
(as ``scripts/fingerprint.py`` does), the two roots alternately, ``--rounds``
times.  A run steps a flow case with :class:`FlowSolver` and its phase clock
on (a device synchronisation after every phase), skips the first steps
(compilation, first use) and reports the ``pressure set-up`` phase (the
operator, ``PressureSolver.update``) and the ``pressure solve`` phase
(``solve_pressure``: the increment's right-hand side and the solve), ms per
step, with the pressure iterations.

Cases: ``hysing`` (cases/two_phase.yaml) and ``column``
(cases/bubbly_column_flow.yaml) at ``nx`` cells across (ny = 2 nx).
"""
import json
import os
import subprocess
import sys
import time

CASES = {"hysing": ("cases/two_phase.yaml", 10, 40), "column": ("cases/bubbly_column_flow.yaml", 5, 20)}


def worker(root, case, nx):
    """One measurement in this process: a JSON line on stdout."""
    sys.path.insert(0, root)
    import numpy as np

    from bubbleflow.case.config import load_case
    from bubbleflow.compute.backend import get_backend
    from bubbleflow.flow.navier_stokes import FlowSolver

    path, skip, steps = CASES[case]
    cfg = load_case(os.path.join(root, path), [f"grid.nx={nx}", f"grid.ny={2 * nx}"])
    backend = get_backend("cupy")
    flow = FlowSolver(cfg, backend)
    flow.clock.enabled = True
    state = flow.initial_state()
    rows = []
    t0 = time.perf_counter()
    for k in range(skip + steps):
        if state.time >= cfg.time.end:
            break
        with np.errstate(all="ignore"):
            state, report = flow.step(state)
        if k >= skip:
            rows.append((report.phases["pressure set-up"], report.phases["pressure solve"],
                         int(report.record.iterations)))
    setup = np.array([r[0] for r in rows]) * 1e3
    solve = np.array([r[1] for r in rows]) * 1e3
    its = np.array([r[2] for r in rows])
    print(json.dumps(dict(steps=len(rows), setup_median=float(np.median(setup)),
                          setup_mean=float(setup.mean()), solve_median=float(np.median(solve)),
                          solve_mean=float(solve.mean()), its=float(its.mean()),
                          ms_per_it=float(solve.sum() / max(its.sum(), 1)),
                          its_total=int(its.sum()), wall=time.perf_counter() - t0)))


def measure(root, case, nx):
    env = dict(os.environ, PYTHONPATH=root)
    p = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", root, case,
                        str(nx)], env=env, capture_output=True, text=True, cwd=root)
    lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
    if p.returncode or not lines:
        raise RuntimeError(f"{case} {nx} in {root} failed:\n{p.stdout[-2000:]}\n{p.stderr[-2000:]}")
    return json.loads(lines[-1])


def main(argv):
    if argv and argv[0] == "--worker":
        worker(argv[1], argv[2], int(argv[3]))
        return 0
    args = [a for a in argv if not a.startswith("--")]
    opts = dict(a.lstrip("-").split("=", 1) for a in argv if a.startswith("--") and "=" in a)
    if len(args) != 2:
        print(__doc__)
        return 2
    roots = {"before": os.path.abspath(args[0]), "after": os.path.abspath(args[1])}
    rounds = int(opts.get("rounds", 2))
    cases = [(c.split(":")[0], int(c.split(":")[1]))
             for c in opts.get("cases", "hysing:160,column:1024").split(",")]
    results = {}
    for case, nx in cases:
        for r in range(rounds):
            for label, root in roots.items():
                res = measure(root, case, nx)
                results.setdefault((case, nx, label), []).append(res)
                print(f"# {case} nx={nx} {label} round {r + 1}: setup {res['setup_median']:.3f} ms, "
                      f"solve {res['solve_median']:.3f} ms, {res['its']:.1f} its "
                      f"({res['steps']} steps, {res['wall']:.1f} s)", flush=True)
    print()
    print("| case | nx x ny | code | steps | set-up ms/step (median, mean) | solve ms/step (median, mean) "
          "| iterations/step | ms/iteration |")
    print("|---|---|---|---|---|---|---|---|")
    for case, nx in cases:
        for label in roots:
            runs = results[(case, nx, label)]
            setup = ", ".join("%.2f / %.2f" % (r["setup_median"], r["setup_mean"]) for r in runs)
            solve = ", ".join("%.2f / %.2f" % (r["solve_median"], r["solve_mean"]) for r in runs)
            per_it = ", ".join("%.4f" % r["ms_per_it"] for r in runs)
            print(f"| {case} | {nx} x {2 * nx} | {label} | {runs[0]['steps']} | {setup} | "
                  f"{solve} | {runs[0]['its']:.1f} | {per_it} |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
