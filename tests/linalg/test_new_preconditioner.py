"""Adding a preconditioner is one class plus one registry entry: a damped
Jacobi defined here, registered for the test, runs through every layer that
reads the registry (the factory, the solver object, the SciPy-style
function, the bytes model, and on CuPy the fused engine's generic branch)."""
import numpy as np
import pytest

from bubbleflow import PressureSolver, bubbly_column, cg
from bubbleflow.linalg import registry
from bubbleflow.linalg.precond import make_preconditioner
from bubbleflow.linalg.precond.base import Preconditioner


class DampedJacobi(Preconditioner):
    """``M^-1 = omega D^-1`` (scales the Jacobi step: CG's iterates stay the
    same in exact arithmetic, which makes a sharp test)."""

    name = "damped_jacobi"

    def __init__(self, A, omega=0.5):
        self.inv_diagonal = omega / A.diagonal()

    def apply(self, r):
        return self.inv_diagonal * r


@pytest.fixture
def registered(monkeypatch):
    entry = registry.PreconditionerEntry("damped_jacobi", f"{__name__}:DampedJacobi",
                                         options=("omega",), arrays=3, doc="omega D^-1")
    monkeypatch.setitem(registry.PRECONDITIONERS, "damped_jacobi", entry)
    return entry


def test_a_registered_preconditioner_runs_everywhere(registered, backend):
    A, b, phi = bubbly_column(32, 1e3, backend=backend.name)
    M = make_preconditioner("damped_jacobi", A, omega=0.25)
    assert isinstance(M, DampedJacobi)
    with pytest.raises(ValueError, match="takes no option"):
        make_preconditioner("damped_jacobi", A, block_lines=2)
    S = PressureSolver(A, method="dpcg", preconditioner="damped_jacobi", phi=phi,
                       subdomains=(4, 4), rtol=1e-9)
    x, rec = S.solve(b)
    ref, rec_ref = PressureSolver(A, method="dpcg", preconditioner="jacobi", phi=phi,
                                  subdomains=(4, 4), rtol=1e-9).solve(b)
    assert rec.converged and rec.preconditioner == "damped_jacobi"
    assert abs(rec.iterations - rec_ref.iterations) <= 2
    xh, rh = backend.to_host(x), backend.to_host(ref)
    assert np.linalg.norm(xh - rh) <= 1e-6 * np.linalg.norm(rh)
    S4 = PressureSolver(A, method="pcg", preconditioner="damped_jacobi", deflation="none",
                        preconditioner_options={"omega": 0.25})
    d = backend.to_host(A.diagonal())
    assert np.allclose(backend.to_host(S4.M.inv_diagonal), 0.25 / d)
    x2, rec2 = cg(A, b, M="damped_jacobi", rtol=1e-8)
    assert rec2.converged and rec2.preconditioner == "damped_jacobi"
    if backend.name == "cupy":
        assert rec.engine == "fused"             # through the generic branch
    assert registry.model_bytes_per_iteration(100, "damped_jacobi", "none") == \
        registry.model_bytes_per_iteration(100, "jacobi", "none")
