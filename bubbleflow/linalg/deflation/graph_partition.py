"""Groups and separators of a sparse symmetric matrix's graph.

The condensed coarse solve (:class:`~bubbleflow.linalg.deflation.coarse.CoarseSolver`)
splits the unknowns of the grounded coarse matrix into compact groups
(:func:`partition_groups`) and a separator that cuts every coupling between
two groups (:func:`separator_mask`): the interiors of the groups then form a
block-diagonal matrix, and only the separator is solved densely.  Index work
on the host.
"""
from __future__ import annotations

import numpy as np

__all__ = ["partition_groups", "separator_mask", "separator_of_entries", "SEPARATORS"]

SEPARATORS = ("one-sided", "two-sided")


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
    import scipy.sparse as sp
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
    import scipy.sparse as sp

    C = sp.coo_matrix(M)
    return separator_of_entries(C.row, C.col, C.data, np.asarray(groups), M.shape[0], separator)


def separator_of_entries(r, c, data, groups, n, separator):
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
