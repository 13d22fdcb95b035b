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


def test_a_slab_of_planes_is_the_whole_problems_bit_for_bit():
    """A rank's widened slab built alone (2-D with both storages and the
    level-set face density, 3-D): its level set, densities, hydrostatic
    part and operator couplings are those of the whole problem's planes,
    and so is its right-hand side but on the two outer planes (a
    neighbour's ghost planes: reduced gravity's flux through their outer
    face needs the plane beyond)."""
    numpy = get_backend("numpy")
    for name, sets in (("bubbly_column.yaml", [("grid.nx", 48), ("grid.ny", 40)]),
                       ("bubbly_column.yaml", [("grid.nx", 48), ("grid.ny", 40),
                                               ("operator.face_density", "levelset"),
                                               ("operator.storage", "matrix_free")]),
                       ("bubbly_column_3d.yaml", [("grid.nx", 12), ("grid.ny", 12),
                                                  ("grid.nz", 30)])):
        case = load_case(os.path.join(ROOT, "cases", name), sets)
        whole = build_pressure_problem(case, numpy)
        lo, hi = 7, 23
        part = build_pressure_problem(case, numpy, planes=(lo, hi))
        assert part.planes == (lo, hi) and part.grid.shape == whole.grid.shape
        assert np.array_equal(part.phi, whole.phi[lo:hi])
        assert np.array_equal(part.phases.rho, whole.phases.rho[lo:hi])
        assert np.array_equal(part.rhs[1:-1], whole.rhs[lo + 1:hi - 1])
        assert np.array_equal(part.hydrostatic, whole.hydrostatic[lo:hi])
        nd = whole.grid.ndim
        for a, (p, w) in enumerate(zip(part.A.couplings(), whole.A.couplings())):
            assert np.array_equal(p, w[lo:hi - 1 if a == nd - 1 else hi]), (name, a)
