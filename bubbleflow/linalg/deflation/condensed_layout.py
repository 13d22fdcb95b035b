"""The layout of the condensed coarse solve: its numbering and index arrays.

Static condensation (:class:`~bubbleflow.linalg.deflation.coarse.CoarseSolver`,
mode ``"condensed"``) orders the grounded unknowns as the interiors of the
groups, each padded to the largest (``m``), then the separator, then a zero
slot for the grounded unknown.  This module does that index work on the
host from the entries of the grounded matrix: the groups and the separator
(:mod:`~bubbleflow.linalg.deflation.graph_partition`), the positions of
every unknown, and the scatter indices and values of the interior blocks,
the couplings to the separator, ``M_SS``, ``M_SI`` (CSR) and the gathers in
and out of the condensed ordering, all sent to the device in one transfer.
"""
from __future__ import annotations

import numpy as np

from .graph_partition import partition_groups, separator_of_entries

__all__ = ["condensed_numbering", "condensed_host_arrays"]


def condensed_numbering(entries, n, k, groups, group_size, separator, backend):
    """Groups, separator and the numbering of the condensed layout: the
    groups of the ``n`` grounded unknowns (``groups``: given, a group id per
    unknown of the ``k``, or found by :func:`partition_groups`), the
    separator unknowns, the interiors grouped and padded to ``m``, and the
    separator unknowns next to each group (host arrays, in a dict)."""
    r, c, v = entries
    if groups is None:
        import scipy.sparse as sp

        grp = partition_groups(sp.csr_matrix((v, (r, c)), shape=(n, n)), group_size)
    else:
        grp = np.asarray(backend.to_host(groups)).ravel()
        if grp.size not in (k, n):
            raise ValueError(f"groups has {grp.size} entries; expected {k} (or {n})")
        grp = _dense_ids(grp[:n])
    sep = separator_of_entries(r, c, v, grp, n, separator)

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

    return dict(groups=grp, r=r, c=c, v=v, S=S, nS=nS, spos=spos, interior=interior, counts=counts,
                Gb=Gb, m=m, bpos=bpos, lpos=lpos, ipos=ipos, GbM=GbM, rs=rs, cs=cs, mis=mis,
                sidx=sidx, smax=smax, elocal=elocal)


def condensed_host_arrays(nb, n, k):
    """Every index and value array the device needs, built on the host
    (sent in one transfer) from the numbering ``nb``
    (:func:`condensed_numbering`) of ``n`` grounded unknowns of ``k``:
    ``(host dict, has_esi)``."""
    r, c, v, S, nS, spos, interior, counts, Gb, m = (
        nb[key] for key in ("r", "c", "v", "S", "nS", "spos", "interior", "counts", "Gb", "m"))
    bpos, lpos, ipos, GbM, rs, cs, mis, sidx, smax, elocal = (
        nb[key] for key in ("bpos", "lpos", "ipos", "GbM", "rs", "cs", "mis", "sidx", "smax",
                            "elocal"))
    # Every index and value array the device needs, built on the host
    # first and sent in one transfer (each separate small copy has a fixed
    # cost; measured: docs/performance_records.md).
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
    take_out = np.empty(k, dtype=np.int64)
    take_out[interior] = ipos[interior]
    take_out[S] = GbM + spos[S]
    take_out[n:] = GbM + nS                      # the grounded unknown: the zero slot
    host["take_in"] = take_in.astype(np.int32)
    host["take_out"] = take_out.astype(np.int32)
    return host, has_esi


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
