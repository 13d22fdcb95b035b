"""The volume fraction's gas sums on the GPU (flow.vof_cuda.gas_sums, the
CuPy variant of flow.vof_diagnostics.gas_sums) against the array code on
NumPy: 2-D and 3-D, cubic and non-cubic cells, grids one cell wide, a
fraction with pure and mixed cells and velocities of both signs.  The sums
go per block, then by one block, not in NumPy's order: within 1e-12 of the
largest sum (the velocity's moment taken with |w|, as it cancels).  Run
with ``pytest --backend cupy`` on a GPU machine.
"""
import numpy as np
import pytest
from helpers.slab_planes import PlanesOf
from helpers.twins import variant

from bubbleflow.flow.slabs import SlabPadding
from bubbleflow.mesh.ranks import rank_slab
from bubbleflow.flow.vof_diagnostics import gas_quantities, gas_sums

pytestmark = pytest.mark.gpu

RTOL = 1e-12
#: Cells per array axis and the spacing (x first).
GRIDS = [((40, 30), (1 / 30, 1 / 40)), ((7, 1), (0.5, 0.25)), ((1, 9), (0.1, 0.2)),
         ((12, 10, 14), (1 / 14, 1 / 10, 1 / 12)), ((9, 11, 6), (0.05, 0.06, 0.04)),
         ((1, 4, 5), (0.2, 0.2, 0.3)),
         # More cells than the first pass's threads (1,024 blocks of 256):
         # each thread walks several cells, its (k, j, i) carried over.
         ((600, 500), (1 / 500, 1 / 600)), ((70, 66, 62), (1 / 62, 1 / 66, 1 / 70))]


def fields(cells, seed=0):
    """Host ``(c, velocity)``: a fraction clipped to [0, 1] (pure cells and
    mixed ones) and face velocities of both signs."""
    rng = np.random.default_rng(seed)
    c = np.clip(rng.uniform(-0.5, 1.5, size=cells), 0.0, 1.0)
    nd = len(cells)
    velocity = []
    for a in range(nd):
        shape = list(cells)
        shape[nd - 1 - a] += 1
        velocity.append(rng.standard_normal(shape))
    return c, tuple(velocity)


def check(name, got, c, velocity, spacing):
    ref = gas_sums.reference(c, velocity, spacing)
    scale = gas_sums.reference(c, tuple(np.abs(v) for v in velocity), spacing)
    np.testing.assert_allclose(got.get(), ref, rtol=0, atol=RTOL * np.max(np.abs(scale)),
                               err_msg=name)


@pytest.mark.parametrize("cells,spacing", GRIDS, ids=lambda g: "x".join(map(str, g))
                         if isinstance(g[0], int) else None)
def test_gas_sums_kernel(cells, spacing, cp):
    c, velocity = fields(cells)
    d_c, d_v = cp.asarray(c), tuple(cp.asarray(v) for v in velocity)
    got = variant(gas_sums)(d_c, d_v, spacing)
    assert got is not NotImplemented and got.shape == (len(cells) + 2,)
    check(f"gas_sums {cells}", got, c, velocity, spacing)
    np.testing.assert_array_equal(gas_sums(d_c, d_v, spacing).get(), got.get())
    q, ref = gas_quantities(got.get(), spacing), gas_quantities(
        gas_sums.reference(c, velocity, spacing), spacing)
    assert q.keys() == ref.keys()
    for key in q:
        assert q[key] == pytest.approx(ref[key], rel=1e-11, abs=1e-14), key


def test_no_gas_and_the_calls_it_declines(cp):
    """No gas gives NaN quotients as the reference does; float32 and
    mismatched velocities run the array code."""
    c, velocity = fields((12, 10, 14))
    d_v = tuple(cp.asarray(v) for v in velocity)
    spacing = (0.1, 0.1, 0.1)
    empty = variant(gas_sums)(cp.zeros((12, 10, 14)), d_v, spacing)
    q = gas_quantities(empty.get(), spacing)
    assert q["volume"] == 0.0 and np.isnan(q["centroid_z"]) and np.isnan(q["rise_velocity"])
    d_c = cp.asarray(c)
    assert variant(gas_sums)(d_c.astype(cp.float32), d_v, spacing) is NotImplemented
    assert variant(gas_sums)(d_c, d_v[::-1], spacing) is NotImplemented
    assert variant(gas_sums)(d_c, d_v[:2], spacing[:2]) is NotImplemented


@pytest.mark.parametrize("cells", [(24, 31), (10, 12, 21)], ids=["2d", "3d"])
def test_the_sums_of_slabs_add_up_to_the_grids(cells, cp):
    """Three ranks' slabs: each slab's sums through the kernel equal the
    array code's on that slab (the planes' coordinates the grid's), and the
    three add up to the whole grid's."""
    c, velocity = fields(cells)
    spacing = tuple(0.1 * (a + 1) for a in range(len(cells)))
    nd = len(cells)
    parts = []
    for rank in range(3):
        slab = rank_slab(c.shape, rank, 3)
        own, faces = slice(slab.lo, slab.hi), slice(slab.lo, slab.hi + 1)
        mine = tuple(v[faces] if a == nd - 1 else v[own] for a, v in enumerate(velocity))
        padding = SlabPadding(PlanesOf(None, slab), slab)
        got = variant(gas_sums)(cp.asarray(c[own]), tuple(cp.asarray(v) for v in mine), spacing,
                                padding).get()
        ref = gas_sums.reference(c[own], mine, spacing, padding)
        np.testing.assert_allclose(got, ref, rtol=1e-12, atol=1e-13 * np.abs(ref).max())
        parts.append(got)
    whole = gas_sums.reference(c, velocity, spacing)
    np.testing.assert_allclose(np.sum(parts, axis=0), whole, rtol=1e-12,
                               atol=1e-13 * np.abs(whole).max())
