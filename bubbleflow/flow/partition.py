"""Where a flow's fields live: the whole grid, or one rank's slab of planes.

The flow step (:class:`.navier_stokes.FlowSolver`) is written once for a
partition of the grid into slabs of planes along array axis 0 (the
vertical).  A partition answers the few questions where one process and
several ranks differ: which planes are this process's, the fields widened by
the neighbours' planes (a stencil near the slab's end then reads what one
process would), sums and maxima over the ranks, the pressure operator of the
slab and the state where its gas regions are labelled.

* :class:`WholeGrid`: one process, one slab whose padding is the walls;
  widening and cropping give the field itself, sums are the field's own.
* :class:`RankSlabs`: the slab of ``comm.rank``
  (:class:`~bubbleflow.mesh.ranks.RankSlab`), ghost planes from the
  neighbours (:class:`.slabs.SlabPadding`), figures reduced over the ranks.
"""
from __future__ import annotations

import math
from types import SimpleNamespace

import numpy as np

from ..mesh.ranks import rank_slab, slab_edges
from ..operators.poisson import PoissonOperator
from .padding import WALLS
from .slabs import SlabPadding
from .state import FlowState

#: Whole-grid arrays of one cell field's size that the gathered state and
#: the labelling of its gas regions hold at once (the state's fields, the
#: fraction, the labels and the measures' work arrays), with room to spare.
LABEL_ARRAYS = 16

__all__ = ["WholeGrid", "RankSlabs", "agreed", "slab_alignment", "thinnest_slab", "planes_grid",
           "slab_state"]


def agreed(exc):
    """``exc`` marked as raised by every rank alike (from figures reduced
    over the ranks): the run loop reports it as the flow's failure, where
    one rank's own error ends every rank."""
    exc.agreed = True
    return exc


def slab_alignment(solver_cfg, grid, ranks):
    """What the ranks' slab edges are multiples of for the pressure
    solver ``solver_cfg`` on ``grid`` (:func:`~bubbleflow.linalg.solver.slab_align`)."""
    from ..linalg.solver import slab_align

    return slab_align(solver_cfg, grid, ranks)


def planes_grid(grid, planes):
    """What :func:`slab_alignment` reads of ``grid`` with ``planes`` planes
    along array axis 0."""
    return SimpleNamespace(shape=(planes,) + tuple(grid.shape[1:]), ndim=grid.ndim)


def thinnest_slab(solver_cfg, grid, planes, ranks):
    """The planes of the thinnest slab when ``planes`` planes of ``grid``
    are shared by ``ranks`` ranks (ValueError where some rank gets none)."""
    edges = slab_edges(planes, ranks, slab_alignment(solver_cfg, planes_grid(grid, planes), ranks))
    return min(b - a for a, b in zip(edges, edges[1:]))


