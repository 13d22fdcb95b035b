"""The viscosity across the interface's width (momentum.viscosity_mean):
linear in the smoothed Heaviside, or its inverse linear in it."""
import os

import numpy as np
import pytest

from bubbleflow.case.config import load_case
from bubbleflow.flow import momentum
from bubbleflow.flow.navier_stokes import FlowSolver
from helpers.cli import ROOT

MU_L, MU_G = 10.0, 0.1


@pytest.mark.parametrize("mean", ["arithmetic", "harmonic"])
def test_the_cell_viscosity_follows_its_mean(backend, mean):
    xp = backend.xp
    phi = xp.asarray(np.linspace(-0.1, 0.1, 48).reshape(6, 8))
    H, rho, mu, _ = momentum.fluid_properties(phi, 0.05, 1000.0, 1.0, MU_L, MU_G, "levelset",
                                               mean)
    H, mu = backend.to_host(H), backend.to_host(mu)
    want = (MU_G + (MU_L - MU_G) * H if mean == "arithmetic"
            else 1.0 / ((1.0 - H) / MU_G + H / MU_L))
    np.testing.assert_allclose(mu, want, rtol=1e-15)
    assert mu[H == 0.0].tolist() == [MU_G] * int((H == 0.0).sum())
    np.testing.assert_allclose(mu[H == 1.0], MU_L, rtol=1e-15)
    if mean == "harmonic":                 # below the linear mean inside the band
        inside = (H > 0.0) & (H < 1.0)
        assert (mu[inside] < MU_G + (MU_L - MU_G) * H[inside]).all()


def test_a_flow_takes_the_cases_viscosity_mean(backend):
    out = {}
    for mean in ("arithmetic", "harmonic"):
        case = load_case(os.path.join(ROOT, "cases", "hysing_case2.yaml"), [
            ("grid.nx", 16), ("grid.ny", 32),
            ("momentum.viscosity_mean", mean)])
        solver = FlowSolver(case, backend)
        state = solver.initial_state()
        _, _, mu, _ = solver.properties(state.phi)
        for _ in range(2):
            state, _ = solver.step(state)
        out[mean] = (backend.to_host(mu), backend.to_host(state.velocity[1]))
    assert out["harmonic"][0].sum() < out["arithmetic"][0].sum()
    assert not np.array_equal(out["harmonic"][1], out["arithmetic"][1])
