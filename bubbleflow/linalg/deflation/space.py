"""The deflation space: :class:`Deflation` and the registry's kinds.

The deflation vectors are piecewise constant: column ``c`` of ``Z`` is the
indicator of the cells labelled ``c``.  ``Z`` is therefore never stored, only
the label of each cell: ``Z^T r`` is a per-label sum and ``Z y`` a gather.
``A Z`` is a sparse ``N x k`` matrix and ``E = Z^T A Z`` a sparse ``k x k``
matrix, factorised once per operator
(:class:`~bubbleflow.linalg.deflation.coarse.CoarseSolver`).

Kinds (``make_deflation``), in any dimension:

``subdomains``           the boxes of the grid's partition
                         (:meth:`bubbleflow.mesh.grid.Grid.partition`):
                         ``px x py`` rectangles, ``px x py x pz`` boxes in
                         3-D (default).
``stripes``              layers of cells along the vertical axis: the
                         horizontal stripes of grid rows of Gupta (2010,
                         appendix B.4) in 2-D, slabs of z layers in 3-D.
``levelset_subdomains``  every box split into its liquid and its gas part
                         (Tang and Vuik 2007): one vector per bubble piece,
                         which captures the small eigenvalues that density
                         contrast creates.

Set-up on the backend.  The labels (:mod:`~bubbleflow.linalg.deflation.labels`)
and the layout of the boxes (:mod:`~bubbleflow.linalg.deflation.boxes`) are
built on the operator's backend; for the grid operator
(:class:`PoissonOperator`) so are ``A Z`` and ``E``, from the couplings of
the "cut" faces, those whose two cells carry different labels
(:mod:`~bubbleflow.linalg.deflation.coarse_matrix`), without a host matrix:
only the cut faces (block boundaries and the interface) are touched after
one pass over the grid, and a cell with no cut face has a zero row, which
is not stored.  Host synchronisations: the number of vectors ``k``, the
number of cut faces, the numbers of entries of ``E`` and ``A Z`` (array
sizes), and the copy of the small ``E`` to the host for
:class:`CoarseSolver`.  A general sparse matrix (SciPy or CuPy) with
arbitrary labels takes the generic path, ``A Z`` and ``Z^T (A Z)`` by
sparse products on its backend.  The CUDA set-up of a whole space and the
one-kernel block sums
(:mod:`~bubbleflow.linalg.deflation.kernels`) are 2-D; a 3-D space is built
by the same array code on the device.

The singular Neumann operator: the labels partition the grid, so ``Z`` spans
the constants and ``E`` is singular with null space ``span{1_k}``.  The
coarse solve projects its right-hand side onto ``range(E)`` (zero sum),
solves with the last vector grounded (``E`` without its last row and
column is positive definite) and returns the zero-mean answer: exactly
``E^+ s``.
"""
from __future__ import annotations

import math

import numpy as np

from .. import registry
from ...compute.backend import backend_of
from ...compute.products import fixed_order_dot
from ...compute.transfer import on_backend, on_device, to_host
from .arrays import host_array
from .boxes import block_layout, even_box_shape, tile_part_sums
from .coarse import CoarseSolver, dense_limit_of
from .coarse_matrix import face_pieces, matrix_pieces
from .labels import block_counts, box_partition, compact_labels, compact_present

__all__ = ["Deflation", "make_deflation", "DEFLATIONS"]

#: Names of the deflation spaces (:data:`bubbleflow.linalg.registry.DEFLATIONS`).
DEFLATIONS = tuple(registry.DEFLATIONS)


