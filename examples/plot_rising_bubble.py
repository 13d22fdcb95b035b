"""
The rising bubble of Hysing et al. (2009), run as ``bubbleflow run`` does
=========================================================================

``cases/two_phase.yaml`` is test case 1 of the rising-bubble benchmark of
Hysing et al. (2009): a bubble of radius 0.25 in a 1 x 2 box, liquid 1000 /
10 and gas 100 / 1 (density / viscosity), gravity 0.98, surface tension
24.5.  Here it is loaded with :func:`bubbleflow.case.config.load_case` and
the overrides that ``bubbleflow run --set`` would pass (a coarse 20 x 40
grid, the first 0.2 s, NumPy), and run by :func:`bubbleflow.apps.run.run_case`,
the function behind ``bubbleflow run``, into a temporary folder.  The
command line equivalent::

    bubbleflow run cases/two_phase.yaml -o OUTDIR --backend numpy \\
        --set grid.nx=20 --set grid.ny=40 --set time.end=0.2
"""

# %%
# Load and run the case
# ---------------------
import pathlib
import tempfile

import matplotlib.pyplot as plt
import numpy as np

from bubbleflow import get_backend, open_result
from bubbleflow.apps.run import run_case
from bubbleflow.apps.validation import load_reference
from bubbleflow.case.config import load_case

try:                            # run as a script: the repository's examples/
    EXAMPLES = pathlib.Path(__file__).resolve().parent
except NameError:               # run by sphinx-gallery: in examples/, without __file__
    EXAMPLES = pathlib.Path.cwd()
CASE = EXAMPLES.parent / "cases" / "two_phase.yaml"

case = load_case(CASE, ["grid.nx=20", "grid.ny=40", "time.end=0.2", "backend=numpy"])
workdir = tempfile.TemporaryDirectory(prefix="bubbleflow-example-")
outdir = workdir.name
status = run_case(case, get_backend(case.backend), outdir=outdir, progress=False)
assert status == 0, "the run failed"

# %%
# Read the result
# ---------------
# ``OUTDIR/<name>.h5`` is the run's index: the diagnostics of every step, the
# solver's record of every pressure solve, the tracked bubbles and the
# snapshots.  :func:`bubbleflow.open_result` opens it as an
# ``xarray.Dataset`` (the ``xarray`` extra).
ds = open_result(pathlib.Path(outdir) / f"{case.name}.h5")
print(ds.rise_velocity)
print(f"pressure solves: {ds.sizes['solve']}, Krylov iterations per solve: "
      f"{int(ds.solver_iterations.min())} to {int(ds.solver_iterations.max())}")

# %%
# Rise velocity against the benchmark's reference
# -----------------------------------------------
# The reference curve is the TP2D group's (h = 1/320), shipped with bubbleflow
# (:func:`bubbleflow.apps.validation.load_reference`).  Even at h = 1/20 the
# early acceleration stays close to it.
ref = load_reference("tp2d", case=1)
t_end = float(ds.step_time[-1])
early = ref["time"] <= t_end
ours = float(ds.rise_velocity[-1])
theirs = float(np.interp(t_end, ref["time"], ref["rise_velocity"]))
print(f"rise velocity at t = {t_end:g} s: {ours:.4f} m/s, TP2D {theirs:.4f} m/s "
      f"({100 * (ours / theirs - 1):+.1f} %)")

fig, (ax0, ax1) = plt.subplots(1, 2, figsize=(10, 4.2), gridspec_kw={"width_ratios": (1.6, 1)})
ax0.plot(ref["time"][early], ref["rise_velocity"][early], "k--", label="TP2D (h = 1/320)")
ax0.plot(ds.step_time, ds.rise_velocity, "o-", label=f"bubbleflow (h = 1/{case.grid.nx})")
ax0.set(xlabel="time (s)", ylabel=f"rise velocity ({ds.rise_velocity.units})",
        title="rise velocity")
ax0.legend()

# %%
# The last snapshot: the dynamic pressure and the interface (level set zero).
last = ds.isel(time=-1)
mesh = ax1.pcolormesh(ds.x, ds.y, last.p_dynamic, cmap="coolwarm", shading="auto")
ax1.contour(ds.x, ds.y, last.phi, levels=[0.0], colors="k")
fig.colorbar(mesh, ax=ax1, label=f"dynamic pressure ({ds.p_dynamic.units})")
ax1.set(xlabel="x (m)", ylabel="y (m)", aspect="equal",
        title=f"t = {float(last.time):.2f} s")
fig.tight_layout()
plt.show()

# %%
# The result was only needed in memory (``open_result`` reads it whole and
# closes the file): the temporary folder goes.
workdir.cleanup()
