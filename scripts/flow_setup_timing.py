"""Per-step pressure set-up and solve time of a short Hysing run (h = 1/N).
    python3 scripts/flow_setup_timing.py PKGROOT BACKEND N END_TIME LABEL"""
import os, subprocess, sys, tempfile, time
import h5py, numpy as np
root, backend, n, end, label = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4], sys.argv[5]
root = os.path.abspath(root)
mod = "bubbleflow.cli" if os.path.exists(os.path.join(root, "bubbleflow", "cli.py")) else "bubbleflow"
with tempfile.TemporaryDirectory() as d:
    cmd = [sys.executable, "-m", mod, "run", os.path.join(root, "cases", "two_phase.yaml"), "-o", d,
           "--backend", backend, "--set", f"grid.nx={n}", "--set", f"grid.ny={2*n}",
           "--set", f"time.end={end}", "--set", f"output.interval={end}", "--quiet", "--no-progress"]
    t = time.perf_counter()
    p = subprocess.run(cmd, env=dict(os.environ, PYTHONPATH=root), capture_output=True, text=True, cwd=root)
    wall = time.perf_counter() - t
    if p.returncode:
        print(p.stdout[-2000:], p.stderr[-2000:])
    with h5py.File(os.path.join(d, "two_phase.h5"), "r") as f:
        s = f["solver"]
        setup, solve, its = s["setup_seconds"][()], s["solve_seconds"][()], s["iterations"][()]
# the first step includes compilation and first-use costs: shown apart
print(f"{label:10s} steps {len(setup):4d}  setup/step median {1e3*np.median(setup[1:]):8.2f} ms  "
      f"(first {1e3*setup[0]:8.1f} ms)  solve/step median {1e3*np.median(solve[1:]):8.2f} ms  "
      f"iterations total {int(its.sum())}  wall {wall:6.1f} s")
