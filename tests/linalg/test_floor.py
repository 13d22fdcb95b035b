"""At the float64 floor the solve stops promptly and says so.

The bubbly column at contrast 1e6 with the gravity right-hand side cannot
reach a relative residual of 1e-12 in float64: the true residual stalls
near 1e-7 at 128^2-256^2 while the recursive one goes on falling and then
diverges.  A tolerance just above the floor gives the iterations needed to
reach it; below it the solve must stop within a few more, with reason
``stagnation``, SciPy's ``info`` > 0 and a summary that names the
attainable accuracy.
"""
import numpy as np
import pytest

from bubbleflow import bubbly_column, cg, make_preconditioner
from bubbleflow.linalg.solver import PressureSolver


@pytest.fixture(scope="module")
def column():
    return bubbly_column(192, 1e6)


@pytest.mark.parametrize("method", ["pcg", "dpcg"])
def test_stops_near_the_floor_and_says_so(column, method):
    A, b, phi = column
    opts = {} if method == "pcg" else dict(method="dpcg", preconditioner="incomplete_poisson_scaled",
                                          deflation="levelset_subdomains")
    x, rec = PressureSolver(A, phi=phi, rtol=1e-12, **opts).solve(b)
    assert rec.reason == "stagnation" and not rec.converged
    floor = rec.residual
    assert 1e-9 < floor < 1e-5
    # The iterations that reaching (about) that accuracy takes: a tolerance
    # just above it is met, or stops within a factor 2 of it.
    _, reach = PressureSolver(A, phi=phi, rtol=1.5 * floor, **opts).solve(b)
    assert reach.residual <= 2.0 * floor
    assert rec.iterations <= 1.5 * reach.iterations + 4, (rec.iterations, reach.iterations)
    assert np.isfinite(x).all()


def test_scipy_info_and_summary_at_the_floor(column):
    A, b, _ = column
    x, info = cg(A, b, rtol=1e-12, M=make_preconditioner("multigrid", A))
    assert info > 0 and info == info.iterations and info.reason == "stagnation"
    assert "attainable accuracy" in info.summary()
    assert f"{info.residual:.1e}" in info.summary()
