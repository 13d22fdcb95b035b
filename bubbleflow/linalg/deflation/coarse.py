"""The coarse solve of deflation, ``y = E^+ s``, on the array backend.

``E = Z^T A Z`` is a sparse symmetric ``k x k`` matrix (a weighted graph
Laplacian of the subdomains, about 5 to 9 entries per row).  When it is
singular its null space is ``span{1}``; the solve then returns the
minimum-norm answer ``E^+ s``: ``s`` is projected onto ``range(E)`` (its mean
removed), the system is solved with the last unknown grounded (``E`` without
its last row and column, called ``M`` below, is positive definite, of size
``n = k - 1``) and the mean of the answer is removed.  A non-singular ``E`` is
solved as it is (``M = E``, ``n = k``).

Everything that :meth:`CoarseSolver.solve` does runs on the backend (NumPy,
or CuPy on the GPU) without a host transfer or a host synchronisation; all
factorisations are done once, in the constructor, and the solve only
multiplies by stored inverses.  Two modes:

``dense`` (``n <= dense_limit``)
    ``M`` is factorised densely on the backend (Cholesky), its inverse is
    formed from the factor and, for a singular ``E``, both projections are
    folded in: the stored ``k x k`` matrix is ``P [M^-1 0; 0 0] P`` with
    ``P = I - 1 1^T / k``, which is ``E^+``.  A solve is one dense
    matrix-vector product: ``8 k^2`` bytes read, one launch.

``condensed`` (above ``dense_limit``)
    Static condensation, one level of nested dissection.  The unknowns of
    ``M`` are split into groups (given, or found by recursive bisection in
    reverse Cuthill-McKee order, see
    :func:`~bubbleflow.linalg.deflation.graph_partition.partition_groups`).
    Separator unknowns ``S`` cover every coupling between two groups; the
    others are the interiors ``I_g``, so ``M_II`` is block diagonal.
    Stored: the inverses of the ``M_{I_g I_g}`` as a padded batch
    ``(G, m, m)``, the products ``F_g = M_{I_g I_g}^-1 M_{I_g S_g}``
    (``S_g``: the separator unknowns next to ``I_g``) as a padded batch
    ``(G, m, s_max)``, ``M_SI`` in CSR and the inverse of the dense Schur
    complement ``Sc = M_SS - sum_g M_{S_g I_g} F_g``.  A solve is::

        t_I = blockdiag(M_II^-1) s_I        batched matmul
        y_S = Sc^-1 (s_S - M_SI t_I)        CSR matvec, dense matvec
        y_I = t_I - F y_S                   gather, batched matmul

    plus the gathers that take ``s`` into and ``y`` out of that ordering and
    the two mean removals: about 15 library launches (on CuPy the same
    steps run as five CUDA kernels,
    :class:`~bubbleflow.linalg.deflation.condensed_kernels.RawCondensedSolve`),
    reading ``8 (G m^2 + G m s_max + |S|^2)`` bytes and the (small) CSR and
    index arrays (:attr:`CoarseSolver.nbytes`).  With groups of ``m``
    unknowns of a 2D-like graph, ``|S|`` is about ``2 n / sqrt(m)``
    (one-sided separators), so the solve reads ``O(n m + n^2 / m)`` bytes
    instead of ``8 n^2``: for the ``levelset_subdomains`` space of 128 x 128
    blocks (``k = 17064``) and groups of 256, 70 MB (``|S| = 1780``) instead
    of 2.3 GB.

The factorisations (batched inverses, batched Schur products, the dense
Cholesky) are backend operations: on CuPy they run on the GPU.  The set-up
only loops in Python for the partition (index bookkeeping on the host).
"""
from __future__ import annotations

import time
import warnings

import numpy as np

from ...compute.backend import backend_of
from ...compute.blas import single_threaded
from ...compute.cublas_gemm import dense_product
from ...compute.transfer import on_device, to_host, upload
from ...compute.twins import twin
from .condensed_kernels import RawCondensedSolve
from .condensed_layout import condensed_host_arrays, condensed_numbering
from .dense_inverses import (batched_spd_inverse, dense_pseudo_inverse, grounded_inverse,
                             linalg_errors, raise_failed_inverses, spd_inverse,
                             spd_inverse_deferred)
from .graph_partition import SEPARATORS

