"""The CUDA interface measure (flow.interface_measure_cuda) against its
array-code twin on the GPU: in 3-D the planes' areas of every interface
cell, bit for bit, for spheres cut by the walls and a wavy surface on
anisotropic cells, with fractions from the level set and from a transport
(values near 0 and 1); in 2-D the segments' lengths to rounding; Youngs'
normals and the smallest grids are the array code's."""

import numpy as np
import pytest

from bubbleflow.flow import interface_measure_cuda
from bubbleflow.flow.gas_regions import interface_measure
from bubbleflow.flow.vof_fraction import volume_fraction

reference = interface_measure.reference

pytestmark = pytest.mark.gpu


def sphere_and_surface(shape, spacing, seed):
    rng = np.random.default_rng(seed)
    axes = [(np.arange(n) + 0.5) * h for n, h in zip(shape[::-1], spacing)]
    X = np.meshgrid(*axes[::-1], indexing="ij")[::-1]          # x first
    L = [n * h for n, h in zip(shape[::-1], spacing)]
    ball = np.sqrt(sum((x - f * l) ** 2 for x, f, l in zip(X, (0.45, 0.9, 0.4), L))) - 0.25 * L[0]
    wave = 0.75 * L[-1] + 0.05 * L[-1] * np.sin(2 * np.pi * X[0] / L[0]) - X[-1]
    return np.minimum(ball, wave) + 1e-3 * min(spacing) * rng.standard_normal(ball.shape)


@pytest.mark.parametrize("shape, spacing", [((24, 20, 16), (1 / 16, 1 / 20, 1 / 24)),
                                            ((16, 16, 16), (0.05,) * 3), ((2, 3, 2), (0.4,) * 3)],
                         ids=str)
def test_plane_areas_are_the_array_code(shape, spacing, cp):
    phi = cp.asarray(sphere_and_surface(shape, spacing, seed=len(shape)))
    c = volume_fraction.reference(phi, spacing)
    moved = cp.clip(c + 2e-12 * cp.sin(37.0 * phi / min(spacing)), 0.0, 1.0)   # near 0 and 1
    for name, frac in (("level set", c), ("moved", moved)):
        got = interface_measure_cuda.plane_areas(frac, spacing, normal_from=phi)
        ref = reference(frac, spacing, normal_from=phi)
        differ = int(cp.count_nonzero(got != ref))
        print(f"{shape} {name}: {differ} cells differ")
        assert differ == 0 and got.dtype == ref.dtype
    assert float(got.sum()) > 0.0
    assert bool(cp.all(interface_measure(moved, spacing, normal_from=phi) == got))


def test_the_dispatch_in_2d_and_the_calls_left_to_the_array_code(cp):
    h = (1 / 32, 1 / 24)
    y, x = np.meshgrid((np.arange(24) + 0.5) * h[1], (np.arange(32) + 0.5) * h[0], indexing="ij")
    phi = cp.asarray(np.hypot(x - 0.5, y - 0.5) - 0.3)
    c = volume_fraction.reference(phi, h)
    got = interface_measure(c, h, normal_from=phi)
    assert bool(cp.allclose(got, reference(c, h, normal_from=phi), rtol=1e-12, atol=1e-15))
    phi3 = cp.asarray(sphere_and_surface((8, 8, 8), (0.125,) * 3, seed=1))
    c3 = volume_fraction.reference(phi3, (0.125,) * 3)
    assert interface_measure_cuda.plane_areas(c3, (0.125,) * 3) is NotImplemented
    assert interface_measure_cuda.plane_areas(c3[:1], (0.125,) * 3, phi3[:1]) is NotImplemented
    assert interface_measure_cuda.plane_areas(c3.astype(np.float32), (0.125,) * 3,
                                              phi3) is NotImplemented
