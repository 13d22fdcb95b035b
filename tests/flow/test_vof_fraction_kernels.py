"""The CUDA cell fractions of a level set (flow.vof_fraction_cuda) against
their array-code twin.

``vof_fraction_cuda.volume_fraction`` is called directly (a silent fall-back
to the array code cannot pass for it) and compared with
``vof_fraction.volume_fraction.reference`` on the same CuPy arrays, bit for
bit: one cut a cell in 2-D and 3-D, and the quadratic sub-cell cuts in 3-D
(k = 4, the initial fraction's, and an odd k); circles and spheres cut by
the walls, a free surface, random fields with flat parts (zero gradients),
anisotropic cells, the smallest grids and a NaN cell (its plane degenerate:
the fractions the array code gives).  Calls it does not
cover return ``NotImplemented``.
"""

import numpy as np
import pytest

from bubbleflow.flow import vof_fraction_cuda
from bubbleflow.flow.vof_fraction import volume_fraction

reference = volume_fraction.reference

pytestmark = pytest.mark.gpu


def level_set(shape, spacing, kind, seed=0):
    """A host level set on a grid of array ``shape`` (x fastest)."""
    rng = np.random.default_rng(seed)
    axes = [(np.arange(n) + 0.5) * h for n, h in zip(shape[::-1], spacing)]
    X = np.meshgrid(*axes[::-1], indexing="ij")[::-1]          # x first
    L = [n * h for n, h in zip(shape[::-1], spacing)]
    if kind == "bubbles":
        first = np.sqrt(sum((x - 0.43 * l) ** 2 for x, l in zip(X, L))) - 0.3 * min(L)
        wall = np.sqrt(sum((x - (0.9 if a == 0 else 0.5) * l) ** 2
                           for a, (x, l) in enumerate(zip(X, L)))) - 0.2 * min(L)
        return np.minimum(np.minimum(first, wall), 0.8 * L[-1] - X[-1])
    phi = np.zeros_like(X[0])
    for _ in range(3):
        k, ph = rng.uniform(1, 3, len(X)), rng.uniform(0, 6)
        phi += np.prod([np.cos(2 * np.pi * kk * x / l + ph) for kk, x, l in zip(k, X, L)], axis=0)
    return np.clip(phi, -0.6, 0.6)                         # flats: zero gradients


def equal(name, got, ref):
    got, ref = got.get(), ref.get()
    assert got.shape == ref.shape and got.dtype == ref.dtype
    differ = int(np.sum((got != ref) & ~(np.isnan(got) & np.isnan(ref))))
    print(f"{name}: {differ} cells differ")
    assert differ == 0, name


CASES_2D = [((64, 64), (1 / 64, 1 / 64)), ((37, 53), (1.3 / 53, 1 / 37)), ((2, 2), (0.5, 0.5)),
            ((80, 40), (0.025, 0.05))]
CASES_3D = [((32, 24, 20), (1 / 20, 1 / 24, 1 / 32)), ((17, 16, 16), (0.06, 0.06, 0.06)),
            ((2, 2, 3), (0.4, 0.5, 0.3))]


@pytest.mark.parametrize("kind", ["bubbles", "random"])
@pytest.mark.parametrize("shape, spacing", CASES_2D + CASES_3D, ids=str)
def test_one_cut_a_cell_is_the_array_code(shape, spacing, kind, cp):
    phi = cp.asarray(level_set(shape, spacing, kind))
    got = vof_fraction_cuda.volume_fraction(phi, spacing)
    equal(f"{shape} {kind}", got, reference(phi, spacing))
    assert float(got.min()) >= 0.0 and float(got.max()) <= 1.0


@pytest.mark.parametrize("k", [4, 3])
@pytest.mark.parametrize("kind", ["bubbles", "random"])
@pytest.mark.parametrize("shape, spacing", CASES_3D, ids=str)
def test_quadratic_sub_cell_cuts_are_the_array_code(shape, spacing, kind, k, cp):
    phi = cp.asarray(level_set(shape, spacing, kind, seed=k))
    got = vof_fraction_cuda.volume_fraction(phi, spacing, samples=k, fit="quadratic")
    equal(f"{shape} {kind} k={k}", got, reference(phi, spacing, samples=k, fit="quadratic"))


def test_a_nan_cell_gives_the_array_codes_fractions_and_the_dispatch_takes_the_kernel(cp):
    shape, spacing = (16, 16, 16), (1 / 16,) * 3
    phi = cp.asarray(level_set(shape, spacing, "bubbles"))
    phi[8, 8, 8] = np.nan
    for samples, fit in ((None, "multilinear"), (4, "quadratic")):
        got = vof_fraction_cuda.volume_fraction(phi, spacing, samples=samples, fit=fit)
        equal(f"nan {samples}", got, reference(phi, spacing, samples=samples, fit=fit))
    # The registry's dispatch on CuPy arrays is the kernel's result.
    equal("dispatch", volume_fraction(phi, spacing, samples=4, fit="quadratic"),
          vof_fraction_cuda.volume_fraction(phi, spacing, samples=4, fit="quadratic"))


def test_calls_the_kernels_do_not_cover_run_the_array_code(cp):
    phi3 = cp.asarray(level_set((8, 8, 8), (0.125,) * 3, "bubbles"))
    phi2 = cp.asarray(level_set((8, 8), (0.125,) * 2, "bubbles"))
    for args in [(phi3, (0.125,) * 3, 2, "multilinear"), (phi2, (0.125,) * 2, 2, "quadratic"),
                 (phi3.astype(np.float32), (0.125,) * 3, None, "multilinear"),
                 (phi2[:1], (0.125,) * 2, None, "multilinear"), (phi3, (0.125,) * 3, 0, "quadratic"),
                 (phi3, (0.125,) * 3, 2.5, "quadratic")]:
        assert vof_fraction_cuda.volume_fraction(*args) is NotImplemented
    with pytest.raises(ValueError, match="samples"):
        volume_fraction(phi3, (0.125,) * 3, samples=0, fit="quadratic")