class WholeGrid:
    """One process holds the whole grid: the one-slab partition.

    Parameters
    ----------
    grid : Grid
    backend : Backend
    """

    comm = None
    #: The pressure set-up may run on a stream of its own beside the
    #: momentum phase (it needs no collective).
    overlap_setup = True

    def __init__(self, grid, backend):
        self.grid, self.backend = grid, backend
        self.padding = WALLS
        self.lo, self.hi = 0, grid.shape[0]
        self.local_shape = tuple(grid.shape)

    def window(self, width):
        """The planes ``(lo, hi)`` of the slab widened by ``width`` planes."""
        return 0, self.grid.shape[0]

    def widened(self, f, width, faces=False):
        """``f`` with ``width`` planes of each neighbour: none here."""
        return f

    def cropped(self, f, width, faces=False):
        """The slab's part of a field of the widened slab: all of it here."""
        return f

    def initial_planes(self):
        """``(first, stop)``: the planes (array axis 0) the initial state is
        built on: here the whole grid."""
        return 0, self.grid.shape[0]

    def own(self, f, first=0):
        """The slab's part, on the backend, of a field of the
        :meth:`initial_planes` from plane ``first`` on."""
        return f

    def owned_planes(self, ndim, width):
        """Per velocity component, the planes of its unknowns this process
        solves for on the widened slab (None: all of them)."""
        return None

    def maxima(self, values):
        """Host values maximised over the ranks (here: themselves)."""
        return np.asarray(values, dtype=np.float64)

    def whole_only(self, f):
        """``f`` where its figures are the whole grid's (here), else None."""
        return f

    def divergence_norms(self, norms, div_star, velocity, spacing):
        """``[||div u*||, ||div u||]`` on the device: ``norms`` of the
        projection's correction, here the whole grid's already."""
        return norms

    def operator(self, rho_faces, dtype, storage, width, out=None):
        """The pressure operator of the (widened) slab's face densities;
        ``out``: the arrays its couplings are written into (the pressure
        solver's, :meth:`.PressureSolver.operator_arrays`), or None."""
        return PoissonOperator.from_faces(rho_faces, self.grid, backend=self.backend, dtype=dtype,
                                          densities=True, storage=storage, out=out)

    def solver_phi(self, A, phi, width):
        """The level set the pressure solver's deflation reads, from the
        widened slab's ``phi``."""
        return phi

    def pressure_solver(self, solver, A, phi, case, check):
        """The run's pressure solver (``solver``, None at the first step)
        set up for ``A`` and ``phi``."""
        from ..linalg.solver import PressureSolver

        if solver is None:
            return PressureSolver.from_config(A, case.solver, phi=phi, precision=case.precision,
                                              grid=self.grid)
        return solver.update(A, phi, check=check)

    def labelled_state(self, state):
        """The whole grid's state where its gas regions are labelled (on
        ranks: on rank 0, None elsewhere, its pressure left out): here the
        state itself."""
        return state

    def error(self, exc):
        """``exc`` as the ranks report it."""
        return exc


