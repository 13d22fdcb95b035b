"""The pressure operator's rows of one rank: its slab, the halo swap, the
reductions through the rank's communicator.

A :class:`DistributedOperator` is what the Krylov loop (written once,
:mod:`bubbleflow.linalg.krylov`) sees on each rank: vectors are the slab's
cells, ``A x`` swaps one plane with each neighbour
(:meth:`~bubbleflow.compute.comm.MPIHost.start_exchange`; the slab's own
faces are applied while it travels, then the faces to the halo planes), and every global quantity
(dot products, the null space's mean, ``||A||``) is reduced by the
communicator the operator carries (``comm``; the Krylov system reads it).
With one rank it is the grid operator itself.
"""
from __future__ import annotations

import numpy as np

from ..compute.transfer import on_backend
from ..mesh.ranks import rank_slab
from .poisson import apply_faces, centre_from_couplings, residual_from_product

__all__ = ["DistributedOperator"]


class DistributedOperator:
    """Rank ``comm.rank``'s rows of a grid operator (matrix free).

    Parameters
    ----------
    couplings : tuple of arrays
        The face couplings per axis (x, y[, z]) of the rank's slab widened
        by its halo planes (:meth:`RankSlab.extended`), on the backend.
    slab : RankSlab
    comm : communicator (:mod:`bubbleflow.compute.comm`)
    backend : Backend
    """

    nullspace = "constant"
    storage = "matrix_free"

    def __init__(self, couplings, slab, comm, backend):
        self.slab, self.comm, self.backend = slab, comm, backend
        self._couplings = tuple(couplings)
        self.dtype = np.dtype(self._couplings[0].dtype)
        _, _, below, above = slab.extended()
        self._below = below
        nloc = slab.hi - slab.lo
        slow = len(self._couplings) - 1             # the grid axis along array axis 0
        # The slab's own faces (its product's interior part) and the faces
        # to the halo planes (added once the halo has arrived).
        self._inner = tuple(c[below:below + nloc - 1] if axis == slow else c[below:below + nloc]
                            for axis, c in enumerate(self._couplings))
        faces = self._couplings[slow]
        self._to_lower = faces[0] if below else None
        self._to_upper = faces[below + nloc - 1] if above else None
        xp = backend.xp
        plane = tuple(slab.shape[1:])
        self._halo = (xp.zeros(plane, dtype=self.dtype), xp.zeros(plane, dtype=self.dtype))
        self._y = xp.zeros(slab.local_shape, dtype=self.dtype)
        n = int(np.prod(slab.local_shape))
        self.shape = (n, n)
        self._norm_inf = None

    @classmethod
    def from_operator(cls, A, comm, align=1, backend=None):
        """Rank ``comm.rank``'s rows of the grid operator ``A`` (every rank
        holds ``A``: the slab's couplings are sliced from it), on ``backend``
        (default ``A``'s: an operator built on the host puts only the slab
        on a rank's GPU)."""
        slab = rank_slab(tuple(A.grid_shape), comm.rank, comm.size, align)
        return cls.from_couplings(A.couplings(), slab, comm, backend or A.backend)

    @classmethod
    def from_couplings(cls, couplings, slab, comm, backend, first=0):
        """The rows of ``slab`` of the operator of the global face
        ``couplings`` (per axis, x first), or of those of the grid's planes
        from ``first`` on (array axis 0; a widened slab's)."""
        lo, hi, _, _ = slab.extended()
        lo, hi = lo - first, hi - first
        ndim = len(couplings)
        local = []
        for axis, c in enumerate(couplings):
            # Axis ndim - 1 (z in 3-D, y in 2-D) is array axis 0: its faces
            # lo..hi-2 join the widened slab's cells; the others' every face
            # of those planes.
            stop = hi - 1 if axis == ndim - 1 else hi
            local.append(backend.xp.ascontiguousarray(on_backend(c[lo:stop], backend)))
        return cls(local, slab, comm, backend)

    @property
    def grid_shape(self):
        return self.slab.local_shape

    @property
    def ndim(self):
        return len(self.slab.shape)

    def couplings(self):
        """The widened slab's couplings (halo planes included)."""
        return self._couplings

    def matvec(self, x, out=None):
        """``A x`` on the slab's cells: the halo swap started, the slab's own
        faces applied meanwhile, then the faces to the halo planes."""
        shape = x.shape
        x3 = x.reshape(self.grid_shape)
        below_halo, above_halo = self._halo
        handle = self.comm.start_exchange(self.slab.lower, self.slab.upper, x3[0], x3[-1],
                                          below_halo, above_halo)
        y = apply_faces(self._inner, x3, self._y if out is None else out.reshape(self.grid_shape))
        self.comm.wait(handle)
        if self._to_lower is not None:
            y[0] += self._to_lower * (x3[0] - below_halo)
        if self._to_upper is not None:
            y[-1] += self._to_upper * (x3[-1] - above_halo)
        if out is not None:
            return out
        return y.reshape(shape).copy()

    def residual(self, b, x, out=None):
        """``b - A x`` on the slab's cells (:meth:`matvec`, then the
        difference: the halo faces come after the slab's own)."""
        return residual_from_product(b, self.matvec(x, out))

    def __matmul__(self, x):
        return self.matvec(x)

    def diagonal(self):
        """The slab's main diagonal (flat; the faces to the halo included)."""
        below, nloc = self._below, self.slab.hi - self.slab.lo
        centre = centre_from_couplings(self._couplings, self.backend.xp)
        return centre[below:below + nloc].ravel().copy()

    def norm_inf(self):
        """Largest absolute row sum over every rank (twice the largest
        diagonal entry: the rows sum to zero)."""
        if self._norm_inf is None:
            d = self.diagonal()
            local = 2.0 * float(d.max()) if d.size else 0.0
            self._norm_inf = self.comm.allreduce_max(local)
        return self._norm_inf

    def gather(self, x, root=0):
        """The global vector from the ranks' slabs, on ``root`` (host, flat),
        None elsewhere."""
        whole = self.comm.gather_rows(self.backend.to_host(x).reshape(self.grid_shape), root)
        return None if whole is None else whole.ravel()

    def scatter_local(self, x_global):
        """This rank's slab of a global vector every rank holds (flat)."""
        xg = np.asarray(x_global).reshape(self.slab.shape)
        return self.backend.xp.asarray(xg[self.slab.cells]).ravel()
