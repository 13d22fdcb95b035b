"""A pressure case built from its case file on the run's backend."""
import os

import numpy as np

from bubbleflow.case.config import load_case
from bubbleflow.case.problem import build_pressure_problem
from bubbleflow.compute.backend import get_backend
from helpers.cli import ROOT


def test_a_pressure_case_is_built_on_its_backend(backend):
    """Level set, phases and operator where the solve runs; the same to
    rounding as the host's build."""
    case = load_case(os.path.join(ROOT, "cases", "bubbly_column.yaml"),
                     [("grid.nx", 48), ("grid.ny", 40)])
    here = build_pressure_problem(case, backend)
    host = build_pressure_problem(case, get_backend("numpy"))
    assert type(here.phi) is type(backend.xp.zeros(1)) and here.A.backend.name == backend.name
    for a, b in ((here.phi, host.phi), (here.phases.rho, host.phases.rho),
                 *zip(here.phases.faces, host.phases.faces)):
        np.testing.assert_allclose(backend.to_host(a), b, rtol=1e-15, atol=1e-15)
    x = np.random.default_rng(0).standard_normal(48 * 40)
    np.testing.assert_allclose(backend.to_host(here.A @ backend.xp.asarray(x)), host.A @ x,
                               rtol=1e-12, atol=1e-9)