class RankSlabs(WholeGrid):
    """The slab of planes of rank ``comm.rank``.

    Parameters
    ----------
    grid : Grid
    backend : Backend
    comm : the ranks' communicator (:mod:`bubbleflow.compute.comm`)
    align : int
        What the slab edges are multiples of (:func:`slab_alignment`).
    """

    # The set-up's collectives keep to the default stream.
    overlap_setup = False

    def __init__(self, grid, backend, comm, align):
        self.grid, self.backend, self.comm = grid, backend, comm
        self.slab = rank_slab(grid.shape, comm.rank, comm.size, align)
        self.padding = SlabPadding(comm, self.slab)
        self.lo, self.hi = self.slab.lo, self.slab.hi
        self.local_shape = tuple(self.slab.local_shape)

    def window(self, width):
        return max(self.lo - width, 0), min(self.hi + width, self.grid.shape[0])

    def widened(self, f, width, faces=False):
        return self.padding.widened(f, width, faces=faces)

    def cropped(self, f, width, faces=False):
        start = self.lo - self.window(width)[0]
        return f[start:start + self.hi - self.lo + (1 if faces else 0)]

    def initial_planes(self):
        # The slab and a plane of each neighbour: the initial fraction's
        # differences reach one plane, so the slab's cells get the whole
        # grid's values, and no rank holds the whole grid.
        return max(self.lo - 1, 0), min(self.hi + 1, self.grid.shape[0])

    def own(self, f, first=0):
        return self.backend.xp.array(f[self.lo - first:self.hi - first])

    def owned_planes(self, ndim, width):
        # A component's unknowns are its interior faces: the slab's cells'
        # planes, for the vertical component the faces above its cells.
        wlo = self.window(width)[0]
        last = self.grid.shape[0] - 1
        return [(self.lo - wlo, (self.hi if a != ndim - 1 else min(self.hi, last)) - wlo)
                for a in range(ndim)]

    def maxima(self, values):
        return self.comm.allreduce_maxima(values)

    def whole_only(self, f):
        return None

    def divergence_norms(self, norms, div_star, velocity, spacing):
        from .momentum import divergence

        xp = self.backend.xp
        div = divergence(velocity, spacing)
        local = xp.stack([(div_star * div_star).sum(), (div * div).sum()])
        return xp.sqrt(self.comm.allreduce_sum(local))

    def operator(self, rho_faces, dtype, storage, width, out=None):
        """The rank's rows of the pressure operator of the slab widened by
        ``width`` planes (``rho_faces`` the widened slab's); matrix free
        (``out`` is None: a solver on a slab offers no arrays)."""
        from ..operators.distributed import DistributedOperator

        lo, hi = self.window(width)
        A = PoissonOperator.from_faces(rho_faces, self.grid.planes(lo, hi), backend=self.backend,
                                       dtype=dtype, densities=True, storage="matrix_free")
        return DistributedOperator.from_couplings(A.couplings(), self.slab, self.comm,
                                                  self.backend, first=lo)

    def solver_phi(self, A, phi, width):
        lo, hi, _, _ = A.slab.extended()
        start = lo - self.window(width)[0]
        return phi[start:start + hi - lo]

    def pressure_solver(self, solver, A, phi, case, check):
        # The slabs solve in float64 (apps.ranks refuses another precision).
        from ..linalg.solver import PressureSolver

        if solver is None:
            return PressureSolver.from_config(A, case.solver, phi=phi, grid=self.grid)
        return solver.update(A, phi=phi, check=check)

    def labelled_state(self, state):
        # On rank 0's device where the whole grid's labelling fits in half
        # its free memory (the labelling's kernels, not the host's array
        # code), the slabs sent there device to device; else on its host.
        # Rank 0 chooses and every rank follows: the gathers must meet.
        on_device = False
        if self.backend.on_device:
            fits = None
            if self.comm.rank == 0:
                free = self.backend.available_memory()[0]
                whole = math.prod(self.grid.shape) * state.phi.dtype.itemsize
                fits = free is not None and LABEL_ARRAYS * whole <= free // 2
            on_device = bool(self.comm.broadcast(fits, root=0))
        return whole_state(state, self.comm, pressure=False, on_device=on_device)

    def error(self, exc):
        return agreed(exc)


def slab_state(state, slab, xp=None):
    """The slab's part of a whole-grid state (a checkpoint), on ``xp``
    (default: the state's)."""
    nd = state.phi.ndim
    cells, faces = slice(slab.lo, slab.hi), slice(slab.lo, slab.hi + 1)
    own = (lambda f: f.copy()) if xp is None else (lambda f: xp.array(f))
    return FlowState(phi=own(state.phi[cells]),
                     velocity=tuple(own(v[faces] if a == nd - 1 else v[cells])
                                    for a, v in enumerate(state.velocity)),
                     p=own(state.p[cells]), time=state.time, step=state.step,
                     c=None if state.c is None else own(state.c[cells]))


def whole_state(state, comm, root=0, pressure=True, on_device=False):
    """The ranks' slab states gathered on ``root`` as one whole-grid state
    on the host, or with ``on_device`` on the state's device (None on the
    other ranks); every rank calls it.  Without ``pressure`` its ``p`` is
    None (what the gas regions do not read)."""
    nd = state.phi.ndim
    gather = comm.gather_rows_to_device if on_device else comm.gather_rows

    def joined(f, faces=False):
        # A face between two slabs is held by both: the lower's.
        return gather(f[1:] if faces and comm.rank > 0 else f, root)

    phi = joined(state.phi)
    p = joined(state.p) if pressure else None
    velocity = tuple(joined(v, faces=a == nd - 1) for a, v in enumerate(state.velocity))
    c = None if state.c is None else joined(state.c)
    if comm.rank != root:
        return None
    return FlowState(phi=phi, velocity=velocity, p=p, time=state.time, step=state.step, c=c)
