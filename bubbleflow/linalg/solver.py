"""The pressure solver: built once per grid, updated per operator, run per right-hand side.

:class:`PressureSolver` is what a time step uses: build it once (for the
first operator and interface), call :meth:`PressureSolver.update` when the
operator changes (it redoes only the operator-dependent set-up:
preconditioner, deflation space, coarse factorisation, the engine's copies
of the operator, none where the operator was built in the engine's arrays:
:meth:`PressureSolver.operator_arrays`), then :meth:`PressureSolver.solve`
for each right-hand side.  The set-up time is measured and reported in
every solve record.

The operator's partition decides where the set-up runs: the whole grid's
operator on one process, or one rank's slab of a
:class:`~bubbleflow.operators.distributed.DistributedOperator` (a pressure
case or a flow on several ranks).  On a slab every rank builds the
preconditioner and the deflation space of its slab by their registry
entries' ``slab`` builders (:data:`bubbleflow.linalg.registry.PRECONDITIONERS`,
:data:`~bubbleflow.linalg.registry.DEFLATIONS`), the device engine is the
registry's rank form (:data:`~bubbleflow.linalg.registry.RANK_DEVICE_ENGINES`),
and the Krylov loop, written once (:func:`~.krylov.solve`), sums over the
ranks through the operator's communicator.  What has no ``slab`` builder is
refused on ranks before any set-up; :func:`slab_align` says what the ranks'
slab edges must fall on for a case's solver.
"""
from __future__ import annotations

import copy
import math
import time

import numpy as np

from . import registry
from .deflation.space import make_deflation
from .engines import device_engine_for
from .krylov import SolveRecord, solve as krylov_solve
from .krylov.record import close_record
from .krylov.system import check_tolerances, nullspace_of, preconditioner_of, residual_of
from .precond import make_preconditioner
from .solver_options import (METHODS, OWNER, check_names, check_preconditioner_options,
                             deflation_options, schema_value)
from ..compute.reductions import reductions

__all__ = ["PressureSolver", "METHODS", "VARIANTS", "PRECISIONS", "check_preconditioner_options",
           "slab_align"]

VARIANTS = tuple(registry.VARIANTS)
PRECISIONS = ("float64", "float32")


def slab_align(solver_cfg, grid, ranks):
    """The planes the ranks' slab edges fall on a multiple of, for the
    case's ``solver`` section on ``grid`` (the whole grid: its ``shape``,
    planes first) shared by ``ranks`` ranks: what the preconditioner's
    registry entry asks (``slab_align``: multigrid's aggregates for as many
    levels as can be, 2-D block IC's blocks), else 1."""
    pc = solver_cfg.preconditioner
    entry = registry.preconditioner(pc.type)
    if entry.slab_align is None:
        return 1
    return registry.load(entry.slab_align)(tuple(grid.shape), ranks, **_section_options(pc))


def _section_options(pc):
    """The options of the case's ``solver.preconditioner`` section that its
    preconditioner takes (the section holds every preconditioner's)."""
    taken = registry.preconditioner(pc.type).options
    return {k: v for k, v in pc.options().items() if k in taken}


class _WholeGrid:
    """The set-up of the whole grid's operator on one process."""

    on_slab = False

    def __init__(self, grid=None):
        self.grid = grid

    def refusal(self, preconditioner, deflation, precision):
        return None

    def default_precision(self, A):
        return "float32" if np.dtype(A.dtype) == np.float32 else "float64"

    def operators(self, A, precision):
        """``(A, A_inner)``: the float64 operator of the residual checks and
        the one the iterations (the preconditioner, the deflation) use."""
        A64 = _operator_as(A, np.float64)
        return A64, A64 if precision == "float64" else _operator_as(A, np.float32)

    def deflation(self, name, A, phi, options):
        """The space, its coarse factorisation queued (checked later)."""
        space = make_deflation(name, A, phi=phi, factorise=False, **options)
        if space is not None:
            space.factorise(check=False)
        return space

    def preconditioner(self, name, A, options, previous):
        """Refreshed in place where it can (its buffers, and the CUDA graphs
        that hold them, stay valid), else built anew (:meth:`build`)."""
        if previous is None or not previous.refresh(A):
            return self.build(name, A, options)
        return previous

    def build(self, name, A, options):
        """A new preconditioner ``name`` for ``A``."""
        return make_preconditioner(name, A, **options)