__all__ = ["CoarseSolver", "DENSE_LIMIT", "DENSE_LIMITS", "dense_limit_of"]

#: Largest ``n`` factorised densely (see the module docstring).  Below it the
#: dense set-up costs a little more and saves time every iteration; well above
#: it the dense set-up costs several times the condensed one for almost no
#: gain per iteration (measured: docs/performance_records.md, "Figures behind code
#: choices").
DENSE_LIMIT = 2048
#: The same limit per backend where the crossover lies elsewhere: on the host
#: (NumPy) the dense inverse's set-up grows as ``n^3`` on a core or two, and
#: the condensed solve is cheaper a step (set-up and ~30 solves) from about
#: n = 270 on (docs/howto/choosing_a_solver.md measures both from 85 to 3452).
DENSE_LIMITS = {"numpy": 256}


def dense_limit_of(backend, dense_limit=None):
    """``dense_limit``, or the backend's default (:data:`DENSE_LIMITS`, else
    :data:`DENSE_LIMIT`) where it is None."""
    if dense_limit is not None:
        return int(dense_limit)
    return DENSE_LIMITS.get(backend.name, DENSE_LIMIT)


class CoarseSolver:
    """Solves ``E y = s`` (``y = E^+ s`` when ``E`` is singular) on the backend.

    Parameters
    ----------
    E : sparse matrix (k x k)
        SciPy sparse matrix on the host, or a ``cupyx.scipy.sparse`` matrix
        (copied to the host for the set-up).  Symmetric.
    singular : bool
        ``E`` has the null space ``span{1}``: the answer is ``E^+ s``.
        ``E`` without its last row and column must then be positive
        definite.  Otherwise ``E`` itself must be.
    backend : Backend
        The bubbleflow backend the vectors live on.
    dense_limit : int, optional
        Up to this many grounded unknowns ``n`` the inverse is stored densely
        (mode ``"dense"``); beyond it static condensation is used (mode
        ``"condensed"``).  Default: the backend's (:func:`dense_limit_of`).
    groups : int array (k,) or (n,), optional
        Condensed mode: a group id per coarse unknown (any integers, e.g. a
        tile of subdomains).  Unknowns of one group share a dense block.  The
        entry of the grounded unknown (the last one when ``singular``) is
        ignored.  Default:
        :func:`~bubbleflow.linalg.deflation.graph_partition.partition_groups`
        with ``group_size``.
    group_size : int, default 256
        Target size of the groups found when ``groups`` is None.
    separator : {"one-sided", "two-sided"}, default "one-sided"
        How the separator is chosen, see
        :func:`~bubbleflow.linalg.deflation.graph_partition.separator_mask`.
        Both give the same answer; ``"one-sided"`` gives a separator about
        half as large (a Schur complement about four times smaller).
    E_backend : backend sparse matrix, optional
        ``E`` already on the backend (the dense mode densifies it there; with
        ``symmetric`` the refinement step uses it).
    symmetric : bool, default False
        ``E`` is exactly symmetric, without duplicate entries and with sorted
        indices (as :class:`~bubbleflow.linalg.deflation.space.Deflation` builds it): its
        symmetrisation ``(E + E^T) / 2`` is skipped.
    sync : bool, default True
        Synchronise with the device at the end (``setup_seconds`` then
        covers the device work).  False leaves the queued factorisation
        running, for a caller that has other work to queue behind it.

    Attributes
    ----------
    mode : str
        ``"dense"``, ``"condensed"`` or ``"empty"`` (``n == 0``: the answer is
        zero).
    k : int
        Size of ``E``.
    n : int
        Size of the grounded system (``k - 1`` when singular, else ``k``).
    singular : bool
    nbytes : int
        Bytes of the backend arrays stored for, and read by, one solve (the
        operand of a bandwidth model).
    setup_seconds : float
        Wall time of the constructor (synchronised with the device unless
        ``sync`` is False).
    n_separator : int
        Condensed mode: ``|S|`` (0 otherwise).
    n_groups : int
        Condensed mode: groups with interior unknowns (``G``).
    block_size : int
        Condensed mode: ``m``, the largest interior (the batch is padded to it).
    separator_width : int
        Condensed mode: ``s_max``, the most separator unknowns next to one
        interior.
    groups : ndarray or None
        Condensed mode: the group of each grounded unknown (host, ``(n,)``).
    interior_size : int
        Condensed mode: ``G * m``, the padded interior unknowns.
    take_out : int32 array (k,), backend
        Condensed mode: where each unknown's value sits in the condensed
        solution (interiors, then separator, then a zero slot).
    raw_solve : RawCondensedSolve or None
        Condensed mode on the GPU: the solve as five CUDA kernels (used by
        :meth:`solve` and, without its gather, by the fused engine).

    Notes
    -----
    :meth:`solve` is free of host transfers and synchronisations; on CuPy it
    only queues work on the current stream.  All stored arrays are float64;
    a float32 right-hand side is promoted and the answer returned in float32.
    """

    #: Condensed mode warns when the separator is larger than this.
    separator_warn = 8000

    def __init__(self, E, singular, backend, dense_limit=None, groups=None,
                 group_size=256, separator="one-sided", E_backend=None, symmetric=False,
                 sync=True, check=True):
        t0 = time.perf_counter()
        if separator not in SEPARATORS:
            raise ValueError(f"unknown separator {separator!r}; expected one of {SEPARATORS}")
        self.backend = backend
        self._xp = backend.xp
        if E.shape[0] != E.shape[1]:
            raise ValueError(f"E must be square; it is {E.shape}")
        self.k = int(E.shape[0])
        self.singular = bool(singular)
        self.n = self.k - 1 if (self.singular and self.k > 0) else self.k
        self.dense_limit = dense_limit_of(backend, dense_limit)
        self.n_separator = self.n_groups = self.block_size = self.separator_width = 0
        self.groups = None
        self.raw_solve = None
        self._esi_parts = self._esi_matrix = None  # condensed mode: M_SI (see _ESI)
        self._dtype = np.dtype(np.float64)
        self._flags = []            # deferred checks of the factorisations: (flags, size)
        if self.n == 0:
            self.mode = "empty"
            self.nbytes = 0
            self._E = _matrix_on(backend, _host_csr(E).astype(np.float64), symmetric, E_backend)
        elif (self.n <= self.dense_limit and symmetric and E_backend is not None
              and E_backend.shape == (self.k, self.k) and E_backend.dtype == np.float64
              and on_device(backend)):
            # Densified and factorised on the device from E's arrays: no host
            # copy of E, no host synchronisation (the checks are deferred).
            self.mode = "dense"
            self._E = E_backend
            K, flags = dense_pseudo_inverse(backend, E_backend, self.n, self.singular)
            self._K = K
            self._flags += flags
            self.nbytes = int(K.nbytes)
        else:
            self._setup_host(E, E_backend, symmetric, groups, int(group_size), separator)
        if self.mode == "condensed":
            # Warm-up: compiles the elementwise kernels and lets CuPy cache what it
            # checks lazily (e.g. the CSR format), so that solve never synchronises.
            self.solve(self._xp.zeros(self.k, dtype=self._dtype))
        if check:
            self.check()
        if sync:
            backend.synchronize()
        self.setup_seconds = time.perf_counter() - t0

    def _setup_host(self, E, E_backend, symmetric, groups, group_size, separator):
        """The set-up from ``E``'s entries on the host (the condensed mode's
        index work, and the dense mode off the device)."""
        E = _host_csr(E)
        E = E.astype(np.float64, copy=False)
        if symmetric:
            # The caller's word: exactly symmetric, canonical (sorted, no
            # duplicates): the entries of E[:n, :n] straight from its arrays.
            entries = _leading_entries(E, self.n)
        else:
            E = ((E + E.T) * 0.5).tocsr()
            M = E[: self.n, : self.n].tocsr()
            M.eliminate_zeros()
            M.sum_duplicates()
            M.sort_indices()
            C = M.tocoo()
            entries = (C.row.astype(np.int64), C.col.astype(np.int64), C.data)
        # E itself on the backend, for the optional refinement step of solve.
        self._E = _matrix_on(self.backend, E, symmetric, E_backend)
        if self.n <= self.dense_limit:
            self.mode = "dense"
            self._setup_dense(entries, E_backend)
        else:
            self.mode = "condensed"
            self._setup_condensed(entries, groups, group_size, separator)

    def check_flags(self):
        """The device arrays that say whether the factorisations failed (a
        cuSOLVER ``devInfo`` or a non-finite inverse), for a caller that
        reads them with others in one transfer and hands them to
        :meth:`check`; empty once checked, and where the set-up checked
        itself (NumPy)."""
        return [f for f, _ in self._flags]

    def check(self, values=None):
        """Raise ``numpy.linalg.LinAlgError`` where a factorisation failed:
        a matrix not positive definite after grounding, or an inverse that
        is not finite.  ``values``: the host values of :meth:`check_flags`
        (read now when None, one transfer).  Each failure is reported once."""
        flags, self._flags = self._flags, []
        raise_failed_inverses(flags, values)

    # ------------------------------------------------------------------ dense
    def _setup_dense(self, entries, E_backend=None):
        xp = self._xp
        if on_device(self.backend) and E_backend is not None and \
                E_backend.shape == (self.k, self.k):
            # Densified on the device: no dense host array, no big transfer.
            Md = E_backend.toarray()[: self.n, : self.n]
            Md += Md.T.copy()
            Md *= 0.5
        else:
            r, c, v = entries
            Md = np.zeros((self.n, self.n))
            Md[r, c] = v
            Md = xp.asarray(Md)
        Minv = spd_inverse(self.backend, xp.ascontiguousarray(Md))
        del Md
        self._K = grounded_inverse(Minv, self.k, xp) if self.singular else Minv
        self.nbytes = int(self._K.nbytes)

    # -------------------------------------------------------------- condensed
    def _setup_condensed(self, entries, groups, group_size, separator):
        nb = condensed_numbering(entries, self.n, self.k, groups, group_size, separator,
                                 self.backend)
        self.groups = nb["groups"]
        n, nS, Gb, m, smax, GbM = self.n, nb["nS"], nb["Gb"], nb["m"], nb["smax"], nb["GbM"]
        self.n_separator, self.n_groups, self.block_size, self.separator_width = nS, Gb, m, smax
        if nS > self.separator_warn:
            warnings.warn(f"coarse solve: the separator has {nS} unknowns (n = {n}, {Gb} groups "
                          f"of up to {m} interior unknowns); its dense Schur complement takes "
                          f"{8 * nS * nS / 2**20:.0f} MiB. Larger or better-shaped groups give "
                          f"a smaller separator.", RuntimeWarning, stacklevel=3)

        host, has_esi = condensed_host_arrays(nb, self.n, self.k)
        dev = _upload(self.backend, host)
        # The groups' products and inverses are small dense work: on the
        # host on one BLAS thread (compute/blas.py; ranks share the cores).
        with single_threaded(max(m, smax)):
            stored = self._condensed_factors(dev, nS, Gb, m, smax)
        xp = self._xp
        if has_esi:                              # the matrix itself is built on first use
            self._esi_parts = ((dev["esi_data"], dev["esi_indices"], dev["esi_indptr"]),
                               (nS, GbM))
            stored += list(self._esi_parts[0])
        self._take_in = dev["take_in"]
        self.take_out = dev["take_out"]
        self._zero = xp.zeros(1, dtype=self._dtype)
        stored += [self._take_in, self.take_out]
        self.interior_size = GbM
        self.nbytes = int(sum(int(a.nbytes) for a in stored))
        self.raw_solve = None
        if (on_device(self.backend) and Gb and nS and self._F is not None
                and self._esi_parts is not None):
            self.raw_solve = RawCondensedSolve.for_solver(self)

    def _condensed_factors(self, dev, nS, Gb, m, smax):
        """Interior block inverses, ``F`` and the inverse Schur complement from
        the uploaded arrays ``dev``; returns the arrays stored."""
        xp = self._xp
        stored = []
        with linalg_errors(self.backend):
            # Interior blocks, padded with the identity, inverted as a batch.
            if Gb:
                B = xp.zeros(Gb * m * m, dtype=self._dtype)
                B[dev["b_idx"]] = dev["b_val"]
                B[dev["pad"]] = 1.0
                B = B.reshape(Gb, m, m)
                Binv = batched_spd_inverse(self.backend, B, overwrite=True)
                del B
                Binv += Binv.transpose(0, 2, 1).copy()
                Binv *= 0.5
                valid = dev["valid"]
                Binv *= valid[:, :, None]
                Binv *= valid[:, None, :]            # the padding contributes exact zeros
                self._Binv = Binv
                stored.append(Binv)
            # F_g = M_{I_g I_g}^-1 M_{I_g S_g} and the Schur complement.
            self._F = None
            if nS:
                Sc = xp.zeros(nS * nS, dtype=self._dtype)
                Sc[dev["s_idx"]] = dev["s_val"]
                if Gb and smax:
                    Cb = xp.zeros(Gb * m * smax, dtype=self._dtype)
                    Cb[dev["c_idx"]] = dev["c_val"]
                    Cb = Cb.reshape(Gb, m, smax)
                    F = xp.matmul(self._Binv, Cb)
                    W = xp.matmul(Cb.transpose(0, 2, 1), F)
                    del Cb
                    sd = dev["sidx"].reshape(Gb, smax).astype(np.int64)
                    widx = (sd[:, :, None] * nS + sd[:, None, :]).ravel()
                    _subtract_at(Sc, widx, W)
                    del W
                    self._F = F
                    self._sidx = dev["sidx"]
                    stored += [F, self._sidx]
                Sc = Sc.reshape(nS, nS)
                Sc += Sc.T.copy()
                Sc *= 0.5
                self._Sinv, flags = spd_inverse_deferred(self.backend, Sc, overwrite=True)
                self._flags += flags
                del Sc
                stored.append(self._Sinv)
        return stored

    @property
    def _ESI(self):
        """M_SI in CSR (backend), built from its arrays on first use (the raw
        GPU solve reads the arrays themselves)."""
        if self._esi_matrix is None and self._esi_parts is not None:
            parts, shape = self._esi_parts
            self._esi_matrix = self.backend.sparse.csr_matrix(parts, shape=shape)
        return self._esi_matrix

    # ------------------------------------------------------------------ solve
    def solve(self, s, out=None, refine=False):
        """Return ``y = E^+ s`` (``E^-1 s`` when ``E`` is not singular).

        Parameters
        ----------
        s : backend array (k,)
            Not modified.
        out : backend array (k,), optional
            Written with the answer and returned.
        refine : bool
            One step of iterative refinement, ``y += E^+ (s - E y)``: the
            explicit inverses give a forward error near ``cond(E) eps`` but a
            larger residual than triangular solves; DEF1, whose projection
            needs ``E y = s`` accurately, asks for it (A-DEF2 does not).

        Returns
        -------
        y : backend array (k,)
            In the dtype of ``s`` (or ``out``).
        """
        xp = self._xp
        if s.shape != (self.k,):
            raise ValueError(f"s has shape {s.shape}; expected ({self.k},)")
        if refine and self.mode != "empty":
            y = self.solve(s)
            y = y + self.solve(s - self._E @ y)
            if out is not None:
                out[...] = y
                return out
            return y
        if self.mode == "empty":
            if out is None:
                return xp.zeros_like(s)
            out.fill(0)
            return out
        s64 = s if s.dtype == self._dtype else s.astype(self._dtype)
        if on_device(self.backend):
            return self._solve_direct(s, s64, out)
        with single_threaded(self.block_size or self.k):   # (the host's BLAS threads)
            return self._solve_direct(s, s64, out)

    def _solve_direct(self, s, s64, out):
        """:meth:`solve` past its checks: the dense product or the
        condensed solve."""
        xp = self._xp
        direct = (out is not None and out.dtype == self._dtype and out.flags.c_contiguous
                  and not _may_share(xp, out, s))
        if self.mode == "dense":
            if on_device(self.backend):      # cupy.dot's cuBLAS call, bit for bit
                y = out if direct else xp.empty(self.k, dtype=self._dtype)
                dense_product(self._K, xp.ascontiguousarray(s64), y)()
                if direct:
                    return out
            elif direct:
                xp.dot(self._K, s64, out=out)
                return out
            else:
                y = xp.dot(self._K, s64)
        elif self.raw_solve is not None:
            y = self.raw_solve.solve(xp.ascontiguousarray(s64),
                                out if direct else xp.empty(self.k, dtype=self._dtype))
            if direct:
                return out
        else:
            y = self._solve_condensed(s64, out if direct else None)
            if direct:
                return out
        if out is not None:
            out[...] = y
            return out
        return y if y.dtype == s.dtype else y.astype(s.dtype)

    def _solve_condensed(self, s, out):
        xp = self._xp
        Gb, m, nS, GbM = self.n_groups, self.block_size, self.n_separator, self.interior_size
        v = xp.take(s, self._take_in)
        if self.singular:
            v -= s.mean()                              # project onto range(E)
        parts = []
        if Gb:
            t = xp.matmul(self._Binv, v[:GbM].reshape(Gb, m, 1))
        if nS:
            g = v[GbM:]
            if self._ESI is not None:
                g = g - self._ESI @ t.reshape(GbM)
            yS = xp.dot(self._Sinv, g)
            if self._F is not None:
                ys = xp.take(yS, self._sidx).reshape(Gb, self.separator_width, 1)
                t -= xp.matmul(self._F, ys)
        if Gb:
            parts.append(t.reshape(GbM))
        if nS:
            parts.append(yS)
        if self.singular:
            parts.append(self._zero)
        z = xp.concatenate(parts) if len(parts) > 1 else parts[0]
        if out is None:
            y = xp.take(z, self.take_out)
        else:
            y = xp.take(z, self.take_out, out=out)
        if self.singular:
            y -= y.mean()                              # the minimum-norm answer
        return y

    @property
    def dense(self):
        """True in mode ``"dense"``."""
        return self.mode == "dense"

    @property
    def dense_inverse(self):
        """Mode ``"dense"``: the stored ``k x k`` matrix (``E^+``, or ``E^-1``)
        whose product :meth:`solve` is, for a caller that multiplies by it
        itself as :meth:`solve` does (``xp.dot(K, s, out=out)``); else None."""
        return self._K if self.mode == "dense" else None

    def __repr__(self):
        extra = ""
        if self.mode == "condensed":
            extra = (f", {self.n_groups} groups of <= {self.block_size}, separator "
                     f"{self.n_separator}")
        return (f"<CoarseSolver {self.mode}: k={self.k}{' singular' if self.singular else ''}"
                f"{extra}, {self.nbytes / 2**20:.1f} MiB on {self.backend.name}>")