class Deflation:
    """Piecewise-constant deflation space from one label per cell.

    Parameters
    ----------
    A : PoissonOperator, or a SciPy / CuPy sparse matrix
    labels : int array (N,) or grid-shaped, NumPy or of A's backend
        Cells with equal labels share a deflation vector.  Labels need not
        be contiguous; empty labels are removed (vector ``c`` is the
        ``c``-th smallest label present).
    kind : str
        A name for reports.
    dense_limit : int, optional
        Passed to :class:`CoarseSolver` (default: the backend's,
        :func:`~.coarse.dense_limit_of`).
    factorise : bool, default True
        Build :attr:`coarse` now; False leaves it to :meth:`factorise`.

    Attributes
    ----------
    k : int
        Number of deflation vectors (``n_vectors``).
    labels : int64 array (N,), backend (int32 when built by the GPU set-up kernels)
        Vector of each cell, ``0 .. k-1``.
    AZ, AZT : CSR matrices of the backend (``N x k``, ``k x N``), A's dtype
        ``A Z`` and its transpose.  For the grid operator only the rows of
        cells with a cut face hold entries; ``AZ`` is then formed from
        ``AZT`` on first use (A-DEF2 never needs it).
    E : scipy.sparse CSR (k x k), host, float64
        ``Z^T A Z`` (for :class:`CoarseSolver`).
    E_backend : CSR matrix of the backend (k x k), float64
        The same matrix, built on the backend (``E`` is its host copy).
    coarse : CoarseSolver, or None until :meth:`factorise` (``factorise=False``)
    groups : int32 array (k,), backend, or None
        For labels from the boxes of a partition (:meth:`from_blocks`: the
        kinds ``subdomains``, ``stripes``, ``levelset_subdomains``): the
        number of the box each vector lives in (x fastest: ``bj * px + bi``
        in 2-D); None for arbitrary labels.
    block_shape : tuple or None
        Cells per box as an array shape (``(by, bx)``, ``(bz, by, bx)``),
        when the boxes tile the grid exactly (every count divides its
        axis's cells); else None.
    part : int8 array of the grid's shape, backend, or None
        With ``block_shape``: 0 for the liquid, 1 for the gas part of a
        box (``levelset_subdomains``), all 0 otherwise.
    coarse_groups : int array (k,), host, or None
        For labels from blocks: the group of every vector in the condensed
        coarse solve (squares of boxes, cubes in 3-D, see
        :class:`CoarseSolver`).
    lut : int32 array (nblocks, 2), backend, or None
        With ``block_shape``: the vector of (block, part), -1 where that
        part of the block is empty.
    engine_cache : dict
        What engines derive from this space (the fused engine's tile
        structure), kept here so that every solve with the space shares it.
    """

    def __init__(self, A, labels, kind="custom", dense_limit=None, *, factorise=True,
                 _layout=None, _pieces=None):
        if hasattr(A, "backend"):
            self.backend = A.backend
        else:
            self.backend = backend_of(getattr(A, "data", A))
        backend = self.backend
        xp = backend.xp
        self.kind = kind
        dtype = np.dtype(getattr(A, "dtype", np.float64))
        if _pieces is not None:            # built by the GPU set-up kernels (from_blocks)
            self.labels, self.k = _pieces["labels"], _pieces["k"]
            slot, original = _pieces["slot"], _pieces["original"]
            AZ, AZT, E = None, _pieces["AZT"], _pieces["E"]
            singular = getattr(A, "nullspace", None) == "constant"
        else:
            lab = on_backend(labels, backend).ravel()
            if lab.dtype == bool:
                lab = lab.astype(xp.int64)
            n = lab.size
            if tuple(A.shape) != (n, n):
                raise ValueError(f"labels have {n} entries; the matrix is {tuple(A.shape)}")
            if _layout is not None:
                self.labels, self.k, slot, original = compact_present(lab, _layout["present"], xp)
            else:
                self.labels, self.k, slot, original = compact_labels(lab, xp)
            if hasattr(A, "couplings") and hasattr(A, "grid_shape"):
                AZ, AZT, E = face_pieces(A, self.labels, self.k, dtype)
                singular = getattr(A, "nullspace", None) == "constant"
            else:
                AZ, AZT, E, singular = matrix_pieces(A, self.labels, self.k, dtype, backend)
        # The matrices, or (from the GPU set-up) their CSR arrays: built on
        # first use (A-DEF2 on the fused engine needs neither matrix object).
        self._AZ, self._AZT, self._E_backend, self._E = AZ, None, None, None
        self._AZT_parts = self._E_parts = None
        if isinstance(AZT, tuple):
            self._AZT_parts, self._E_parts = AZT, E
        else:
            self._AZT, self._E_backend = AZT, E
        self.engine_cache = {}
        self.groups = self.block_shape = self.part = self.lut = None
        self.owner = self.labels32 = None
        self._layout_original = None
        if _layout is not None:
            self._set_layout(_layout, slot, original, _pieces)
            self._layout_original = (_layout, original)
        self._coarse_groups_host = self._original_host = None
        self._singular, self._dense_limit = singular, dense_limit_of(self.backend, dense_limit)
        self.coarse = None
        if factorise:
            self.factorise()

    # The matrices, built from their arrays on first use.
    @property
    def AZT(self):
        """``(A Z)^T`` in CSR (``k x N``) on the backend."""
        if self._AZT is None and self._AZT_parts is not None:
            data, indices, indptr, shape = self._AZT_parts
            self._AZT = self.backend.sparse.csr_matrix((data, indices, indptr), shape=shape)
        return self._AZT

    def azt_arrays(self):
        """``(indptr, indices, data)`` of ``(A Z)^T`` (the backend's arrays,
        without building the matrix object)."""
        if self._AZT_parts is not None and self._AZT is None:
            data, indices, indptr, _ = self._AZT_parts
            return indptr, indices, data
        return self.AZT.indptr, self.AZT.indices, self.AZT.data

    @property
    def E_backend(self):
        """``E`` in CSR on the backend (float64)."""
        if self._E_backend is None and self._E_parts is not None:
            data, indices, indptr, shape = self._E_parts
            self._E_backend = self.backend.sparse.csr_matrix((data, indices, indptr),
                                                             shape=shape)
        return self._E_backend

    @property
    def E(self):
        """``E`` in CSR on the host (SciPy, float64): copied from the backend
        on first use (the dense coarse factorisation on the GPU does not)."""
        if self._E is None:
            if self._E_parts is not None and self._E_backend is None:
                self._fetch_host()
            else:
                self._E = to_host(self.E_backend, self.backend)
        return self._E

    def _fetch_host(self):
        """``E`` and the vectors' (block, part) indices to the host in one
        transfer (the condensed coarse factorisation needs both)."""
        xp = self.backend.xp
        data, indices, indptr, shape = self._E_parts
        original = self._layout_original[1] if self._layout_original is not None else None
        arrays = [data, indices, indptr] + ([original] if original is not None else [])
        arrays = [xp.ascontiguousarray(a) for a in arrays]
        packed = to_host(xp.concatenate([a.reshape(-1).view(xp.uint8) for a in arrays]),
                         self.backend)
        host, at = [], 0
        for a in arrays:
            host.append(np.asarray(packed[at:at + a.nbytes]).view(a.dtype))
            at += a.nbytes
        import scipy.sparse as sp

        self._E = sp.csr_matrix((host[0], host[1], host[2]), shape=shape)
        if original is not None:
            self._original_host = host[3]

    @property
    def coarse_groups(self):
        """For labels from blocks: the group of every vector in the condensed
        coarse solve (host, ``(k,)``; squares of blocks, see
        :class:`CoarseSolver`), or None.  Computed on first use (it reads the
        vectors' blocks on the host)."""
        if self._coarse_groups_host is None and self._layout_original is not None:
            layout, original = self._layout_original
            if self._original_host is not None:
                original = self._original_host
            self._coarse_groups_host = self._coarse_groups(layout, original)
        return self._coarse_groups_host

    def factorise(self, check=True):
        """Build :attr:`coarse`, the factorisation of ``E`` (the constructor
        does it unless given ``factorise=False``: a caller may first queue
        other device work, which then runs while the host prepares the
        factorisation).  Not synchronised with the device, except for the
        checks of the factorisation with ``check`` (one transfer); without,
        the caller reads :meth:`CoarseSolver.check_flags` and calls
        :meth:`CoarseSolver.check`.  Returns self."""
        if self.coarse is None:
            # E is exactly symmetric and canonical by construction (face pieces:
            # canonical pairs mirrored; GPU kernels: the mean of both sums;
            # general matrices: (E + E^T) / 2, sorted).  The host copy of E
            # and the groups are made only where the factorisation needs them.
            n = self.k - 1 if (self._singular and self.k > 0) else self.k
            condensed = n > self._dense_limit
            if condensed and self._E is None and self._E_parts is not None:
                self._fetch_host()             # E and the blocks of the vectors: one transfer
            E = self.E if (condensed or not on_device(self.backend)) else self.E_backend
            self.coarse = CoarseSolver(E, self._singular, self.backend, self._dense_limit,
                                       groups=self.coarse_groups if condensed else None,
                                       E_backend=self.E_backend, symmetric=True, sync=False,
                                       check=check)
        return self

    @classmethod
    def from_blocks(cls, A, *blocks, phi=None, kind=None, dense_limit=None,
                    factorise=True):
        """The deflation space of the boxes of the grid operator ``A``:
        ``blocks[a]`` boxes along grid axis ``a`` (``px, py`` in 2-D, ``px,
        py, pz`` in 3-D; :meth:`bubbleflow.mesh.grid.Grid.partition`), every
        box split into liquid and gas parts by the level set ``phi`` when
        given (``levelset_subdomains``).

        The labels are built on A's backend (``phi`` is moved there if it is
        not); the layout gives :attr:`groups`, :attr:`block_shape`,
        :attr:`part` and :attr:`lut`.
        """
        shape = tuple(A.grid_shape)
        blocks = block_counts(blocks, len(shape), "blocks")
        # Cells per box (host arithmetic): which boxes, and which parts, are empty.
        size = box_partition(shape, blocks).box_sizes()
        labels, pieces, layout = block_layout(A, phi, blocks, size)
        kind = kind or ("subdomains" if phi is None else "levelset_subdomains")
        return cls(A, labels, kind=kind, dense_limit=dense_limit, factorise=factorise,
                   _layout=layout, _pieces=pieces)

    def _set_layout(self, layout, slot, original, pieces=None):
        xp = self.backend.xp
        shape, blocks, nparts = layout["grid_shape"], layout["blocks"], layout["nparts"]
        nblocks = math.prod(blocks)
        if pieces is not None and "lut" in pieces:
            # Built by the GPU set-up kernels with the labels (bf_defl_table).
            self.groups = pieces["groups"]
            self.block_shape = even_box_shape(shape, blocks)
            self.part = layout["part"].reshape(shape)
            self.lut, self.owner = pieces["lut"], pieces["owner"]
            self.labels32 = self.labels
            return
        self.groups = (original // nparts).astype(xp.int32)
        box_shape = even_box_shape(shape, blocks)
        if box_shape is None:
            return
        self.block_shape = box_shape
        part = layout["part"]
        self.part = (xp.zeros(shape, dtype=xp.int8) if part is None
                     else part.reshape(shape).astype(xp.int8, copy=False))
        lut = slot.astype(xp.int32).reshape(nblocks, nparts)
        if nparts == 1:
            lut = xp.concatenate([lut, xp.full((nblocks, 1), -1, dtype=xp.int32)], axis=1)
        self.lut = lut
        # For the fused GPU iteration (bubbleflow.linalg.fused.engine), built here so that it
        # counts as set-up: the slot 2 * block + part of every vector (where
        # the per-block sums of Z^T r land) and the labels as int32.
        flat = lut.ravel()
        owner = xp.zeros(self.k + 1, dtype=xp.int32)
        owner[xp.where(flat >= 0, flat, self.k)] = xp.arange(flat.size, dtype=xp.int32)
        self.owner = owner[: self.k]
        if on_device(self.backend):               # the fused iteration is GPU-only
            self.labels32 = self.labels.astype(xp.int32, copy=False)

    @staticmethod
    def _coarse_groups(layout, original, target=128):
        """Groups of about ``target`` vectors for the condensed coarse solve:
        squares of ``g x g`` boxes of the layout, cubes of ``g^3`` in 3-D
        (host, ``(k,)``).  Compact groups of a grid of boxes give a short
        separator."""
        blocks, nparts = layout["blocks"], layout["nparts"]
        block = np.asarray(host_array(original)) // nparts
        k = block.size
        if k == 0:
            return None
        g = max(1, int(round((target * math.prod(blocks) / k) ** (1.0 / len(blocks)))))
        # The group's number from its position along each axis, x fastest
        # like the boxes' own numbers.
        group, box_stride, group_stride = 0, 1, 1
        for count in blocks:
            group = group + (block // box_stride % count // g) * group_stride
            box_stride *= count
            group_stride *= -(-count // g)
        return group

    @property
    def AZ(self):
        """``A Z`` in CSR (``N x k``), built from ``AZT`` on first use."""
        if self._AZ is None:
            self._AZ = self.AZT.T.tocsr()
            self._AZ.sort_indices()
        return self._AZ

    @property
    def n_vectors(self):
        return self.k

    def coarse_rhs(self, r, s):
        """``Z^T r - (A Z)^T s``: A-DEF2's coarse right-hand side."""
        return self.restrict(r) - fixed_order_dot(self.AZT, s)

    def restrict(self, r):
        """``Z^T r``: the sum of ``r`` over each subdomain.

        With a block layout the sums are reductions over the blocks, in a
        fixed order (reproducible on the GPU, where ``bincount`` adds with
        atomics in a varying order), then each vector takes the sum of its
        slot (``owner``); otherwise ``bincount``.  The block sums are
        :func:`tile_part_sums` (one kernel on CuPy).
        """
        xp = self.backend.xp
        if self.block_shape is None:
            return xp.bincount(self.labels, weights=r.ravel(), minlength=self.k).astype(r.dtype)
        return tile_part_sums(r, self.part, self.block_shape)[self.owner]

    def _block_sums(self, r):
        """``(blocks * 2,)``: the sums of ``r`` over the liquid and the gas
        part of every block (array code on the backend)."""
        return tile_part_sums.reference(r, self.part, self.block_shape)

    def prolong(self, y):
        """``Z y``: each cell takes its subdomain's value."""
        return y[self.labels]

    def Q(self, r):
        """``Q r = Z E^+ Z^T r``."""
        return self.prolong(self.coarse.solve(self.restrict(r)))

    def __repr__(self):
        return f"<Deflation {self.kind}: {self.k} vectors on {self.backend.name}>"


def make_deflation(kind, A, phi=None, subdomains=None, stripes=16, dense_limit=None,
                   factorise=True, cells_per_subdomain=None):
    """Build the deflation space ``kind`` for the grid operator ``A`` (2-D or 3-D).

    Returns None for ``"none"``.  ``phi`` (grid-shaped, NumPy or on A's
    backend) is needed for ``levelset_subdomains``.  ``subdomains`` gives
    the box counts per grid axis, x first: ``(px, py)`` in 2-D, ``(px, py,
    pz)`` in 3-D (another number of counts is a ValueError); without it the
    boxes are about ``cells_per_subdomain`` cells wide, by default
    :func:`bubbleflow.linalg.registry.default_subdomains`.
    ``factorise=False`` leaves the coarse factorisation to
    :meth:`Deflation.factorise`.  Built on A's backend
    (:meth:`Deflation.from_blocks`); ``stripes`` are layers along the
    vertical axis (y in 2-D, z in 3-D): ``1 x stripes`` (``1 x 1 x stripes``)
    boxes.
    """
    if kind == "none" or kind is None:
        return None
    entry = registry.deflation(kind)           # an unknown name: the registry's error
    if entry.needs_phi and phi is None:
        raise ValueError(f"{kind} deflation needs the level set phi")
    ndim = len(A.grid_shape)
    # Every space is one of boxes: the entry's options say which.
    if "stripes" in entry.options:
        blocks = (1,) * (ndim - 1) + (int(stripes),)
    else:
        if subdomains is None:
            subdomains = registry.default_subdomains(A.grid, cells_per_subdomain)
        blocks = block_counts(subdomains, ndim, "subdomains")
    return Deflation.from_blocks(A, *blocks, phi=phi if entry.needs_phi else None, kind=kind,
                                 dense_limit=dense_limit, factorise=factorise)