class _Slab(_WholeGrid):
    """The set-up of one rank's slab of a distributed operator: the
    registry entries' slab builders, the operator as it is (float64 only:
    no float32 refinement on ranks), ``grid`` the whole grid (the
    deflation boxes are its)."""

    on_slab = True

    def refusal(self, preconditioner, deflation, precision):
        """Why this solver cannot run on a rank's slab, or None."""
        for what, table, name in (("preconditioner", registry.PRECONDITIONERS, preconditioner),
                                  ("deflation", registry.DEFLATIONS, deflation)):
            if table[name].slab is None:
                return (f"{what} {name!r} does not run on a rank's slab; on ranks: "
                        + ", ".join(registry.on_slabs(table)))
        if precision != "float64":
            return f"precision {precision!r} runs on one process; on a rank's slab: 'float64'"
        if deflation != "none" and self.grid is None:
            return f"deflation {deflation!r} on a rank's slab needs the whole grid (grid=)"
        return None

    def default_precision(self, A):
        return "float64"

    def operators(self, A, precision):
        return A, A

    def deflation(self, name, A, phi, options):
        build = registry.load(registry.deflation(name).slab)
        return build(name, A, self.grid, phi=phi, **options)

    def build(self, name, A, options):
        """A new preconditioner ``name`` for the slab's ``A``: its registry
        entry's slab builder."""
        return registry.load(registry.preconditioner(name).slab)(A, **options)


def _on_slab(A):
    """Whether ``A`` is a rank's slab of a distributed operator."""
    return getattr(A, "slab", None) is not None


#: The set-up of each partition, by :func:`_on_slab`.
_PARTITIONS = {False: _WholeGrid, True: _Slab}


