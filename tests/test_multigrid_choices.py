"""The multigrid study harness (scripts/multigrid_choices.py) on small grids:
its product variant matches the product's solver, every variant converges
with a symmetric V-cycle, and the bilinear prolongation keeps constants."""
import importlib.util
import os

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
_spec = importlib.util.spec_from_file_location(
    "multigrid_choices", os.path.join(ROOT, "scripts", "multigrid_choices.py"))
mc = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(mc)

CONTRAST = 1e3


@pytest.fixture(scope="module", params=[32, 50])       # 50: odd coarse sizes (25 -> 13)
def system(request):
    n = request.param
    return (n,) + mc.problem(n, CONTRAST)


def test_product_variant_matches_product_solver(system):
    n, A, As, b = system
    product, _ = mc.product_iterations(A, b)
    harness = mc.run_variant(As, b, n, mc.PRODUCT, 1e-8, 200)["its"]
    assert abs(product - harness) <= 1, (product, harness)


def test_variants_converge_with_symmetric_cycle(system):
    n, _, As, b = system
    rng = np.random.default_rng(3)
    u, v = rng.standard_normal((2, n * n))
    u, v = u - u.mean(), v - v.mean()
    for variant in mc.VARIANTS:
        M = mc.VCycle(As, (n, n), variant)
        Mu, Mv = M(u), M(v)
        assert abs(Mu @ v - u @ Mv) <= 1e-10 * abs(Mu @ v), variant
        _, its, ok = mc.pcg(As, b, M, 1e-8, 200)
        assert ok and its < 200, (variant, its)


@pytest.mark.parametrize("shape", [(32, 32), (25, 18)])
def test_bilinear_prolongation_keeps_constants(shape):
    ny, nx = shape
    P = mc.prolongation("bilinear", None, shape)
    coarse = ((ny + 1) // 2) * ((nx + 1) // 2)
    assert np.array_equal(P @ np.ones(coarse), np.ones(ny * nx))
    # Interior weights of the tensor product: 9/16, 3/16, 3/16, 1/16.
    row = P[(ny // 2) * nx + nx // 2].toarray().ravel()
    assert sorted(row[row > 0].tolist()) == [1 / 16, 3 / 16, 3 / 16, 9 / 16]


def test_operator_dependent_is_bilinear_for_equal_couplings(system):
    n, _, As, _ = system
    A = mc.problem(n, 1.0)[1]                        # contrast 1: equal couplings
    P = mc.prolongation("operator_dependent", A, (n, n))
    Q = mc.prolongation("bilinear", None, (n, n))
    assert abs(P - Q).max() <= 1e-12
    Pc = mc.prolongation("operator_dependent", As, (n, n))
    assert np.allclose(Pc @ np.ones(Pc.shape[1]), 1.0, rtol=0, atol=1e-12)
