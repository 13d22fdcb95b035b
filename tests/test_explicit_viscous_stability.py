"""The explicit viscous step's stability harness
(scripts/explicit_viscous_stability.py) on small grids: a fluid alone
meets the solenoidal bound ``1 - 0.2 * 8`` at the 2-D viscous limit and is
unstable at twice it; with a negligible step the map is the projection,
which keeps what it has projected."""
import importlib.util
import os

import numpy as np

from bubbleflow.case.config import load_case

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location(
    "explicit_viscous_stability", os.path.join(ROOT, "scripts", "explicit_viscous_stability.py"))
evs = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(evs)

CASE = os.path.join(ROOT, "cases", "two_phase.yaml")
SMALL = ["grid.nx=8", "grid.ny=16"]


def test_one_fluid_at_and_beyond_the_limit():
    step = evs.ProjectedViscousStep(load_case(CASE, SMALL + ["geometry.bubbles=[]"]))
    low = evs.most_negative(step)[0]
    assert -0.6 <= low < -0.3             # the discrete Stokes modes lie within 8 nu / h^2
    step.dt = 2.0 * step.limit
    assert evs.most_negative(step)[0] < -1.0


def test_no_step_keeps_a_divergence_free_field():
    step = evs.ProjectedViscousStep(load_case(CASE, SMALL))
    step.dt = 1e-9 * step.limit           # the stress's part ~1e-9: the projection alone
    rng = np.random.default_rng(3)
    once = step.matvec(rng.standard_normal(step.n))      # projected: divergence-free
    np.testing.assert_allclose(step.matvec(once), once, rtol=0, atol=1e-7 * np.abs(once).max())