class PressureSolver:
    """CG, PCG or DPCG for one pressure operator.

    Parameters
    ----------
    A : PoissonOperator or DistributedOperator
        2-D or 3-D (the preconditioners of the given dimension, see
        :data:`bubbleflow.linalg.registry.PRECONDITIONERS`).  A
        :class:`~bubbleflow.operators.distributed.DistributedOperator`: this
        rank's slab (every rank builds its solver at once; the set-up and
        each solve are collective), with the preconditioners and deflation
        spaces whose registry entries have a ``slab`` builder, float64.
    method : {"cg", "pcg", "dpcg"}, optional
        Default: ``dpcg`` when a deflation other than ``none`` (or only
        ``subdomains`` or ``cells_per_subdomain``) is given, ``cg`` when the
        preconditioner ``none`` is, else ``pcg``.
    preconditioner : str, optional
        A name from :data:`bubbleflow.linalg.registry.PRECONDITIONERS`.
        Default: the method's (``multigrid`` for ``pcg``,
        ``incomplete_poisson_scaled`` for ``dpcg``; docs/performance_records.md
        says where each wins).
    deflation : str, optional
        ``none``, ``subdomains``, ``stripes`` or ``levelset_subdomains``.
        Default: the method's (``none`` for ``pcg``, ``levelset_subdomains``
        for ``dpcg``).
    phi : array, optional
        Level set (grid-shaped), needed by ``levelset_subdomains``; on a
        rank's slab, the level set on the slab widened by its halo planes
        (planes ``lo:hi`` of :meth:`~bubbleflow.mesh.ranks.RankSlab.extended`).
    block_lines : int
        Grid lines per block for ``block_ic``.
    subdomains : (px, py) or (px, py, pz), optional
        Deflation block counts, one per grid axis (x first; another number
        of counts is a ValueError); default: blocks about
        ``cells_per_subdomain`` cells wide, so the deflation follows the grid.
    cells_per_subdomain : int, optional
        Subdomain width in cells; default
        :func:`bubbleflow.linalg.registry.default_subdomains` (16 cells, 8 in 3-D, at
        most 4096 subdomains).
    stripes : int
        Layers of the ``stripes`` deflation along the vertical axis (grid
        rows in 2-D, z layers in 3-D).
    variant : {"adef2", "def1"}
    rtol, atol, maxiter, check_every
        Passed to the Krylov solver.  ``maxiter`` bounds all iterations of a
        solve, inner ones included.
    precision : {"float64", "float32"}, optional
        The arithmetic of the iterations.  Default: ``float32`` for a float32
        operator, else ``float64``.  Either way the right-hand side, the
        solution and the residual checks are float64, and a solve reaches
        ``rtol`` on the float64 true residual.

        ``float64``: one (D)PCG solve in float64 (a float32 operator is
        promoted: its entries as they are).

        ``float32``: mixed precision.  The solver's copy of the operator, the
        preconditioner and the deflation space are float32 (the coarse
        factorisation stays float64); the solve is an iterative refinement:
        ``r = b - A x`` in float64 with the float64 operator, ``A d = r``
        solved roughly (to ``inner_rtol``) by float32 (D)PCG with float64
        inner products, ``x += d`` in float64, until the float64 residual
        meets ``rtol``.  A float32 vector cannot hold the answer itself to
        better than a relative residual of about 1e-2 on the high-contrast
        problems (neighbouring pressures agree to more digits than float32
        has), so plain float32 CG stalls there; each correction gains that
        factor again.  Limit: the corrections converge only while float32
        rounding times the condition number of ``A`` stays below one; on the
        bubbly column contrast 1e3 converges up to 256^2, contrast 1e4 stalls
        at 128^2 (true residual 5e-3; the record says so).  Case files
        therefore offer float64 only.
    preconditioner_options : dict, optional
        Further options of the preconditioner, by the names its registry
        entry lists (:data:`bubbleflow.linalg.registry.PRECONDITIONERS`);
        those not given take the class's defaults.  Another name, or a value
        the case file's ``solver.preconditioner`` section would refuse, is a
        ValueError before any set-up (:func:`check_preconditioner_options`).
    inner_rtol : float
        Relative tolerance of each float32 correction.  The float32 floor
        above makes tighter ones cost iterations for little gain (iteration
        counts: docs/performance_records.md, "Figures behind code choices").
    grid : Grid, optional
        The whole grid, for a deflation space on a rank's slab (its boxes
        are the whole grid's); a grid operator carries its own.

    Raises
    ------
    ValueError
        Before any set-up: an unknown method, preconditioner, deflation or
        variant, or a pair the method's rules forbid; a preconditioner
        option its registry entry does not list; a value of
        ``preconditioner_options``, ``block_lines``, ``subdomains``,
        ``cells_per_subdomain``, ``stripes``, ``maxiter`` or
        ``check_every`` the case file's schema refuses; a negative ``rtol``
        or ``atol``; on a rank's slab, a preconditioner or deflation space
        without a slab builder, ``float32`` precision, or a deflation space
        without ``grid``.  The message names the argument, its value and
        what is accepted.
    """

    def __init__(self, A, method=None, preconditioner=None,
                 deflation=None, phi=None, block_lines=2, subdomains=None,
                 stripes=16, variant="adef2", rtol=1e-8, atol=0.0, maxiter=10000, check_every=10,
                 precision=None, inner_rtol=3e-2, preconditioner_options=None,
                 cells_per_subdomain=None, grid=None):
        method, preconditioner, deflation = registry.method_defaults(
            method, preconditioner, deflation,
            deflation_options=(subdomains, cells_per_subdomain) != (None, None))
        check_names(method, preconditioner, deflation, variant)
        self.partition = _PARTITIONS[_on_slab(A)](grid)
        if precision is None:
            precision = self.partition.default_precision(A)
        if precision not in PRECISIONS:
            raise ValueError(f"precision {precision!r}; expected one of {PRECISIONS}")
        refused = self.partition.refusal(preconditioner, deflation, precision)
        if refused is not None:
            raise ValueError(f"{OWNER}: {refused}")
        if not 0.0 < inner_rtol < 1.0:
            raise ValueError(f"inner_rtol={inner_rtol}; expected 0 < inner_rtol < 1")
        rtol, atol, _ = check_tolerances(rtol, atol, None, name=OWNER)
        maxiter = schema_value("SolverConfig", "maxiter", maxiter)
        check_every = schema_value("SolverConfig", "check_every", check_every)
        self.precision = precision
        self.inner_rtol = float(inner_rtol)
        self.method = method
        self.variant = variant
        self.rtol, self.atol, self.maxiter, self.check_every = rtol, atol, maxiter, check_every
        self.preconditioner_name = preconditioner
        self.deflation_name = deflation
        # The preconditioner's options, by the registry's list of them
        # (Jacobi's check deferred to after the one synchronisation).
        given = check_preconditioner_options(preconditioner, preconditioner_options or {})
        block_lines = schema_value("PreconditionerConfig", "block_lines", block_lines)
        given = {"block_lines": block_lines, "check": False, **given}
        self.preconditioner_options = {k: given[k]
                                       for k in registry.preconditioner(preconditioner).options
                                       if k in given}
        self.deflation_options = deflation_options(subdomains, stripes, cells_per_subdomain)
        self.M = self.device = None
        #: What ``solve``'s ``behind`` returned for the answer it accepted.
        self.accepted_behind = None
        self._unchecked = None          # the set-up's checks, when update left them to solve
        self.update(A, phi)

    def update(self, A, phi=None, check=True):
        """The set-up for a new operator (and interface ``phi``).

        Redone: the solver's copies of the operator, the deflation space and
        its coarse factorisation, the preconditioner, and the engine's copies
        of the operator-dependent arrays.  Kept: the method, the options,
        the engine (its buffers, kernels and launch plan).  The results are
        those of a new solver for ``A``, bit for bit, but where a flow has
        told :meth:`interface_moved` (or set a multigrid's
        ``coarse_refresh``): a multigrid preconditioner then keeps its
        coarsest inverse while the interface has moved little (an older
        one only costs iterations), until :meth:`renew`.

        ``check=False``: the checks of the factorisations (the one wait for
        the device) are left to the next :meth:`solve`, which runs them
        first; the set-up is then queued and the host goes on at once (a
        flow queues it beside its momentum phase).

        ``A`` is of the partition the solver was built for (a rank's slab,
        ``phi`` then the level set on the slab widened by its halo planes,
        or the whole grid).
        """
        if _on_slab(A) != self.partition.on_slab:
            raise ValueError(f"{OWNER}.update: a {type(A).__name__} for a solver built for "
                             + ("a rank's slab" if self.partition.on_slab else "the whole grid"))
        # A: the float64 operator of the residual checks; A_inner: the one
        # the iterations (and the preconditioner, the deflation) use.
        self.A, self.A_inner = self.partition.operators(A, self.precision)
        A = self.A_inner
        t0 = time.perf_counter()
        # The deflation space (it reads its size on the host), its coarse
        # factorisation queued, the preconditioner and the engine's copies
        # queued behind it; then one transfer of every deferred check (the
        # factorisations' and the preconditioner's), which is the one wait for
        # the device.
        self.deflation = self.partition.deflation(self.deflation_name, A, phi,
                                                  self.deflation_options)
        self.M = self.partition.preconditioner(self.preconditioner_name, A,
                                               self.preconditioner_options, self.M)
        self.device = self._device_engine()
        checked = [self.M] if self.deflation is None else [self.deflation.coarse, self.M]
        self._unchecked = checked
        if check:
            self._settle()
        self.setup_seconds = time.perf_counter() - t0
        return self

    def _settle(self, wait=True):
        """Run the set-up's deferred checks, if any (one transfer); ``wait``
        False: no synchronisation where none is pending (a solve's own start
        reads the device)."""
        checked, self._unchecked = self._unchecked, None
        if checked:
            _check_all(self.A_inner.backend, checked, wait)

    def operator_arrays(self):
        """Arrays the next operator's face couplings may be written into
        (:meth:`.PoissonOperator.from_faces`'s ``out``): the device engine's
        own, which its launches and CUDA graphs read, so that :meth:`update`
        copies nothing; None where it keeps none such (no device engine, a
        2-D grid, an operator stored otherwise than matrix free, a rank's
        slab, float32 iterations).  An operator built in them is
        overwritten by the next one built in them."""
        if (self.device is None or self.partition.on_slab or self.A_inner is not self.A
                or getattr(self.A, "storage", None) != "matrix_free"):
            return None
        return self.device.operator_arrays()

    def _device_engine(self):
        """The engine that runs whole iterations on the device for the
        float64 solves (:mod:`bubbleflow.linalg.engines`), or None: built
        for the first operator, updated for the next ones."""
        if self.precision != "float64":
            return None                  # float32 inner solves: the array engine
        A = self.A_inner
        M = None if self.preconditioner_name == "none" else self.M
        _, prec_name, prec_obj = preconditioner_of(M, A)
        where = A.backend.xp.empty(0, dtype=np.float64)     # the solves' backend and dtype
        return device_engine_for(A, prec_obj, prec_name, self.deflation, self.variant, where,
                                 previous=self.device)

    @classmethod
    def from_config(cls, A, solver_cfg, phi=None, precision=None, grid=None):
        """Build from the ``solver`` section of a case; ``precision`` is the
        case's top-level ``precision`` (default: from the operator's dtype;
        float64 on a rank's slab); ``grid``: the whole grid, for a
        deflation space on a rank's slab."""
        pc = solver_cfg.preconditioner
        options = _section_options(pc)
        return cls(A, method=solver_cfg.method, preconditioner=pc.type,
                   deflation=solver_cfg.deflation.type, phi=phi,
                   block_lines=solver_cfg.preconditioner.block_lines,
                   subdomains=solver_cfg.deflation.subdomains,
                   cells_per_subdomain=solver_cfg.deflation.cells_per_subdomain,
                   stripes=solver_cfg.deflation.stripes, variant=solver_cfg.variant,
                   rtol=solver_cfg.rtol, atol=solver_cfg.atol, maxiter=solver_cfg.maxiter,
                   check_every=solver_cfg.check_every, precision=precision,
                   preconditioner_options=options, grid=grid)

    def solve(self, b, x0=None, callback=None, progress=None, rtol=None, atol=None,
              reference=None, behind=None):
        """Solve ``A x = b``; returns ``(x, SolveRecord)``.

        ``b`` may be flat or grid-shaped (on a rank's slab: the slab's
        cells, flat or slab-shaped); ``x`` has the shape of ``b`` and is
        float64 (whatever ``b``'s dtype).  On ranks the record is the same
        on every rank.

        Parameters
        ----------
        b : array
        x0 : array, optional
            Starting guess.
        callback : callable, optional
            ``callback(xk)`` after every iteration (forces a host check at
            each one, and the generic engine).
        progress : callable, optional
            ``progress(iteration, relative_residual)``, a Python int and
            float, at the solver's existing host checks only (every
            ``check_every`` iterations, or the fused engine's status reads):
            no extra synchronisation, and the same result to the bit.
            Iterations strictly increase (in float32, counted over all
            corrections); each value is ``record.residual_history`` at that
            iteration.  Reports come one check late (a check's value is final
            only once the check is over); the last comes before ``solve``
            returns.
        rtol, atol : float, optional
            This solve's tolerances (default: the solver's).
        reference : array, optional
            A vector of ``b``'s layout whose norm ``rtol`` and the record's
            relative figures are against instead of ``||b||`` (``b`` the
            right-hand side of an increment; :func:`.krylov.cg.solve`).
        behind : callable, optional
            ``behind(x)`` with each candidate answer (``b``'s shape) of a
            device engine, queued before the host reads whether it is
            accepted (:func:`.krylov.cg.solve`): work the caller queues on it
            runs while the host waits.  What it returned for the answer
            the solve accepted is :attr:`accepted_behind` afterwards (None
            where no candidate was accepted: its work is to be dropped).
        """
        self._settle(wait=False)
        rtol = self.rtol if rtol is None else rtol
        atol = self.atol if atol is None else atol
        shape = b.shape
        xp = self.A.backend.xp
        b = xp.asarray(b)
        if b.dtype != np.float64:
            b = b.astype(np.float64)
        if x0 is not None and xp.asarray(x0).dtype != np.float64:
            x0 = xp.asarray(x0).astype(np.float64)
        M = None if self.preconditioner_name == "none" else self.M
        self.accepted_behind, queued = None, []
        if self.precision == "float32":
            x, record = self._refine(b, x0, M, callback, progress, rtol, atol, reference)
        else:
            def candidate(x):
                queued[:] = [x, behind(x.reshape(shape))]

            x, record = krylov_solve(self.A, b, x0, rtol=rtol, atol=atol,
                                     maxiter=self.maxiter, M=M, callback=callback,
                                     deflation=self.deflation, variant=self.variant,
                                     check_every=self.check_every, method=self.method,
                                     select=self._select, progress=progress,
                                     reference=reference,
                                     behind=None if behind is None else candidate)
            if queued and queued[0] is x:
                self.accepted_behind = queued[1]
        record.setup_seconds += self.setup_seconds
        if M is None:
            record.preconditioner = "none"
        else:
            M.solved(record.iterations)
        return x.reshape(shape), record

    def renew(self):
        """The next :meth:`update` gives a new solver's results bit for bit
        (a restart begins there: a multigrid's coarsest inverse, which may
        be kept otherwise, is recomputed too)."""
        if self.M is not None:
            self.M.renew()

    def interface_moved(self, cells):
        """Before an :meth:`update`: the interface has moved at most
        ``cells`` grid cells since the previous update's operator (None: not
        known); a multigrid preconditioner keeps its coarsest inverse while
        the motion adds up to little (:class:`.multigrid.Multigrid`)."""
        if self.M is not None:
            self.M.interface_moved(cells)

    def _refine(self, b, x0, M, callback, progress, rtol, atol, reference=None,
                stagnation_steps=2):
        """Float64 iterative refinement with float32 (D)PCG corrections;
        ``rtol`` against ``||reference||`` where one is given and nonzero
        (:meth:`solve`)."""
        t_setup = time.perf_counter()
        A = self.A
        backend = A.backend
        xp = backend.xp
        _, norm = reductions(backend, np.float64)
        b = b.ravel()
        record = SolveRecord(method=self.method, rtol=float(rtol), precision="float32")
        gauge = nullspace_of(A, "auto")          # the null-space hook of the operator
        residual = residual_of(A, A.matvec)
        b = gauge.compatible(b, record)
        x = xp.zeros_like(b) if x0 is None else xp.array(x0, dtype=np.float64).ravel()
        if x.shape != b.shape:
            raise ValueError(f"x0 has {x.size} entries; b has {b.size}")
        backend.synchronize()
        record.setup_seconds = time.perf_counter() - t_setup
        t_solve = time.perf_counter()
        norms = [norm(b)]
        if reference is not None:
            norms.append(norm(xp.asarray(reference, dtype=np.float64).ravel()))
        bnorm, *refnorm = (float(v) for v in backend.to_host_many(norms))
        if bnorm == 0.0:
            record.residual, record.converged, record.reason = 0.0, True, "converged"
            record.residual_history = np.zeros(1)
            return xp.zeros_like(b), record
        # The norm the tolerance and the record's relative figures are against.
        against = (refnorm[0] if refnorm else 0.0) or bnorm
        tol = max(float(rtol) * against, float(atol))
        report = _Report(progress)
        hist = [math.nan]                # entry 0 set by the first check
        total, best, stalls, reason = 0, (None, math.inf), 0, None
        prev = math.inf
        while True:
            x = gauge.gauge(x)           # the gauge of the answer
            r = residual(b, x)
            rn = float(norm(r))          # the float64 check (one synchronisation)
            hist[-1] = rn / bnorm
            record.true_residual_checks.append((total, rn / bnorm))
            report(total, rn / bnorm)
            if not math.isfinite(rn):
                reason = "non-finite"
                break
            if rn < best[1]:
                best = (x.copy(), rn)
            if rn <= tol:
                reason = "converged"
                break
            # Each correction gains about the float32 floor (1e-2 or better);
            # corrections that gain less than a half are at the attainable
            # accuracy (or a breakdown of the inner solves).
            stalls = stalls + 1 if rn > 0.5 * prev else 0
            if stalls >= stagnation_steps:
                reason = "stagnation" if best[1] < 0.5 * bnorm else "breakdown"
                break
            if total >= self.maxiter:
                reason = "maxiter"
                break
            prev = rn
            # The defect scaled to unit norm: float32 keeps its digits
            # whatever the size of the remaining residual.
            s = (r / rn).astype(np.float32)
            scale = rn / bnorm
            def correction_callback(d, x=x, rn=rn):
                callback(x + rn * d.astype(np.float64))

            inner_cb = None if callback is None else correction_callback

            def inner_progress(i, h, offset=total, scale=scale):
                if i > 0:                # iteration 0 is the float64 check above
                    report(offset + i, h * scale)

            # Solve to what this correction must gain, no tighter: the last
            # one need not pass rtol by far.
            inner_tol = min(0.5, max(self.inner_rtol, 0.5 * tol / rn))
            d, rec = krylov_solve(self.A_inner, s, None, rtol=inner_tol, atol=0.0,
                                  maxiter=self.maxiter - total, M=M, callback=inner_cb,
                                  deflation=self.deflation, variant=self.variant,
                                  check_every=self.check_every, method=self.method,
                                  select=self._select, progress=inner_progress, confirm=False)
            record.preconditioner, record.deflation = rec.preconditioner, rec.deflation
            record.deflation_vectors, record.variant = rec.deflation_vectors, rec.variant
            record.engine = rec.engine
            hist.extend(np.asarray(rec.residual_history[1:]) * scale)
            total += rec.iterations
            record.refinements += 1
            record.inner_iterations.append(int(rec.iterations))
            x = x + rn * d.astype(np.float64)
        report.flush()
        xf, rtn = best if reason != "converged" else (x, rn)
        if xf is None:                   # non-finite at the start
            xf, rtn = x, rn
        close_record(record, backend, t_solve, total, rtn / bnorm, reason,
                      np.asarray(hist, dtype=np.float64))
        if against != bnorm:
            record.relative_to(bnorm, against, rtol)
        return xf, record

    def _select(self, system):
        """The solver's device engine for a solve of ``system``, or None:
        the array engine (float32 inner solves)."""
        return self.device if system.b.dtype == np.float64 else None

    def __repr__(self):
        d = self.deflation
        return (f"<PressureSolver {self.method} M={self.preconditioner_name} "
                f"deflation={getattr(d, 'kind', 'none')}({getattr(d, 'k', 0)}) {self.precision}>")


