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
    reverse Cuthill-McKee order, see :func:`partition_groups`).  Separator
    unknowns ``S`` cover every coupling between two groups; the others are
    the interiors ``I_g``, so ``M_II`` is block diagonal.  Stored: the
    inverses of the ``M_{I_g I_g}`` as a padded batch ``(G, m, m)``, the
    products ``F_g = M_{I_g I_g}^-1 M_{I_g S_g}`` (``S_g``: the separator
    unknowns next to ``I_g``) as a padded batch ``(G, m, s_max)``, ``M_SI`` in
    CSR and the inverse of the dense Schur complement
    ``Sc = M_SS - sum_g M_{S_g I_g} F_g``.  A solve is::

        t_I = blockdiag(M_II^-1) s_I        batched matmul
        y_S = Sc^-1 (s_S - M_SI t_I)        CSR matvec, dense matvec
        y_I = t_I - F y_S                   gather, batched matmul

    plus the gathers that take ``s`` into and ``y`` out of that ordering and
    the two mean removals: about 15 library launches (on CuPy the same
    steps run as five CUDA kernels, :class:`RawCondensedSolve`), reading
    ``8 (G m^2 + G m s_max + |S|^2)`` bytes and the (small) CSR and index
    arrays (:attr:`CoarseSolver.nbytes`).  With groups of ``m`` unknowns of
    a 2D-like graph, ``|S|`` is about ``2 n / sqrt(m)`` (one-sided
    separators), so the solve reads ``O(n m + n^2 / m)`` bytes instead of
    ``8 n^2``: for the ``levelset_subdomains`` space of 128 x 128 blocks
    (``k = 17064``) and groups of 256, 70 MB (``|S| = 1780``) instead of
    2.3 GB.

