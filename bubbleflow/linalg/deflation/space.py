"""Deflation spaces and the coarse solve.

The deflation vectors are piecewise constant: column ``c`` of ``Z`` is the
indicator of the cells labelled ``c``.  ``Z`` is therefore never stored, only
the label of each cell: ``Z^T r`` is a per-label sum and ``Z y`` a gather.
``A Z`` is a sparse ``N x k`` matrix and ``E = Z^T A Z`` a sparse ``k x k``
matrix, factorised once per operator.

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

Set-up on the backend.  For the grid operator (:class:`PoissonOperator`)
everything is built on its backend (the GPU with CuPy) from the face
couplings, without a host matrix: the rows of the operator sum to zero, so
``(A Z)_{p,l} = -sum c_f`` over the faces ``f`` from cell ``p`` to cells
labelled ``l != label(p)`` and ``(A Z)_{p,label(p)} = +sum c_f`` over the
same "cut" faces (those whose two cells carry different labels); a cell
with no cut face has a zero row, which is not stored.  Likewise
``E_kl = -sum c_f`` over the cut faces between ``k`` and ``l`` and
``E_kk = sum c_f`` over the cut faces leaving ``k``.  Only the cut faces
(block boundaries and the interface) are touched after one pass over the
grid.  Host synchronisations: the number of vectors ``k``, the number of
cut faces, the numbers of entries of ``E`` and ``A Z`` (array sizes), and
the copy of the small ``E`` to the host for :class:`CoarseSolver`.  A
general sparse matrix (SciPy or CuPy) with arbitrary labels takes the
generic path, ``A Z`` and ``Z^T (A Z)`` by sparse products on its backend.
The CUDA set-up of a whole space and the one-kernel block sums
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
import scipy.sparse as sp

from .. import registry
from .coarse import DENSE_LIMIT, CoarseSolver
from . import kernels as deflation_cuda
from ...compute.backend import backend_of
from ...mesh.grid import AXES, Grid, array_axis, face_sides
from ...compute.transfer import on_backend, on_device, to_host
from ...compute.twins import twin

__all__ = ["Deflation", "CoarseSolver", "make_deflation", "subdomain_labels", "stripe_labels",
           "levelset_subdomain_labels", "partition_labels", "tile_part_sums", "block_layout",
           "DEFLATIONS"]

#: Names of the deflation spaces (:data:`bubbleflow.linalg.registry.DEFLATIONS`).
DEFLATIONS = tuple(registry.DEFLATIONS)


def partition_labels(grid_shape, blocks, xp=np, planes=None):
    """Label of each cell of an array of ``grid_shape`` (axes reversed:
    ``(ny, nx)``, ``(nz, ny, nx)``) for ``blocks[a]`` boxes along grid axis
    ``a`` (x first), on ``xp``: the boxes of
    :meth:`bubbleflow.mesh.grid.Grid.partition`, numbered with x fastest;
    ``planes = (lo, hi)``: of those planes of array axis 0 only.

    >>> partition_labels((2, 2, 4), (2, 1, 2))[:, 0]
    array([[0, 0, 1, 1],
           [2, 2, 3, 3]])
    """
    return _partition(grid_shape, blocks).labels(xp, planes)


def _partition(grid_shape, blocks):
    """The :class:`~bubbleflow.mesh.grid.Partition` of an array of
    ``grid_shape`` (axes reversed) into ``blocks[a]`` boxes along grid axis
    ``a``: the one definition of the boxes (labels, cells per box, shape)."""
    return Grid.regular(tuple(grid_shape)[::-1]).partition(blocks)


def subdomain_labels(ny, nx, px, py, xp=np):
    """Label of each cell for ``px x py`` rectangular subdomains (on ``xp``):
    the boxes of :meth:`bubbleflow.mesh.grid.Grid.partition`.

    Block ``(bj, bi)`` (row ``bj < py``, column ``bi < px``) has label
    ``bj * px + bi``; the block edges are ``floor(j * py / ny)``, so the
    blocks differ by at most one cell when ``py`` does not divide ``ny``.
    (:func:`partition_labels` for any dimension.)
    """
    return partition_labels((ny, nx), (px, py), xp)


def stripe_labels(ny, nx, stripes, xp=np):
    """Label of each cell for ``stripes`` horizontal stripes of grid rows
    (the same as ``subdomain_labels(ny, nx, 1, stripes)``)."""
    return subdomain_labels(ny, nx, 1, stripes, xp=xp)


def levelset_subdomain_labels(phi, *blocks, grid_shape=None, planes=None):
    """Boxes split into liquid (``phi >= 0``) and gas parts:
    ``2 * box + (phi < 0)``, on the array backend of ``phi``.

    ``blocks`` are the box counts per grid axis, x first (``px, py`` for a
    2-D ``phi``, ``px, py, pz`` for a 3-D one); the boxes are those of
    :func:`partition_labels`.  ``phi`` of planes ``lo:hi`` of array axis 0
    of a grid of array shape ``grid_shape`` (a rank's slab): ``planes = (lo, hi)``.
    """
    xp = backend_of(phi).xp
    phi = xp.asarray(phi)
    blocks = _block_counts(blocks, phi.ndim, "blocks")
    shape = phi.shape if grid_shape is None else grid_shape
    return 2 * partition_labels(shape, blocks, xp, planes) + (phi < 0)


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
    dense_limit : int
        Passed to :class:`CoarseSolver`.
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

    def __init__(self, A, labels, kind="custom", dense_limit=DENSE_LIMIT, *, factorise=True,
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
            lab = _on_backend(labels, backend).ravel()
            if lab.dtype == bool:
                lab = lab.astype(xp.int64)
            n = lab.size
            if tuple(A.shape) != (n, n):
                raise ValueError(f"labels have {n} entries; the matrix is {tuple(A.shape)}")
            if _layout is not None:
                self.labels, self.k, slot, original = _compact_present(lab, _layout["present"], xp)
            else:
                self.labels, self.k, slot, original = _compact_labels(lab, xp)
            if hasattr(A, "couplings") and hasattr(A, "grid_shape"):
                AZ, AZT, E = _face_pieces(A, self.labels, self.k, dtype)
                singular = getattr(A, "nullspace", None) == "constant"
            else:
                AZ, AZT, E, singular = _matrix_pieces(A, self.labels, self.k, dtype, backend)
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
        self._singular, self._dense_limit = singular, dense_limit
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
    def from_blocks(cls, A, *blocks, phi=None, kind=None, dense_limit=DENSE_LIMIT,
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
        blocks = _block_counts(blocks, len(shape), "blocks")
        # Cells per box (host arithmetic): which boxes, and which parts, are empty.
        size = _partition(shape, blocks).box_sizes()
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
            self.block_shape = _box_shape(shape, blocks)
            self.part = layout["part"].reshape(shape)
            self.lut, self.owner = pieces["lut"], pieces["owner"]
            self.labels32 = self.labels
            return
        self.groups = (original // nparts).astype(xp.int32)
        box_shape = _box_shape(shape, blocks)
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
        block = np.asarray(_host(original)) // nparts
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


@twin
def tile_part_sums(r, part, block_shape):
    """``(blocks * 2,)``: the sums of ``r`` over the liquid (``part == 0``)
    and the gas part of every block of ``block_shape`` tiling the grid of
    ``part`` (any dimension; array code on the backend of ``r``; on CuPy in
    2-D one kernel, :func:`bubbleflow.linalg.deflation.kernels.tile_part_sums`)."""
    xp = backend_of(r).xp
    boxes = tuple(n // m for n, m in zip(part.shape, block_shape))
    split = _box_split(part.shape, boxes)
    inside = tuple(range(1, len(split), 2))            # the axes within a box
    rb = r.reshape(split)
    gas = part.reshape(split)
    s_gas = xp.where(gas != 0, rb, 0).sum(axis=inside).ravel()
    s_liquid = xp.where(gas == 0, rb, 0).sum(axis=inside).ravel()
    return xp.stack([s_liquid, s_gas], axis=1).ravel()


tile_part_sums.register("cupy")(deflation_cuda.tile_part_sums)


@twin
def block_layout(A, phi, blocks, size):
    """The labels and the layout of the boxes of the grid operator ``A``
    (``blocks`` per grid axis, x first; split into liquid and gas parts by
    ``phi`` when given), on A's backend: ``(labels, pieces, layout)`` for
    :class:`Deflation`, ``size`` (host) the cells per box.  Array code
    (``pieces`` None), any dimension; on CuPy, for 2-D boxes that tile the
    grid, a few kernels build the whole space (``pieces``:
    :func:`bubbleflow.linalg.deflation.kernels.deflation_blocks`, ``labels``
    None)."""
    backend = A.backend
    xp = backend.xp
    shape = tuple(A.grid_shape)
    if phi is None:
        labels = partition_labels(shape, blocks, xp)
        nparts, part = 1, None
        present = size > 0                                    # host: k without a sync
    else:
        phi = _on_backend(phi, backend).reshape(shape)
        labels = levelset_subdomain_labels(phi, *blocks)
        nparts, part = 2, labels % 2
        gas = _block_sums(part, blocks, xp)                   # gas cells per box
        present = xp.stack([gas < xp.asarray(size), gas > 0], axis=1).ravel()
    layout = dict(blocks=blocks, nparts=nparts, present=present, part=part, grid_shape=shape)
    return labels, None, layout


@block_layout.register("cupy")
def _block_layout_cuda(A, phi, blocks, size):
    if not deflation_cuda.raw_deflation_ok(A, *blocks):
        return NotImplemented             # 3-D, or boxes not tiling the grid: the array code
    shape = tuple(A.grid_shape)
    if phi is not None:
        phi = _on_backend(phi, A.backend).reshape(shape)
    pieces, part, present = deflation_cuda.deflation_blocks(A, phi, *blocks, size,
                                                            _present_table)
    nparts = 1 if phi is None else 2
    layout = dict(blocks=blocks, nparts=nparts, present=present, part=part, grid_shape=shape)
    return None, pieces, layout


# --------------------------------------------------------------------------- #
# Set-up helpers (backend-generic: NumPy or CuPy arrays through ``xp``)
# --------------------------------------------------------------------------- #
def _on_backend(a, backend):
    """``a`` as an array of ``backend`` (moved only when it lives elsewhere)."""
    return on_backend(a, backend)


def _compact_labels(lab, xp):
    """Arbitrary labels to ``0 .. k-1``, in increasing order of the original labels.

    Non-negative integer labels not much larger than their number: the
    occupancy of every value is marked (a scatter) and its cumulative sum
    is the lookup table (:func:`_compact_present`), no sort; otherwise
    ``xp.unique``.  Returns ``(compact int64 (N,), k, slot, original)``, see
    :func:`_compact_present` (``slot`` None after ``unique``).  Host
    synchronisations: the range of the labels and ``k``.
    """
    n = lab.size
    if n == 0:
        return lab.astype(xp.int64), 0, None, lab
    if np.issubdtype(lab.dtype, np.integer):
        lo, hi = (int(v) for v in _host(xp.stack([lab.min(), lab.max()])))
        if lo >= 0 and hi < 4 * n + 1024:
            lab = lab.astype(xp.int64, copy=False)
            present = xp.zeros(hi + 1, dtype=bool)
            present[lab] = True
            return _compact_present(lab, present, xp)
    original, compact = xp.unique(lab, return_inverse=True)
    return compact.ravel().astype(xp.int64, copy=False), int(original.size), None, original


def _compact_present(lab, present, xp):
    """Compact labels from the occupancy ``present`` of the possible values ``0 .. len-1``.

    Returns ``(compact int64 (N,), k, slot, original)``: ``slot`` (int64, one
    per possible value) the compact label of every value, -1 where absent;
    ``original`` (``(k,)``) the value of every compact label, both on ``xp``.
    ``present`` may be a host array (then no synchronisation); on the
    device, reading ``k`` is one.
    """
    k, slot, original = _present_table(present)
    slot, original = xp.asarray(slot), xp.asarray(original)
    compact = slot[lab.astype(xp.int64, copy=False)]
    return compact, k, slot, original


def _present_table(present):
    """``(k, slot, original)`` of :func:`_compact_present`, on the array
    backend of ``present`` (reading ``k`` is a sync on the device)."""
    pxp = backend_of(present).xp               # the small table is computed where it lives
    cum = pxp.cumsum(present, dtype=pxp.int64)
    k = int(cum[-1]) if cum.size else 0
    slot = pxp.where(present, cum - 1, -1)
    original = pxp.searchsorted(cum, pxp.arange(1, k + 1, dtype=pxp.int64))
    return k, slot, original


def _block_counts(blocks, ndim, option):
    """``blocks`` as a tuple of ``ndim`` positive box counts (one per grid
    axis, x first), or a one-line ValueError naming ``option``."""
    counts = tuple(int(b) for b in blocks)
    if len(counts) != ndim:
        raise ValueError(f"{option} {counts}: {len(counts)} block counts for a {ndim}-D grid; "
                         f"expected one per axis ({', '.join(AXES[:ndim])})")
    if min(counts) < 1:
        raise ValueError(f"{option} {counts} must be positive")
    return counts


def _box_shape(grid_shape, blocks):
    """The array shape of a box when the boxes tile the grid exactly (every
    count divides its axis's cells), else None."""
    partition = _partition(grid_shape, blocks)
    return partition.box_shape if partition.even else None


def _box_split(grid_shape, counts):
    """The grid's array shape with every axis split into (box, cell in the
    box), for boxes tiling it: ``(py, ny // py, px, nx // px)`` in 2-D.
    ``counts`` are the boxes per array axis (slowest first)."""
    return tuple(v for n, count in zip(grid_shape, counts) for v in (count, n // count))


def _block_sums(a, blocks, xp):
    """Sum of the grid array ``a`` over each box of :func:`partition_labels`,
    ``(prod(blocks),)``.

    A reshaped reduction when the boxes tile the grid exactly; otherwise a
    scatter-add over the box labels (float64, exact for counts).
    """
    if _box_shape(a.shape, blocks) is not None:
        split = _box_split(a.shape, blocks[::-1])
        return a.reshape(split).sum(axis=tuple(range(1, len(split), 2))).ravel()
    labels = partition_labels(a.shape, blocks, xp).ravel()
    return scatter_add(labels, a.ravel().astype(np.float64), math.prod(blocks),
                        xp).astype(xp.int64)


def scatter_add(idx, vals, size, xp):
    """``out[idx] += vals`` with repeated indices accumulated, float64, ``(size,)``.

    ``xp.add.at``: no host synchronisation on CuPy (``cupy.bincount`` checks
    the signs and the maximum of its input on the host).
    """
    out = xp.zeros(size, dtype=np.float64)
    if idx.size:
        xp.add.at(out, idx, vals)
    return out


def _host(a):
    return a.get() if hasattr(a, "get") and not isinstance(a, np.ndarray) else np.asarray(a)


def _face_pieces(A, labels, k, dtype):
    """``A Z``, ``(A Z)^T`` and ``E`` of the grid operator from its cut faces,
    on its backend (any dimension)."""
    backend = A.backend
    xp = backend.xp
    shape = tuple(A.grid_shape)
    n = math.prod(shape)
    p, q, c = _cut_faces(labels.reshape(shape), A.couplings(), xp)
    a = labels[p]
    b = labels[q]
    # E: canonical pairs (lo < hi) summed once and mirrored, so E is exactly symmetric.
    lo = xp.minimum(a, b)
    hi = xp.maximum(a, b)
    er, ec, ev = _sum_duplicates(lo, hi, c, k)
    diag = scatter_add(xp.concatenate([a, b]), xp.concatenate([c, c]), k, xp)
    ar = xp.arange(k, dtype=xp.int64)
    E = _csr(xp.concatenate([er, ec, ar]), xp.concatenate([ec, er, ar]),
             xp.concatenate([-ev, -ev, diag]), (k, k), backend)
    # (A Z)^T: four entries per cut face, (b, p) -c, (a, q) -c, (a, p) +c, (b, q) +c,
    # summed and sorted by (vector, cell) in one pass: CSR order.  A Z itself is
    # built from it only when asked for (Deflation.AZ; A-DEF2 does not need it).
    rows = xp.concatenate([b, a, a, b])
    cols = xp.concatenate([p, q, p, q])
    vals = xp.concatenate([-c, -c, c, c])
    zr, zc, zv = _sum_duplicates(rows, cols, vals, n)
    zv = zv.astype(dtype, copy=False)
    AZT = _csr(zr, zc, zv, (k, n), backend, presorted=True)
    return None, AZT, E


def _cut_faces(L, couplings, xp):
    """The interior faces whose two cells carry different labels ``L``
    (grid-shaped): ``(p, q, c)``, the cells below and above them (flat
    indices, ``p < q``) and their couplings (float64).

    Faces are numbered axis by axis (x first), each axis's in the C order of
    its face array (the grid's shape, one cell fewer along the axis); one
    host synchronisation (the number of cut faces).
    """
    ndim = L.ndim
    cuts, first = [], [0]                        # first: the number of each axis's first face
    for axis in range(ndim):
        lower, upper = face_sides(ndim, axis)
        cuts.append((L[upper] != L[lower]).ravel())
        first.append(first[-1] + cuts[-1].size)
    f = xp.flatnonzero(xp.concatenate(cuts))     # host sync: the number of cut faces
    p = q = c = None
    for axis, coupling in enumerate(couplings):
        a = array_axis(ndim, axis)
        stride = math.prod(L.shape[a + 1:])      # from a cell to its neighbour across the face
        layer = max((L.shape[a] - 1) * stride, 1)    # faces per step of the slower axes
        local = f - first[axis]
        # The face array has one cell fewer along the axis than the grid:
        # face i lies above cell i + (i // layer) * stride.
        below = local + (local // layer) * stride
        value = _gather(coupling, local, xp)
        if axis == 0:
            p, q, c = below, below + stride, value
        else:                                    # the faces of this axis and the later ones
            mine = f >= first[axis]
            p = xp.where(mine, below, p)
            q = xp.where(mine, below + stride, q)
            c = xp.where(mine, value, c)
    return p, q, c


def _gather(a, idx, xp):
    """``a.ravel()[idx]`` in float64, with ``idx`` clipped to ``a`` (the caller masks)."""
    if a.size == 0:
        return xp.zeros(idx.shape, dtype=np.float64)
    return a.ravel()[xp.clip(idx, 0, a.size - 1)].astype(np.float64, copy=False)


@twin
def _sum_duplicates(rows, cols, vals, ncols):
    """Entries with equal ``(row, col)`` summed; returned sorted by row, then column."""
    xp = backend_of(rows).xp
    if rows.size == 0:
        return rows, cols, vals
    key = rows * ncols + cols
    order = xp.argsort(key)
    key = key[order]
    vals = vals[order]
    new = xp.empty(key.size, dtype=bool)
    new[0] = True
    xp.not_equal(key[1:], key[:-1], out=new[1:])
    seg = xp.cumsum(new, dtype=xp.int64) - 1
    nu = int(seg[-1]) + 1                        # host sync: the number of distinct entries
    summed = scatter_add(seg, vals, nu, xp)
    ukey = xp.empty(nu, dtype=key.dtype)
    ukey[seg] = key
    return ukey // ncols, ukey % ncols, summed


@_sum_duplicates.register("numpy")
def _sum_duplicates_scipy(rows, cols, vals, ncols):
    """On the host: SciPy's compiled COO to CSR conversion, which sums and
    sorts, in place of a sort of the keys (a tenth of the time for a flow's
    coarse space at h = 1/80)."""
    if rows.size == 0:
        return rows, cols, vals
    nrows = int(rows.max()) + 1
    m = sp.coo_matrix((vals, (rows, cols)), shape=(nrows, ncols)).tocsr()
    m.sum_duplicates()
    r = np.repeat(np.arange(nrows, dtype=rows.dtype), np.diff(m.indptr))
    return r, m.indices.astype(cols.dtype, copy=False), m.data


def _csr(rows, cols, vals, shape, backend, presorted=False):
    """CSR matrix of the backend from entries without duplicates (in any order,
    or sorted by row and column with ``presorted``): sorted column indices,
    int32 index arrays."""
    xp = backend.xp
    nrows, ncols = shape
    if rows.size and not presorted:
        order = xp.argsort(rows * ncols + cols)
        rows, cols, vals = rows[order], cols[order], vals[order]
    indptr = _row_pointers(rows, nrows).astype(xp.int32)
    return backend.sparse.csr_matrix((vals, cols.astype(xp.int32), indptr), shape=shape)


@twin
def _row_pointers(rows, nrows):
    """CSR row pointers ``(nrows + 1,)`` of the sorted row indices ``rows``:
    a binary search (``cupy.bincount`` would synchronise, twice)."""
    xp = backend_of(rows).xp
    return xp.searchsorted(rows, xp.arange(nrows + 1, dtype=rows.dtype))


@_row_pointers.register("numpy")
def _row_pointers_numpy(rows, nrows):
    # O(n); np.bincount does not synchronise.
    indptr = np.zeros(nrows + 1, dtype=np.int64)
    np.cumsum(np.bincount(rows, minlength=nrows), out=indptr[1:])
    return indptr


def _matrix_pieces(A, labels, k, dtype, backend):
    """``A Z``, ``(A Z)^T``, ``E`` and the singularity of ``E`` for a general matrix."""
    xp = backend.xp
    sparse = backend.sparse
    if sparse.issparse(A):
        As = sparse.csr_matrix(A, dtype=np.float64)
    else:
        As = sparse.csr_matrix(xp.asarray(A, dtype=np.float64))
    n = As.shape[0]
    Z = sparse.csr_matrix((xp.ones(n, dtype=np.float64), labels.astype(xp.int32),
                           xp.arange(n + 1, dtype=xp.int32)), shape=(n, k))
    AZ = (As @ Z).tocsr()
    E = (Z.T.tocsr() @ AZ).tocsr()
    E = (0.5 * (E + E.T.tocsr())).tocsr()
    # Z spans the constants (labels partition the grid); if A kills them,
    # E is singular with null space span{1}.  One host synchronisation.
    scale, res = (float(v) for v in _host(xp.stack([abs(As.diagonal()).max(),
                                                    abs(As @ xp.ones(n)).max()])))
    singular = res <= 1e-10 * (scale or 1.0)
    AZ = AZ.astype(dtype)
    AZT = AZ.T.tocsr()
    for M in (AZ, AZT, E):
        M.sort_indices()
    return AZ, AZT, E, singular


def make_deflation(kind, A, phi=None, subdomains=None, stripes=16, dense_limit=DENSE_LIMIT,
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
        blocks = _block_counts(subdomains, ndim, "subdomains")
    return Deflation.from_blocks(A, *blocks, phi=phi if entry.needs_phi else None, kind=kind,
                                 dense_limit=dense_limit, factorise=factorise)