class _Report:
    """Forwards ``(iteration, value)`` reports one late, so that a later
    report for the same iteration (the float64 check that ends a correction)
    replaces the earlier one: iterations reach the hook strictly increasing."""

    def __init__(self, hook):
        self.hook, self.pending = hook, None

    def __call__(self, iteration, value):
        if self.hook is None:
            return
        if self.pending is not None and iteration > self.pending[0]:
            self.hook(*self.pending)
        self.pending = (int(iteration), float(value))

    def flush(self):
        if self.hook is not None and self.pending is not None:
            self.hook(*self.pending)
        self.pending = None


def _check_all(backend, parts, wait=True):
    """Wait for the device and run the deferred checks of ``parts`` (objects
    with ``check_flags()`` and ``check(values)``) on their flags, read in one
    transfer (a plain synchronisation where none is pending, if ``wait``);
    raises what the first failing part raises."""
    flags = [part.check_flags() for part in parts]
    flat = [f for fs in flags for f in fs]
    if not flat:
        if wait:
            backend.synchronize()
        for part in parts:
            part.check([])
        return
    host = iter(h.reshape(-1).astype(np.int32) for h in backend.to_host_many(flat))
    for part, fs in zip(parts, flags):
        part.check([next(host) for _ in fs])


def _operator_as(A, dtype):
    """``A`` with its entries in ``dtype``: ``A`` itself when they are, else a
    copy with the stored arrays cast (exactly the float64 entries rounded:
    re-assembling from the couplings would round differently)."""
    dtype = np.dtype(dtype)
    if np.dtype(getattr(A, "dtype", dtype)) == dtype:
        return A
    from ..operators.poisson import PoissonOperator

    if not isinstance(A, PoissonOperator):
        return A.astype(dtype)
    B = copy.copy(A)
    for cached in ("diagonals_host", "couplings_host"):
        B.__dict__.pop(cached, None)
    B.dtype = dtype
    B._norm_inf = None
    if A.storage == "diagonals":
        diagonals = [d.astype(dtype) for d in A.diagonals]
        centre = len(diagonals) // 2
        if dtype.itemsize > np.dtype(A.dtype).itemsize:
            # Promoted: the centre from the off-diagonals, so that the rows
            # sum to zero again (the rounded centre misses by ~1e-7 relative,
            # which makes b - mean(b) incompatible: the float64 residual
            # then stalls near 1e-5).  (2-D: -(S + W + E + N), in that order.)
            diagonals[centre] = -sum(diagonals[:centre] + diagonals[centre + 1:])
        B.diagonals = tuple(diagonals)
    elif A.ndim != 2:
        B._faces = tuple(c.astype(dtype) for c in A.couplings())
    else:
        B.cx, B.cy = A.cx.astype(dtype), A.cy.astype(dtype)
    return B
