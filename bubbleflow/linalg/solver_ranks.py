"""The pressure solver of one rank: a case's ``solver`` section on the
rank's slab of a distributed operator.

:class:`RankPressureSolver` is :class:`~.solver.PressureSolver`'s
counterpart for :class:`~bubbleflow.operators.distributed.DistributedOperator`:
built once from the case, :meth:`~RankPressureSolver.update` for each
step's operator and level set (the preconditioner and deflation space of the
ranks, rebuilt), :meth:`~RankPressureSolver.solve` per right-hand side (the
Krylov loop written once, :func:`~.krylov.solve`, with the ranks' sums).
A pressure case and a flow on several ranks both use it.

What each preconditioner needs: Jacobi, incomplete Poisson (plain and
scaled), multigrid (its levels coarsened on the slabs, the small
gathered level joined) and block IC (the rank's own rows, factorised from
its widened slab's couplings) the slab's operator alone.  The deflation
boxes' labels come from the rank's widened slab of the level set.
"""
from __future__ import annotations

import time

import numpy as np

from . import registry
from ..compute.backend import backend_of
from .krylov import solve as krylov_solve

__all__ = ["RankPressureSolver", "RANK_PRECONDITIONERS", "RANK_DEFLATIONS", "slab_align"]

#: The preconditioners that run on several ranks (multigrid:
#: :mod:`.precond.multigrid_ranks`; incomplete Poisson, plain and scaled:
#: :mod:`.precond.incomplete_poisson_ranks`; block IC: :mod:`.precond.block_ic_ranks`).
RANK_PRECONDITIONERS = ("none", "jacobi", "incomplete_poisson", "incomplete_poisson_scaled",
                        "block_ic", "multigrid")
#: The deflation spaces they have (:mod:`.deflation.distributed`).
RANK_DEFLATIONS = ("none", "subdomains", "levelset_subdomains", "stripes")


def slab_align(solver_cfg, grid, ranks):
    """The planes the ranks' slab edges fall on a multiple of: multigrid's
    aggregates for as many levels as can be (:func:`~bubbleflow.mesh.ranks.coarsening_align`),
    2-D block IC's blocks, else 1."""
    from ..mesh.ranks import coarsening_align

    p = solver_cfg.preconditioner
    if p.type == "multigrid":
        return coarsening_align(grid.shape[0], ranks)
    if p.type == "block_ic" and grid.ndim == 2:
        return p.block_lines
    return 1


class RankPressureSolver:
    """CG, PCG or DPCG of a case's ``solver`` section on one rank's slab.

    Parameters
    ----------
    solver_cfg : the case's ``solver`` section
    grid : Grid
        The whole grid (the deflation boxes are its).
    """

    def __init__(self, solver_cfg, grid):
        self.cfg, self.grid = solver_cfg, grid
        self.method = solver_cfg.method
        self.rtol = solver_cfg.rtol
        self.A = self.M = self.deflation = None
        self.setup_seconds = 0.0
        self.device = None              # the fused engine of the rank, kept across solves

    def update(self, A, phi=None):
        """The set-up for the rank's operator ``A`` (a DistributedOperator):
        ``phi``, the level set on the slab widened by its halo planes (for
        ``levelset_subdomains``)."""
        t0 = time.perf_counter()
        self.A = A
        self.M = self._preconditioner(A)
        self.deflation = self._deflation(A, phi)
        self.setup_seconds = time.perf_counter() - t0
        return self

    def _preconditioner(self, A):
        from .precond.block_ic_ranks import block_ic_on_slab
        from .precond.incomplete_poisson_ranks import (DistributedIncompletePoisson,
                                                       DistributedScaledIncompletePoisson)
        from .precond.multigrid_ranks import DistributedMultigrid

        p = self.cfg.preconditioner
        if p.type in ("none", "jacobi"):
            return None if p.type == "none" else "jacobi"
        if p.type == "incomplete_poisson":
            return DistributedIncompletePoisson(A)
        if p.type == "incomplete_poisson_scaled":
            return DistributedScaledIncompletePoisson(A)
        if p.type == "block_ic":
            return block_ic_on_slab(A, p.block_lines)
        if p.type == "multigrid":
            return DistributedMultigrid(A, degree=p.degree, ratio=p.ratio,
                                        scale=p.scale, coarsest=p.coarsest, min_side=p.min_side,
                                        cycle_precision=p.cycle_precision, w_levels=p.w_levels)
        raise ValueError(f"preconditioner {p.type!r} on ranks; expected one of "
                         f"{RANK_PRECONDITIONERS}")

    def _deflation(self, A, phi):
        """The case's deflation space on ``A``'s slab, or None: the boxes of
        the one-process run (``subdomains``, or about ``cells_per_subdomain``
        cells wide; ``stripes`` layers), split into liquid and gas for
        ``levelset_subdomains``."""
        from .deflation.distributed import DistributedDeflation
        from .deflation.space import levelset_subdomain_labels, partition_labels

        d = self.cfg.deflation
        if d.type == "none":
            return None
        g = self.grid
        if d.type == "stripes":                 # layers along the vertical axis
            blocks = (1,) * (g.ndim - 1) + (int(d.stripes),)
        else:
            blocks = d.subdomains or registry.default_subdomains(g, d.cells_per_subdomain)
        lo, hi, _, _ = A.slab.extended()
        if d.type == "levelset_subdomains":
            labels = levelset_subdomain_labels(np.asarray(backend_of(phi).to_host(phi)), *blocks,
                                               grid_shape=g.shape, planes=(lo, hi))
        else:
            labels = partition_labels(g.shape, blocks, planes=(lo, hi))
        return DistributedDeflation(A, labels, kind=d.type)

    def _select(self, system):
        """The rank's fused engine where it applies (CG or Jacobi PCG on a
        GPU, :mod:`.fused.ranks`), built for the first solve and updated for
        the next; None: the generic loop."""
        from .engines import device_engine_for

        self.device = device_engine_for(system.A, system.prec_obj, system.prec_name,
                                        system.deflation, system.variant, system.b,
                                        previous=self.device)
        return self.device

    def solve(self, b, x0=None, rtol=None, atol=None, progress=None):
        """``A x = b`` on the ranks (``b`` the slab's, any shape); returns
        ``(x, SolveRecord)``, ``x`` shaped as ``b``, the record the same on
        every rank."""
        s = self.cfg
        rtol = s.rtol if rtol is None else rtol
        atol = s.atol if atol is None else atol
        x, record = krylov_solve(self.A, b.ravel(), None if x0 is None else x0.ravel(),
                                 rtol=rtol, atol=atol, maxiter=s.maxiter, M=self.M,
                                 deflation=self.deflation, variant=s.variant,
                                 check_every=s.check_every, method=self.method,
                                 progress=progress, select=self._select)
        record.setup_seconds += self.setup_seconds
        return x.reshape(b.shape), record
