"""The hard bounds a case is checked against: the sizes and magnitudes the
numerics can represent or finish, and the upper bound of every count a case
sets (each field checker names its bound and why, and the error states it).

Spelled out here, not imported from the numerics, so that reading a case
needs none of them.
"""
from __future__ import annotations

from .yaml_reader import MAX_FILE_BYTES

#: Most cells: the GPU kernels index a grid with 32-bit offsets, so a grid's
#: cells, a plane past its end and a launch's stride stay below 2**31.
MAX_CELLS = 2 ** 31 - 2 ** 26


def max_csr_cells(ndim):
    """Most cells where a solve builds matrices over the grid in CSR with
    int32 indices (a deflation space's ``A Z``, a peer's or baseline's
    operator): up to ``2 ndim + 1`` entries a row, below 2**31 in all.

    >>> max_csr_cells(2), max_csr_cells(3)
    (429496729, 306783378)
    """
    return (2 ** 31 - 1) // (2 * ndim + 1)

#: Largest density ratio (either way) between the fluids.  Measured on the
#: bubbly column at 64 x 64 (dpcg, adef2, incomplete_poisson_scaled,
#: levelset_subdomains, float64): the attainable true relative residual is
#: about 1e-16 * contrast * 400 (1e5: converges to 1e-8; 1e6: stagnates at
#: 4e-8, converges at rtol 1e-6; 1e8: 4e-6; 1e10: 0.1; 1e12 and beyond: the
#: coarse matrix is no longer positive definite, LinAlgError).
MAX_CONTRAST = 1e6
#: Densities and viscosities, lengths and the other physical magnitudes must
#: lie in this window: it covers SI and non-dimensional cases with many
#: decades to spare, and keeps 1/rho, rho g L and h**3 far from the float64
#: overflow (1e308) and underflow (1e-308) limits.
MAGNITUDE = (1e-12, 1e12)
LENGTH = (1e-9, 1e9)
#: Most circles (bubbles, lattice, random, droplets): the level set is built
#: circle by circle over the whole grid, and random ones placed in O(n**2).
MAX_CIRCLES = 10_000
#: Random bubbles are placed by rejection; random sequential packing jams
#: near 55 % of the area, so ask for at most half of it.
MAX_RANDOM_FILL = 0.5
#: Flow runs: at most this many snapshots (time.end / output.interval), ...
MAX_SNAPSHOTS = 10_000
#: ... an output interval no smaller than this fraction of the stable step at
#: t = 0 (smaller intervals force tiny steps, each one written out) ...
MIN_INTERVAL_FRACTION = 0.01
#: ... and at most this many steps at the stable step at t = 0 (the flow
#: only makes it smaller).
MAX_STEPS = 10 ** 7
#: Largest case file read, in bytes (the reader's limit for files).
MAX_CASE_BYTES = MAX_FILE_BYTES

# Upper bounds of the counts a case sets.
#: Cells along one axis: the others have at least 4, and MAX_CELLS bounds them all.
MAX_AXIS_CELLS = MAX_CELLS // 4
#: Chebyshev smoothing steps per multigrid visit: each is a matrix product, so
#: a few dozen already cost more than the rest of the cycle, and the GPU
#: kernels' tiles carry a halo as wide as the degree.
MAX_DEGREE = 32
#: Cells of the coarsest multigrid level: it is solved through a dense
#: inverse of cells**2 entries (512 MiB of float64 at this size).
MAX_COARSEST_CELLS = 8192
#: ``min_side`` only holds back levels of at most this many cells
#: (multigrid.MIN_SIDE_CELLS), so no wider side can matter.
MAX_MIN_SIDE = 1024
#: Multigrid levels that run a W-cycle: a grid of MAX_CELLS halves to one
#: cell in fewer levels than this.
MAX_W_LEVELS = 32
#: Steps between two computations of the coarsest multigrid inverse: past a
#: few hundred an interface has crossed the coarsest cells and the solves
#: renew it themselves (multigrid.Multigrid.solved).
MAX_COARSE_REFRESH = 1000
#: Iterations of one solve (and between convergence checks): the solvers
#: record the residual history in an array of maxiter entries.
MAX_ITERATIONS = 10 ** 6
#: Level-set reinitialisation sweeps: each moves the corrected distance about
#: a cell from the interface, and the flow reads it a few cells out; every
#: sweep costs a pass over the grid at each reinitialisation.
MAX_REINIT_ITERATIONS = 1000
#: Random-bubble seeds: numpy takes any, a study's summary.h5 stores a swept
#: seed as a signed 64-bit integer.
MAX_SEED = 2 ** 63 - 1
