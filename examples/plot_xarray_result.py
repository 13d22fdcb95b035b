"""
A pressure result as an xarray Dataset
======================================

:func:`bubbleflow.open_result` opens a result file (``OUTDIR/<name>.h5``)
as an ``xarray.Dataset``: the fields on the grid's cell centres, the
solver's record, units and long names as attributes.  Here the bubbly
column (``cases/bubbly_column.yaml``, multigrid-preconditioned CG) is run
on a 64 x 64 grid into a temporary folder, as::

    bubbleflow run cases/bubbly_column.yaml -o OUTDIR --backend numpy \\
        --set grid.nx=64 --set grid.ny=64
"""

# %%
# Run the case
# ------------
import pathlib
import tempfile

import matplotlib.pyplot as plt

from bubbleflow import get_backend, open_result
from bubbleflow.apps.run import run_case
from bubbleflow.case.config import load_case

try:                            # run as a script: the repository's examples/
    EXAMPLES = pathlib.Path(__file__).resolve().parent
except NameError:               # run by sphinx-gallery: in examples/, without __file__
    EXAMPLES = pathlib.Path.cwd()
CASE = EXAMPLES.parent / "cases" / "bubbly_column.yaml"

case = load_case(CASE, ["grid.nx=64", "grid.ny=64", "backend=numpy"])
workdir = tempfile.TemporaryDirectory(prefix="bubbleflow-example-")
status = run_case(case, get_backend(case.backend), outdir=workdir.name, progress=False)
assert status == 0, "the solve failed"

# %%
# Open it
# -------
# The fields ``phi`` (level set), ``rho`` (density) and ``p`` (pressure) are
# on ``(y, x)``; the solve's record is on ``solve``, its residual history on
# ``iteration``; the resolved case and the run's provenance are attributes.
ds = open_result(pathlib.Path(workdir.name) / f"{case.name}.h5")
workdir.cleanup()                       # the dataset is in memory
print(ds)

# %%
# Select by position
# ------------------
# ``sel`` picks by coordinate: the pressure along the column's vertical
# centre line, which crosses the middle column of bubbles, and along a line
# between two columns of bubbles, which crosses only liquid up to the free
# surface at 0.85 m.
centre = ds.p.sel(x=0.5, method="nearest")
between = ds.p.sel(x=0.375, method="nearest")
print(f"x = {float(centre.x):.4f} m and x = {float(between.x):.4f} m, "
      f"{ds.sizes['y']} cells each")

# %%
# Plot with labelled axes
# -----------------------
# xarray labels the axes from the coordinates' ``long_name`` and ``units``.
fig, axes = plt.subplots(1, 3, figsize=(13, 4))
ds.p.plot(ax=axes[0], cmap="viridis")
ds.phi.plot.contour(ax=axes[0], levels=[0.0], colors="white")
axes[0].set_aspect("equal")
centre.plot(ax=axes[1], y="y", label=f"x = {float(centre.x):.3f} m")
between.plot(ax=axes[1], y="y", linestyle="--", label=f"x = {float(between.x):.3f} m")
axes[1].legend()
axes[1].set_title("vertical profiles")
ds.residual_history.plot(ax=axes[2], yscale="log")
axes[2].axhline(float(ds.attrs["solver_rtol"]), color="gray", linestyle=":")
axes[2].set_title(f"{ds.attrs['solver_method']} + {ds.attrs['solver_preconditioner']}")
fig.tight_layout()
plt.show()