# ---------------------------------------------------------------------- helpers
def _leading_entries(E, n):
    """``(rows, cols, values)`` (int64, int64, float64) of the non-zero
    entries of ``E[:n, :n]``, ``E`` in CSR without duplicates, in its order
    (sorted by row, then column, when its indices are): read from its
    arrays (SciPy's slicing and conversions cost several passes more)."""
    indptr = np.asarray(E.indptr, dtype=np.int64)
    end = int(indptr[n])
    rows = np.repeat(np.arange(n, dtype=np.int64), np.diff(indptr[: n + 1]))
    cols = np.asarray(E.indices[:end], dtype=np.int64)
    vals = np.asarray(E.data[:end], dtype=np.float64)
    keep = (cols < n) & (vals != 0)
    return rows[keep], cols[keep], vals[keep]


def _host_csr(E):
    """``E`` (dense or sparse, any backend) as a SciPy CSR matrix on the host."""
    import scipy.sparse as sp

    if sp.issparse(E):
        return sp.csr_matrix(E)
    return sp.csr_matrix(to_host(E, backend_of(E)))


def _upload(backend, arrays):
    """:func:`bubbleflow.compute.transfer.upload`."""
    return upload(backend, arrays)


@twin
def _subtract_at(Sc, idx, W):
    """``Sc[idx] -= W`` with repeated indices accumulated (flat ``Sc``; ``W``
    may be overwritten): no host synchronisation on CuPy
    (``cupy.bincount`` checks its input)."""
    W *= -1.0
    backend_of(Sc).xp.add.at(Sc, idx, W.ravel())


@_subtract_at.register("numpy")
def _subtract_at_numpy(Sc, idx, W):
    Sc -= np.bincount(idx, weights=W.ravel(), minlength=Sc.size)


@twin
def _matrix_on(backend, E, symmetric, E_backend):
    """``E`` (host CSR) on the backend: the caller's ``E_backend`` when it is
    the same matrix (``symmetric``, float64), else a copy."""
    if symmetric and E_backend is not None and E_backend.dtype == np.float64:
        return E_backend
    return backend.sparse.csr_matrix(E)


@_matrix_on.register("numpy")
def _matrix_on_numpy(backend, E, symmetric, E_backend):
    return E


def _may_share(xp, a, b):
    fn = getattr(xp, "may_share_memory", None)
    if fn is None:
        return a is b
    return bool(fn(a, b))