The factorisations (batched inverses, batched Schur products, the dense
Cholesky) are backend operations: on CuPy they run on the GPU.  The set-up
only loops in Python for the partition (index bookkeeping on the host).
"""
from __future__ import annotations

import contextlib
import time
import warnings

import numpy as np
import scipy.sparse as sp

from ...compute import cuda
from ...compute.blas import single_threaded
from ...compute.backend import backend_of
from ...compute.transfer import on_device, to_host, upload
from ...compute.twins import twin

__all__ = ["CoarseSolver", "partition_groups", "separator_mask", "gauss_jordan_inverse"]

SEPARATORS = ("one-sided", "two-sided")

#: Largest ``n`` factorised densely (see the module docstring).  Below it the
#: dense set-up costs a little more and saves time every iteration; well above
#: it the dense set-up costs several times the condensed one for almost no
#: gain per iteration (measured: docs/performance.md, "Figures behind code
#: choices").
DENSE_LIMIT = 2048


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
    dense_limit : int, default :data:`DENSE_LIMIT`
        Up to this many grounded unknowns ``n`` the inverse is stored densely
        (mode ``"dense"``); beyond it static condensation is used (mode
        ``"condensed"``).
    groups : int array (k,) or (n,), optional
        Condensed mode: a group id per coarse unknown (any integers, e.g. a
        tile of subdomains).  Unknowns of one group share a dense block.  The
        entry of the grounded unknown (the last one when ``singular``) is
        ignored.  Default: :func:`partition_groups` with ``group_size``.
    group_size : int, default 256
        Target size of the groups found when ``groups`` is None.
    separator : {"one-sided", "two-sided"}, default "one-sided"
        How the separator is chosen, see :func:`separator_mask`.  Both give
        the same answer; ``"one-sided"`` gives a separator about half as
        large (a Schur complement about four times smaller).
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

    def __init__(self, E, singular, backend, dense_limit=DENSE_LIMIT, groups=None,
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
        self.dense_limit = int(dense_limit)
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
            K, flags = _dense_inverse(backend, E_backend, self.n, self.singular)
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
        if not flags:
            return
        if values is None:
            values = self.backend.to_host_many([f for f, _ in flags])
        for (_, size), got in zip(flags, values):
            potrf, potrs, nonfinite = (int(v) for v in np.asarray(got).ravel()[:3])
            for routine, info in (("potrf", potrf), ("potrs", potrs)):
                if info != 0:
                    raise _not_spd(size, np.linalg.LinAlgError(
                        f"Error reported by {routine} in cuSOLVER. devInfo = {info}. "
                        f"Please refer to the cuSOLVER documentation."))
            if nonfinite:
                raise np.linalg.LinAlgError(
                    f"coarse matrix ({size} x {size}): the inverse is not finite")

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
        Minv = _spd_inverse(self.backend, xp.ascontiguousarray(Md))
        del Md
        self._K = _grounded_inverse(Minv, self.k, xp) if self.singular else Minv
        self.nbytes = int(self._K.nbytes)

    # -------------------------------------------------------------- condensed
    def _setup_condensed(self, entries, groups, group_size, separator):
        nb = self._condensed_numbering(entries, groups, group_size, separator)
        n, nS, Gb, m, smax, GbM = self.n, nb["nS"], nb["Gb"], nb["m"], nb["smax"], nb["GbM"]
        self.n_separator, self.n_groups, self.block_size, self.separator_width = nS, Gb, m, smax
        if nS > self.separator_warn:
            warnings.warn(f"coarse solve: the separator has {nS} unknowns (n = {n}, {Gb} groups "
                          f"of up to {m} interior unknowns); its dense Schur complement takes "
                          f"{8 * nS * nS / 2**20:.0f} MiB. Larger or better-shaped groups give "
                          f"a smaller separator.", RuntimeWarning, stacklevel=3)

        host, has_esi = self._condensed_host_arrays(nb)
        dev = _upload(self.backend, host)
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

    def _condensed_numbering(self, entries, groups, group_size, separator):
        """Groups, separator and the numbering of the condensed layout: the
        separator unknowns, the interiors grouped and padded to ``m``, and the
        separator unknowns next to each group (host arrays, in a dict)."""
        n = self.n
        r, c, v = entries
        if groups is None:
            grp = partition_groups(sp.csr_matrix((v, (r, c)), shape=(n, n)), group_size)
        else:
            grp = np.asarray(self.backend.to_host(groups)).ravel()
            if grp.size not in (self.k, n):
                raise ValueError(f"groups has {grp.size} entries; expected {self.k} (or {n})")
            grp = _dense_ids(grp[:n])
        self.groups = grp
        sep = _separator_of_entries(r, c, v, grp, n, separator)

        # Separator numbering, interior numbering (grouped, padded to m).
        S = np.flatnonzero(sep)
        nS = S.size
        spos = np.full(n, -1, dtype=np.int64)
        spos[S] = np.arange(nS)
        interior = np.flatnonzero(~sep)
        interior = interior[np.argsort(grp[interior], kind="stable")]
        counts = np.bincount(grp[interior], minlength=int(grp.max()) + 1 if grp.size else 0)
        present = np.flatnonzero(counts)             # = np.unique(..., return_counts=True)
        counts = counts[present]
        Gb = present.size
        m = int(counts.max()) if Gb else 0
        slot = np.full(int(grp.max()) + 1, -1, dtype=np.int64)
        slot[present] = np.arange(Gb)
        first = np.zeros(Gb, dtype=np.int64)
        first[1:] = np.cumsum(counts)[:-1]
        bpos = np.full(n, -1, dtype=np.int64)        # batch slot of an interior unknown
        lpos = np.full(n, -1, dtype=np.int64)        # its row in the block
        bpos[interior] = slot[grp[interior]]
        lpos[interior] = np.arange(interior.size) - first[bpos[interior]]
        ipos = bpos * m + lpos                       # padded position (interior only)
        GbM = Gb * m

        rs, cs = sep[r], sep[c]

        # Separator unknowns next to each interior: (slot, separator) pairs.
        mis = ~rs & cs
        key = bpos[r[mis]] * max(nS, 1) + spos[c[mis]]
        ukey = _sorted_unique(key)
        ub, uj = ukey // max(nS, 1), ukey % max(nS, 1)
        per = np.bincount(ub, minlength=Gb) if Gb else np.zeros(0, dtype=np.int64)
        smax = int(per.max()) if per.size else 0
        ufirst = np.zeros(Gb, dtype=np.int64)
        if Gb:
            ufirst[1:] = np.cumsum(per)[:-1]
        ulocal = np.arange(ukey.size) - ufirst[ub]
        sidx = np.zeros((Gb, smax), dtype=np.int64)
        sidx[ub, ulocal] = uj
        elocal = ulocal[np.searchsorted(ukey, key)]

        return dict(r=r, c=c, v=v, S=S, nS=nS, spos=spos, interior=interior, counts=counts,
                    Gb=Gb, m=m, bpos=bpos, lpos=lpos, ipos=ipos, GbM=GbM, rs=rs, cs=cs, mis=mis,
                    sidx=sidx, smax=smax, elocal=elocal)

    def _condensed_host_arrays(self, nb):
        """Every index and value array the device needs, built on the host
        (sent in one transfer): ``(host dict, has_esi)``."""
        r, c, v, S, nS, spos, interior, counts, Gb, m = (
            nb[key] for key in ("r", "c", "v", "S", "nS", "spos", "interior", "counts", "Gb", "m"))
        bpos, lpos, ipos, GbM, rs, cs, mis, sidx, smax, elocal = (
            nb[key] for key in ("bpos", "lpos", "ipos", "GbM", "rs", "cs", "mis", "sidx", "smax",
                                "elocal"))
        n = self.n
        # Every index and value array the device needs, built on the host
        # first and sent in one transfer (each separate small copy has a fixed
        # cost; measured: docs/performance.md).
        host = {}
        if Gb:
            mii = ~rs & ~cs
            host["b_idx"] = bpos[r[mii]] * m * m + lpos[r[mii]] * m + lpos[c[mii]]
            host["b_val"] = v[mii]
            pb, pl = np.nonzero(np.arange(m)[None, :] >= counts[:, None])
            host["pad"] = pb * m * m + pl * (m + 1)
            host["valid"] = (np.arange(m)[None, :] < counts[:, None]).astype(np.float64)
        if nS:
            mss = rs & cs
            host["s_idx"] = spos[r[mss]] * nS + spos[c[mss]]
            host["s_val"] = v[mss]
            if Gb and smax:
                host["c_idx"] = bpos[r[mis]] * m * smax + lpos[r[mis]] * smax + elocal
                host["c_val"] = v[mis]
                host["sidx"] = sidx.ravel().astype(np.int32)
        # M_SI in CSR, columns in the padded interior layout.
        msi = rs & ~cs
        has_esi = bool(Gb and nS and np.any(msi))
        if has_esi:
            # M has no duplicate entries: CSR directly (rows, then columns, sorted).
            er, ec, ev = spos[r[msi]], ipos[c[msi]], v[msi]
            order = np.lexsort((ec, er))
            indptr = np.zeros(nS + 1, dtype=np.int64)
            np.cumsum(np.bincount(er, minlength=nS), out=indptr[1:])
            host["esi_data"] = ev[order]
            host["esi_indices"] = ec[order].astype(np.int32)
            host["esi_indptr"] = indptr.astype(np.int32)
        # Gathers into (interior padded | separator) and back (| grounded zero).
        take_in = np.zeros(GbM + nS, dtype=np.int64)
        take_in[ipos[interior]] = interior
        take_in[GbM:] = S
        take_out = np.empty(self.k, dtype=np.int64)
        take_out[interior] = ipos[interior]
        take_out[S] = GbM + spos[S]
        take_out[n:] = GbM + nS                      # the grounded unknown: the zero slot
        host["take_in"] = take_in.astype(np.int32)
        host["take_out"] = take_out.astype(np.int32)
        return host, has_esi

    def _condensed_factors(self, dev, nS, Gb, m, smax):
        """Interior block inverses, ``F`` and the inverse Schur complement from
        the uploaded arrays ``dev``; returns the arrays stored."""
        xp = self._xp
        stored = []
        with _linalg_errors(self.backend):
            # Interior blocks, padded with the identity, inverted as a batch.
            if Gb:
                B = xp.zeros(Gb * m * m, dtype=self._dtype)
                B[dev["b_idx"]] = dev["b_val"]
                B[dev["pad"]] = 1.0
                B = B.reshape(Gb, m, m)
                Binv = _batched_spd_inverse(self.backend, B, overwrite=True)
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
                self._Sinv, flags = _spd_inverse_deferred(self.backend, Sc, overwrite=True)
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
        """True in mode ``"dense"`` (the old :class:`deflation.CoarseSolver` flag)."""
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


# ---------------------------------------------------------------------- partition
def partition_groups(M, group_size=256):
    """Split the unknowns of a sparse symmetric matrix into compact groups.

    Recursive bisection in reverse Cuthill-McKee order: a part is ordered by
    :func:`scipy.sparse.csgraph.reverse_cuthill_mckee` (of its own subgraph)
    and cut in two at the position that keeps the group counts balanced,
    until ``ceil(n / group_size)`` groups remain.  On a 2D-like graph the
    parts come out compact, with a boundary of about ``4 sqrt(group_size)``
    (consecutive chunks of one global RCM order would be thin strips whose
    unknowns nearly all lie on a boundary).

    Parameters
    ----------
    M : scipy.sparse matrix (n x n)
        Structurally symmetric.
    group_size : int
        Target number of unknowns per group.

    Returns
    -------
    groups : ndarray of int64 (n,)
        Group id of each unknown, ``0 .. ceil(n / group_size) - 1``.
    """
    from scipy.sparse.csgraph import reverse_cuthill_mckee

    M = sp.csr_matrix(M)
    n = M.shape[0]
    groups = np.zeros(n, dtype=np.int64)
    count = max(1, -(-n // max(int(group_size), 1)))
    stack = [(np.arange(n), count)]
    next_id = 0
    while stack:
        idx, g = stack.pop()
        if g <= 1 or idx.size <= 1:
            groups[idx] = next_id
            next_id += 1
            continue
        sub = M[idx][:, idx].tocsr()
        order = idx[reverse_cuthill_mckee(sub, symmetric_mode=True)]
        g1 = g // 2
        cut = int(round(idx.size * g1 / g))
        stack.append((order[cut:], g - g1))
        stack.append((order[:cut], g1))
    return groups


def separator_mask(M, groups, separator="one-sided"):
    """Unknowns that separate the groups (no coupling joins two interiors).

    Parameters
    ----------
    M : scipy.sparse matrix (n x n), symmetric
    groups : int array (n,)
    separator : {"one-sided", "two-sided"}
        ``"two-sided"``: every unknown coupled (nonzero off-diagonal entry)
        to an unknown of another group.  ``"one-sided"``: of each such
        coupled pair only the unknown of the group with the larger id; it
        still cuts every coupling between groups, with about half the
        unknowns.

    Returns
    -------
    mask : bool ndarray (n,)
    """
    if separator not in SEPARATORS:
        raise ValueError(f"unknown separator {separator!r}; expected one of {SEPARATORS}")
    C = sp.coo_matrix(M)
    return _separator_of_entries(C.row, C.col, C.data, np.asarray(groups), M.shape[0], separator)


def _separator_of_entries(r, c, data, groups, n, separator):
    """:func:`separator_mask` from the entries ``(r, c, data)`` of ``M`` (n x n)."""
    if separator not in SEPARATORS:
        raise ValueError(f"unknown separator {separator!r}; expected one of {SEPARATORS}")
    keep = data != 0
    r, c = r[keep], c[keep]
    gr, gc = groups[r], groups[c]
    cut = gr != gc
    mask = np.zeros(n, dtype=bool)
    if separator == "two-sided":
        mask[r[cut]] = True
        mask[c[cut]] = True
    else:
        mask[np.where(gr[cut] > gc[cut], r[cut], c[cut])] = True
    return mask


# ---------------------------------------------------------------------- helpers
def _dense_ids(a):
    """Ids ``0 .. G-1`` in the order of the distinct values of the integer
    array ``a`` (``np.unique(a, return_inverse=True)[1]``), int64; by an
    occupancy table when the values are small non-negative integers (the
    set-up's group ids: no sort)."""
    a = np.asarray(a).ravel()
    if a.size and np.issubdtype(a.dtype, np.integer):
        lo, hi = int(a.min()), int(a.max())
        if lo >= 0 and hi < 4 * a.size + 1024:
            present = np.zeros(hi + 1, dtype=bool)
            present[a] = True
            return (np.cumsum(present) - 1)[a].astype(np.int64)
    return np.unique(a, return_inverse=True)[1].ravel().astype(np.int64)


def _sorted_unique(a):
    """``np.unique(a)`` for a 1D integer array by one sort."""
    a = np.sort(np.asarray(a).ravel())
    if a.size == 0:
        return a
    return a[np.concatenate(([True], a[1:] != a[:-1]))]


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
    if sp.issparse(E):
        return sp.csr_matrix(E)
    return sp.csr_matrix(to_host(E, backend_of(E)))


@twin
def _linalg_errors(backend):
    """A context in which a failed factorisation raises (NumPy does)."""
    return contextlib.nullcontext()


@_linalg_errors.register("cupy")
def _linalg_errors_cupy(backend):
    import cupyx

    return cupyx.errstate(linalg="raise")      # CuPy only checks its info flags when asked


def _not_spd(n, exc):
    return np.linalg.LinAlgError(f"coarse matrix ({n} x {n}) is not positive definite "
                                 f"after grounding: {exc}")


@twin
def _unsymmetrised_inverse(backend, A):
    """The inverse of the SPD backend matrix ``A`` by Cholesky (the host:
    LAPACK's ``potrf`` and ``potri``, the lower triangle mirrored; its CuPy
    twin is :func:`_posv_inverse`)."""
    from scipy.linalg import lapack

    n = A.shape[0]
    # Small orders on one BLAS thread (compute/blas.py: threads that wait
    # for each other on a busy small machine cost far more than they share).
    with single_threaded(n):
        factor, info = lapack.dpotrf(A, lower=True, clean=False)
        if info > 0:
            raise _not_spd(n, f"{info}-th leading minor not positive definite")
        if info < 0:
            raise ValueError(f"potrf: illegal argument {-info}")
        inv, info = lapack.dpotri(factor, lower=True)
        if info != 0:
            raise _not_spd(n, f"potri info {info}")
    lower = np.tril(inv)
    lower += np.tril(inv, -1).T
    return lower


@_unsymmetrised_inverse.register("cupy")
def _posv_inverse(backend, A):
    """cuSOLVER's ``posv`` with the identity (the factorisation and two
    triangular solves: faster than Cholesky, a triangular inverse and a
    product; docs/performance.md); a failed factorisation raises."""
    import cupyx
    from cupyx import lapack

    n = A.shape[0]
    with cupyx.errstate(linalg="raise"):
        try:
            return lapack.posv(A, backend.xp.eye(n, dtype=A.dtype))
        except np.linalg.LinAlgError as exc:
            raise _not_spd(n, exc) from None


def _spd_inverse(backend, A):
    """Symmetric inverse of the SPD backend matrix ``A`` (which may be
    overwritten): :func:`_unsymmetrised_inverse`, then made exactly
    symmetric."""
    xp = backend.xp
    n = A.shape[0]
    inv = _unsymmetrised_inverse(backend, A)
    inv += inv.T.copy()
    inv *= 0.5
    if not bool(xp.isfinite(inv).all()):
        raise np.linalg.LinAlgError(f"coarse matrix ({n} x {n}): the inverse is not finite")
    return inv


@twin
def _spd_inverse_deferred(backend, A, overwrite=False):
    """``(inverse, flags)``: :func:`_spd_inverse` of the SPD backend matrix
    ``A`` (exactly symmetric; overwritten with ``overwrite``), its failures
    raised now (NumPy: ``flags`` is empty); the CuPy twin
    (:func:`_spd_inverse_cuda`) defers them to :meth:`CoarseSolver.check`."""
    return _spd_inverse(backend, A), []


def _posv_identity(A, overwrite):
    """cuSOLVER's ``potrf`` and ``potrs`` with the identity, as
    ``cupyx.lapack.posv(A, I)`` calls them (the same routines, arguments and
    workspace: the same bits), without its host check of ``devInfo``:
    ``(X, info)``, ``X`` column-major, ``info`` int32 ``[potrf, potrs, 0]`` on
    the device.  ``A`` is exactly symmetric, so its row-major array is the
    column-major copy ``posv`` makes; with ``overwrite`` it is factorised in
    place."""
    import cupy
    from cupy_backends.cuda.libs import cublas, cusolver

    n = A.shape[0]
    a = A if overwrite and A.flags.c_contiguous else cupy.array(A, dtype=np.float64, copy=True)
    handle = cupy.cuda.device.get_cusolver_handle()
    cusolver.setStream(handle, cupy.cuda.get_current_stream().ptr)    # (a side stream too)
    uplo = cublas.CUBLAS_FILL_MODE_LOWER
    info = cupy.zeros(3, dtype=np.int32)
    worksize = cusolver.dpotrf_bufferSize(handle, uplo, n, a.data.ptr, n)
    work = cupy.empty(worksize, dtype=np.float64)
    cusolver.dpotrf(handle, uplo, n, a.data.ptr, n, work.data.ptr, worksize, info.data.ptr)
    x = cupy.eye(n, dtype=np.float64)               # symmetric: its own column-major copy
    cusolver.dpotrs(handle, uplo, n, n, a.data.ptr, n, x.data.ptr, n, info.data.ptr + 4)
    return x, info


@cuda.kernel_cache
def _dense_kernel(name):
    return cuda.function(cuda.source(__name__, "coarse_dense.cu"), name,
                         options=("-std=c++14", "--fmad=false"))


def _blocks(count, threads=256):
    return (max(1, -(-int(count) // threads)),)


@_spd_inverse_deferred.register("cupy")
def _spd_inverse_cuda(backend, A, overwrite=False):
    n = A.shape[0]
    if A.dtype != np.float64 or A.ndim != 2 or n == 0:
        return NotImplemented
    x, info = _posv_identity(A, overwrite)
    inv = backend.xp.empty((n, n), dtype=np.float64)
    _dense_kernel("bf_coarse_inverse")(_blocks(n * n), (256,),
                                       (x, np.int32(n), np.int32(n), inv, info[2:]))
    return inv, [(info, n)]


@twin
def _dense_inverse(backend, E_backend, n, singular):
    """``(K, flags)`` of the dense mode from ``E`` on the backend (exactly
    symmetric, canonical CSR): ``K = E^+`` (singular: grounded, then both
    projections) or ``E^-1``.  The array code raises its failures now
    (``flags`` empty); the CuPy twin (:func:`_dense_inverse_cuda`, a few
    kernels around cuSOLVER, equal bit for bit) defers them."""
    xp = backend.xp
    k = E_backend.shape[0]
    Md = E_backend.toarray()[:n, :n]
    Md += Md.T.copy()
    Md *= 0.5
    Minv = _spd_inverse(backend, xp.ascontiguousarray(Md))
    del Md
    return (_grounded_inverse(Minv, k, xp) if singular else Minv), []


def _grounded_inverse(Minv, k, xp):
    """``P K P`` (``k x k``, exactly symmetric) for a singular ``E`` from the
    inverse ``Minv`` of its grounded leading block: the pseudo-inverse the
    deflation applies."""
    n = Minv.shape[0]
    K = xp.zeros((k, k), dtype=np.float64)
    K[:n, :n] = Minv
    c = K.mean(axis=1)                 # P K P, K symmetric
    K -= c[:, None]
    K -= c[None, :]
    K += c.mean()
    K += K.T.copy()
    K *= 0.5
    return K


@_dense_inverse.register("cupy")
def _dense_inverse_cuda(backend, E_backend, n, singular):
    xp = backend.xp
    k = E_backend.shape[0]
    i32 = np.int32
    D = xp.zeros((n, n), dtype=np.float64)
    _dense_kernel("bf_coarse_scatter")(_blocks(n), (256,),
                                       (E_backend.indptr, E_backend.indices, E_backend.data,
                                        i32(n), D))
    M = xp.empty((n, n), dtype=np.float64)
    _dense_kernel("bf_coarse_symmetric")(_blocks(n * n), (256,), (D, i32(n), M))
    del D
    x, info = _posv_identity(M, overwrite=True)
    del M
    K = xp.empty((k, k), dtype=np.float64)
    _dense_kernel("bf_coarse_inverse")(_blocks(k * k), (256,), (x, i32(n), i32(k), K, info[2:]))
    del x
    if singular:
        c = K.mean(axis=1)             # as the array code: its reduction, its order
        cm = c.mean()
        _dense_kernel("bf_coarse_project")(_blocks(k * k), (256,), (K, c, cm, i32(k)))
    return K, [(info, n)]


# ------------------------------------------------- the dense mode's product
# The host scalars of the dense coarse product (cuBLAS reads them at the call;
# a CUDA graph holds their values at the capture).
_ONE, _ZERO = np.ones(1), np.zeros(1)
#: Bytes of the workspace of the capturable product (cuBLAS's own default
#: workspace on Hopper is this size).
GEMM_WORKSPACE = 32 * 2 ** 20


def gemm_operand(a):
    """Can :func:`dense_product` pass ``a`` to cuBLAS as it is (float64,
    C-contiguous)?"""
    return a.dtype == np.float64 and a.flags.c_contiguous


class GemmCall:
    """One product ``e = K g`` with fixed arguments (:func:`dense_product`):
    a callable; a CUDA graph may hold it where ``capturable``."""

    __slots__ = ("gemm", "args")

    def __init__(self, gemm, args):
        self.gemm, self.args = gemm, args

    @property
    def capturable(self):
        return self.gemm.capturable

    def __call__(self):
        self.gemm.call(self.args)


class _CupyGemm:
    """``gemmEx`` through CuPy's wrapper (which sets the handle's stream to
    the current one, and refuses to run during a stream capture)."""

    capturable = False

    def __init__(self, gemmex, handle):
        self.gemmex, self.handle = gemmex, handle

    def call(self, args):
        self.gemmex(self.handle, *args)


class _DirectGemm:
    """``cublasGemmEx`` through cuBLAS's C entry points on a handle of its
    own, whose stream is set to the current one (the capturing stream
    during a capture) and whose workspace to a buffer of its own before
    every call (setting the stream resets it to cuBLAS's pool, which would
    allocate during a capture): a CUDA graph may hold the call."""

    capturable = True

    def __init__(self, lib, handle, workspace):
        self.lib, self.handle, self.workspace = lib, handle, workspace

    def call(self, args):
        import cupy

        lib, handle, ws = self.lib, self.handle, self.workspace
        status = (lib.cublasSetStream_v2(handle, cupy.cuda.get_current_stream().ptr)
                  or lib.cublasSetWorkspace_v2(handle, ws.data.ptr, ws.nbytes)
                  or lib.cublasGemmEx(handle, *args))
        if status:
            raise RuntimeError(f"cuBLAS status {status} in the dense coarse product")


def dense_product(K, g, e):
    """``e = K g`` (``K`` a ``k x k`` C-contiguous float64 matrix, ``g`` and
    ``e`` contiguous): a callable that makes the call ``cupy.dot(K, g,
    out=e)`` makes, cuBLAS ``gemmEx`` with the same arguments (so the same
    bits), without CuPy's checks around it (they cost more than the product
    at the sizes of a coarse solve): a :class:`GemmCall`, capturable where
    :func:`dense_gemm` found cuBLAS's entry points.  Where neither call can
    be made here, or gives other bits than ``cupy.dot``, ``cupy.dot`` (not
    captured)."""
    import cupy

    gemm = dense_gemm()
    if gemm is None or not (gemm_operand(K) and g.flags.c_contiguous and e.flags.c_contiguous):
        dot = cupy.dot
        return lambda: dot(K, g, out=e)
    return GemmCall(gemm, _gemm_args(K, g, e))


def _gemm_args(K, g, e):
    """``gemmEx``'s arguments after the handle for ``e = K g``: C^T = g^T K^T
    with K^T read column-major, as ``cupy.dot`` passes them
    (``cupy._core._routines_linalg.tensordot_core_v11``)."""
    from cupy_backends.cuda.api import runtime
    from cupy_backends.cuda.libs import cublas
    import cupy

    k = int(K.shape[0])
    algo = (cublas.CUBLAS_GEMM_DEFAULT_TENSOR_OP
            if int(cupy.cuda.Device().compute_capability) >= 80 else cublas.CUBLAS_GEMM_DEFAULT)
    r64 = runtime.CUDA_R_64F
    return (1, 0, 1, k, k, _ONE.ctypes.data, g.data.ptr, r64, k, K.data.ptr, r64, k,
            _ZERO.ctypes.data, e.data.ptr, r64, 1, cublas.CUBLAS_COMPUTE_64F, algo)


_DENSE_GEMM = {}


def dense_gemm():
    """The ``gemmEx`` of :func:`dense_product` on this device (built and
    checked once): cuBLAS's entry points on a handle of its own
    (``capturable``), else CuPy's wrapper, each only where it gives
    ``cupy.dot``'s bits on a few products (the first also replayed from a
    CUDA graph); None where neither does."""
    import cupy

    dev = cupy.cuda.Device().id
    if dev not in _DENSE_GEMM:
        _DENSE_GEMM[dev] = None
        for make in (_direct_gemm, _cupy_gemm):
            try:
                gemm = make()
                if _gives_dot_bits(gemm):
                    _DENSE_GEMM[dev] = gemm
                    break
            except Exception:            # not here (another CuPy, or no entry points)
                continue
    return _DENSE_GEMM[dev]


def _cupy_gemm():
    import cupy
    from cupy_backends.cuda.libs import cublas

    return _CupyGemm(cublas.gemmEx, cupy.cuda.device.get_cublas_handle())


def _direct_gemm():
    import ctypes

    import cupy
    from cupy_backends.cuda.libs import cublas

    cupy.cuda.device.get_cublas_handle()         # cuBLAS loaded: find the library CuPy uses
    with open("/proc/self/maps") as maps:
        paths = [line.split()[-1] for line in maps if "/libcublas.so" in line]
    lib = ctypes.CDLL(paths[0])
    vp, i = ctypes.c_void_p, ctypes.c_int
    lib.cublasSetStream_v2.argtypes = [vp, vp]
    lib.cublasSetWorkspace_v2.argtypes = [vp, vp, ctypes.c_size_t]
    lib.cublasGemmEx.argtypes = [vp, i, i, i, i, i, vp, vp, i, i, vp, i, i, vp, vp, i, i, i, i]
    for fn in (lib.cublasSetStream_v2, lib.cublasSetWorkspace_v2, lib.cublasGemmEx):
        fn.restype = i
    return _DirectGemm(lib, cublas.create(), cupy.empty(GEMM_WORKSPACE, dtype=cupy.uint8))


def _gives_dot_bits(gemm):
    """Does ``gemm`` give ``cupy.dot``'s bits (called, and replayed from a
    CUDA graph where it is capturable)?"""
    import cupy

    rng = np.random.default_rng(0)
    stream = cupy.cuda.Stream(non_blocking=True) if gemm.capturable else None
    for k in (37, 300, 900):
        K = cupy.asarray(rng.standard_normal((k, k)))
        g = cupy.asarray(rng.standard_normal(k))
        want = cupy.dot(K, g)
        got = cupy.full(k, np.nan)
        call = GemmCall(gemm, _gemm_args(K, g, got))
        call()
        if not bool((want == got).all()):
            return False
        if stream is not None:
            with stream:
                stream.begin_capture()
                try:
                    call()
                finally:
                    graph = stream.end_capture()
            got.fill(np.nan)
            graph.launch()
            if not bool((want == got).all()):
                return False
    return True


def gauss_jordan_inverse(B):
    """Inverses of a batch of SPD matrices ``(G, m, m)`` by Gauss-Jordan
    elimination without pivoting (NumPy): the reference of the GPU kernel.

    Pivots of an SPD matrix are the diagonals of its successive Schur
    complements, all positive: no pivoting is needed.
    """
    A = np.array(B, dtype=np.float64, copy=True)
    m = A.shape[-1]
    for k in range(m):
        piv = 1.0 / A[:, k, k]
        col = A[:, :, k].copy()
        row = A[:, k, :] * piv[:, None]
        A -= col[:, :, None] * row[:, None, :]
        A[:, k, :] = row
        A[:, :, k] = -col * piv[:, None]
        A[:, k, k] = piv
    return A


class RawCondensedSolve:
    """The condensed solve of a :class:`CoarseSolver` as five CUDA kernels.

    The backend path (:meth:`CoarseSolver._solve_condensed`, its twin, also
    what NumPy runs) takes about 15 library launches of tiny kernels, whose
    cost shows in every fused iteration (measured: docs/performance.md).  Here:
    the mean of ``s`` (singular ``E``), the interior block products (a
    block per group), the separator (every block forms its right-hand side
    in shared memory, then a warp per row of ``Sc^-1``), the back
    substitution into the interiors, and the gather out with the mean
    removal.  ``solve`` queues work only (no synchronisation); its scratch
    buffers are allocated once.
    """

    @classmethod
    def for_solver(cls, solver):
        """The raw solve of ``solver``, or None when its separator does not
        fit in one block's shared memory."""
        import cupy

        need = 8 * solver.n_separator
        limit = cupy.cuda.Device().attributes["MaxSharedMemoryPerBlockOptin"]
        if need > limit or 8 * solver.block_size > limit:
            return None
        return cls(solver)

    def __init__(self, solver):
        import cupy

        mod = _condensed_module()
        self.k_mean = mod.get_function("bf_cs_mean")
        self.k_block = mod.get_function("bf_cs_block")
        self.k_sep = mod.get_function("bf_cs_separator")
        self.k_back = mod.get_function("bf_cs_back")
        self.k_out = mod.get_function("bf_cs_out")
        for kern, nbytes in ((self.k_block, 8 * solver.block_size),
                             (self.k_sep, 8 * solver.n_separator)):
            if nbytes > 48 * 1024:
                kern.max_dynamic_shared_size_bytes = nbytes
        self.solver = solver
        self.singular = bool(solver.singular)
        self.t = cupy.empty(solver.interior_size, dtype=np.float64)
        self.yS = cupy.empty(solver.n_separator, dtype=np.float64)
        self.mean = cupy.zeros(1, dtype=np.float64)
        (data, indices, indptr), _ = solver._esi_parts
        self.esi = (indptr.astype(cupy.int32, copy=False), indices.astype(cupy.int32, copy=False),
                    data.astype(cupy.float64, copy=False))

    def gather_operands(self):
        """What a caller that does the gather itself (``solve(gather=False)``)
        reads: ``(t, yS, take_out, interior size, separator size, singular)``,
        the last three as int32 kernel arguments."""
        c = self.solver
        return (self.t, self.yS, c.take_out, np.int32(c.interior_size), np.int32(c.n_separator),
                np.int32(self.singular))

    def solve(self, s, out, gather=True):
        """``out = E^+ s`` (float64, contiguous, not sharing memory with ``s``).

        ``gather=False`` (the fused iteration, :mod:`bubbleflow.linalg.fused.engine`) stops
        before the gather into ``out``, which the caller then does from
        :attr:`t` and :attr:`yS` with ``take_out`` (and the mean removal), as
        ``bf_cs_out`` does.
        """
        for kern, grid, block, args, shared in self.launches(s, out, gather):
            kern(grid, block, args, shared_mem=shared)
        return out

    def launches(self, s, out, gather=True):
        """The kernel launches of :meth:`solve` as ``(kernel, grid, block,
        args, shared_mem)`` tuples, in order: for a caller that launches
        them itself (the fused engine keeps them for every iteration and
        captures them in its CUDA graphs)."""
        c = self.solver
        Gb, m, nS, GbM, k = c.n_groups, c.block_size, c.n_separator, c.interior_size, c.k
        out_list = []
        mean = np.uint64(0)
        if self.singular:
            out_list.append((self.k_mean, (1,), (1024,), (s, np.int32(k), self.mean), 0))
            mean = self.mean
        rows = (m + 31) // 32                         # 32 warps a block, a warp a row
        out_list.append((self.k_block, (Gb, rows), (1024,),
                         (s, c._take_in, mean, c._Binv, self.t, np.int32(m)), 8 * m))
        indptr, indices, data = self.esi
        out_list.append((self.k_sep, ((nS + 31) // 32,), (1024,),
                         (s, c._take_in, mean, np.int32(GbM), np.int32(nS), indptr, indices,
                          data, self.t, c._Sinv, self.yS), 8 * nS))
        out_list.append((self.k_back, (Gb, rows), (1024,),
                         (self.t, c._F, self.yS, c._sidx, np.int32(m),
                          np.int32(c.separator_width)), 0))
        if gather:
            out_list.append((self.k_out, (1,), (1024,),
                             (self.t, self.yS, c.take_out, np.int32(k), np.int32(GbM),
                              np.int32(nS), np.int32(self.singular), out), 0))
        return out_list


@cuda.kernel_cache
def _condensed_module():
    return cuda.module(cuda.source(__name__, "coarse_condensed.cu"), options=("-std=c++14",))


@cuda.kernel_cache
def _gj_kernel():
    return cuda.raw_kernel(cuda.source(__name__, "gauss_jordan.cu"), "bf_gauss_jordan")


def _upload(backend, arrays):
    """:func:`bubbleflow.compute.transfer.upload`."""
    return upload(backend, arrays)


@twin
def _batched_spd_inverse(backend, B, overwrite=False):
    """Inverses of the SPD batch ``B`` (G, m, m): a new array, or ``B``
    itself overwritten with ``overwrite`` (on the GPU path).

    The library's batched inverse; on the GPU (:func:`_gauss_jordan_cuda`)
    one thread block inverts one matrix in shared memory.
    """
    return backend.xp.linalg.inv(B)


@_batched_spd_inverse.register("cupy")
def _gauss_jordan_cuda(backend, B, overwrite=False):
    """One thread block per matrix, in shared memory (:func:`gauss_jordan_inverse`
    is its NumPy twin): cuBLAS' batched LU is built for tiny matrices and took
    milliseconds here.  Matrices too big for shared memory: ``NotImplemented``
    (the library's batched inverse)."""
    import cupy

    xp = backend.xp
    G, m, _ = B.shape
    if not (G and m):
        return NotImplemented
    need = 8 * (m * m + 2 * m)
    limit = cupy.cuda.Device().attributes["MaxSharedMemoryPerBlockOptin"]
    if need > limit:
        return NotImplemented
    kern = _gj_kernel()
    if need > 48 * 1024:
        kern.max_dynamic_shared_size_bytes = need
    out = xp.ascontiguousarray(B, dtype=xp.float64)
    if out is B and not overwrite:
        out = B.copy()
    kern((G,), (1024,), (out, np.int32(m)), shared_mem=need)
    return out


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
