"""The CUDA build of the level set (mesh.levelset_cuda) against its array
code on the GPU: the same bits, in 2-D and 3-D, with and without a free
surface, bubbles and droplets, a rank's planes, no shape at all, and the
build as a run calls it (``build_levelset`` dispatching to the kernel)."""

import numpy as np
import pytest

from bubbleflow.compute.backend import get_backend
from bubbleflow.mesh import levelset, levelset_cuda
from bubbleflow.mesh.grid import Grid
from bubbleflow.mesh.levelset import Circle, build_levelset

pytestmark = pytest.mark.gpu


def shapes(nd, count, seed):
    rng = np.random.default_rng(seed)
    out = []
    for s in range(count):
        c = rng.uniform(0.1, 0.9, nd)
        z = dict(z=float(c[2])) if nd == 3 else {}
        out.append(Circle(float(c[0]), float(c[1]), float(rng.uniform(0.03, 0.2)),
                          gas=bool(s % 4 != 3), **z))
    return out


GRIDS = [((48, 96), (1.0, 2.0)), ((37, 20), (0.7, 0.4)), ((16, 12, 24), (1.0, 0.75, 1.5))]


@pytest.mark.parametrize("count", [0, 1, 9])
@pytest.mark.parametrize("surface", [None, 0.8])
@pytest.mark.parametrize("cells, lengths", GRIDS, ids=str)
def test_the_kernel_is_the_array_code(cells, lengths, surface, count, cp):
    backend = get_backend("cupy")
    g = Grid.regular(cells, lengths)
    circles = shapes(g.ndim, count, seed=count)
    stop = g.shape[0]
    for first, last in ((0, stop), (3, stop - 5)):
        got = levelset_cuda.build(g, surface, circles, backend, first, last)
        ref = levelset._build.reference(g, surface, circles, backend, first, last)
        assert got.shape == ref.shape == (last - first,) + g.shape[1:]
        assert bool(cp.all(got == ref)), (cells, surface, count, first)
    got = build_levelset(g, surface, circles, backend=backend)
    assert bool(cp.all(got == levelset_cuda.build(g, surface, circles, backend, 0, stop)))
    host = build_levelset(g, surface, circles)             # the blocks' NumPy build
    assert np.allclose(got.get(), host, rtol=0, atol=1e-14)
