"""The array engine: the pieces of (deflated) preconditioned CG on backend arrays.

An engine gives the Krylov loop (:mod:`.cg`) what it computes with:

``matvec(x)``            ``A x``
``precondition(r)``      the variant's preconditioned residual
``operator(p)``          the variant's operator (``A p``, or ``P A p`` for DEF1)
``start(x)``             the variant's start: ``(x, r)`` from the initial guess
``finish(x)``            the solution an iterate stands for
``dot(a, b)``, ``norm(a)``  reductions (0-d arrays, no host synchronisation)

and the iteration protocol the loop drives (:class:`ArrayIterations` here,
:class:`~.device.DeviceIterations` for an engine that runs whole iterations
on the device): ``begin``, ``read``, ``restart``, ``plan``, ``chunk``, ``run``.
:class:`ArrayEngine` is the reference: every other engine computes the same
quantities.

Deflation variants (Tang, Nabben, Vuik, Erlangga, J. Sci. Comput. 2009), with
``P = I - A Q`` and ``Q = Z E^-1 Z^T``:

``def1``   CG on ``P A x^ = P b``; final ``x = Q b + P^T x^``.
``adef2``  preconditioner ``P^T M^-1 + Q`` with the start ``x0 = Q b + P^T x``;
           the iterate is the solution itself.
"""
from __future__ import annotations

from dataclasses import dataclass


from ...compute.reductions import reductions, several_norms, summed_dots
from ...compute.transfer import on_device
from ...compute.products import fixed_order_dot

__all__ = ["ArrayEngine", "ArrayIterations", "KrylovState", "Undeflated", "ADef2", "Def1",
           "VARIANT_PIECES"]


# --------------------------------------------------------------- the variants
class Undeflated:
    """CG and PCG: ``y = M^-1 r``, ``w = A p``."""

    def __init__(self, system):
        self.b, self.matvec, self.prec = system.b, system.matvec, system.prec
        self.residual = system.residual

    def precondition(self, r):
        return self.prec(r)

    def operator(self, p):
        return self.matvec(p)

    def start(self, x, r, x0_given, in_place=True):
        # (r is updated in place, unless an engine iterates on a copy)
        return x, (r.copy() if in_place and r is self.b else r)

    def finish(self, x):
        return x


class ADef2(Undeflated):
    """A-DEF2: ``y = P^T M^-1 r + Q r``; the start ``x = Q b + P^T x0``."""

    def __init__(self, system):
        super().__init__(system)
        self.defl = system.deflation

    def precondition(self, r):
        d = self.defl
        s = self.prec(r)
        return s + d.prolong(d.coarse.solve(d.coarse_rhs(r, s)))

    def start(self, x, r, x0_given, in_place=True):
        # x0 = Q b + P^T x = x + Q (b - A x)
        d = self.defl
        q = d.prolong(d.coarse.solve(d.restrict(r)))
        x = x + q if x0_given else q                   # (x is zero without x0)
        return x, self.residual(self.b, x)             # = r - A Z y: no A Z needed


class Def1(Undeflated):
    """DEF1 (Gupta 2010, Algorithm 8): CG on ``P A x^ = P b``."""

    def __init__(self, system):
        super().__init__(system)
        self.defl = system.deflation

    def coarse(self, s):
        # DEF1 needs accurate coarse solves (E y = s to rounding): refine.
        return self.defl.coarse.solve(s, refine=True)

    def project(self, v):
        """``P v = v - A Z E^+ Z^T v``."""
        return v - fixed_order_dot(self.defl.AZ, self.coarse(self.defl.restrict(v)))

    def operator(self, p):
        return self.project(self.matvec(p))

    def start(self, x, r, x0_given, in_place=True):
        return x, self.project(r)

    def finish(self, x):
        # x = Q b + P^T x^ = x^ + Q (b - A x^)
        d = self.defl
        return x + d.prolong(self.coarse(d.restrict(self.residual(self.b, x))))


#: The pieces of each variant (names from :data:`bubbleflow.linalg.registry.VARIANTS`).
VARIANT_PIECES = {"adef2": ADef2, "def1": Def1}


# ------------------------------------------------------------------- the state
@dataclass
class KrylovState:
    """What the iteration carries: vectors, device scalars, the history."""

    x: object
    r: object
    hist: object
    bnorm: float
    tol_rel: float
    p: object = None
    rz: object = None
    bad: object = None                 # 0-d bool: breakdown seen on the device
    done: object = None                # 0-d bool: the tolerance reached (iterate frozen)
    it: int = 0
    zero: bool = False                 # x is the zero guess, as the start left it
    last_check: int = 0
    hist_host: tuple = None            # (it, host copy of hist[:it + 1]) read at a check
    # (it, (x, r) of the iterate's true residual, their host figures): a
    # check's verification queued behind the iterations and read with their
    # status, for the check at ``it`` only.
    ahead: tuple = None


# ------------------------------------------------------------------ the engine
class ArrayEngine:
    """The reference engine: backend array operations (NumPy or CuPy)."""

    name = "generic"

    def __init__(self, system):
        self.system = system
        self.xp = system.backend.xp
        self.matvec = system.matvec
        self.dot, self.norm = reductions(system.backend, system.b.dtype, system.comm)
        self.dots = summed_dots(system.backend, system.b.dtype, system.comm)
        self.norms = several_norms(system.backend, system.b.dtype, system.comm)
        # On ranks a sum is a message whose latency dominates it: r . r and
        # r . M^-1 r then travel together (the same values).
        self.sums_together = getattr(system.comm, "size", 1) > 1
        cls = VARIANT_PIECES[system.variant] if system.deflation is not None else Undeflated
        self.pieces = cls(system)
        self.precondition = self.pieces.precondition
        self.operator = self.pieces.operator
        self.finish = self.pieces.finish

    def start(self, x, x0_given, in_place=True):
        """``(x, r)`` of the variant's start from the guess ``x``: ``b - A x``
        is ``b`` itself (no product) for the default zero guess.  ``in_place``
        False: the iterations run on copies (an engine's own buffers), so
        ``r`` may be ``b`` itself."""
        b = self.system.b
        r = self.system.residual(b, x) if x0_given else b
        return self.pieces.start(x, r, x0_given, in_place)


class ArrayIterations:
    """The iteration protocol on an :class:`ArrayEngine`: one textbook CG
    step at a time, ``check_every`` of them between host checks on a
    device; on the host, where a check costs no synchronisation, every
    iteration is checked (past the attainable accuracy the recursion may
    diverge within a few iterations) and ``check_every`` only spaces the
    progress reports (:attr:`report_every`)."""

    name = "generic"
    bytes_per_iteration = 0

    def __init__(self, engine, check_every, maxiter):
        self.engine, self.maxiter = engine, maxiter
        host = not on_device(engine.system.backend)
        self.check_every = 1 if host else check_every
        self.report_every = check_every if host else 1
        self.status = None

    def begin(self, state):
        """The first preconditioned residual and direction (queued: ``||b||``
        and the tolerance are not needed yet, see :meth:`started`)."""
        e, xp = self.engine, self.engine.xp
        y = e.precondition(state.r)
        state.p = y.copy()
        state.rz = e.dot(state.r, y)
        state.bad = xp.zeros((), dtype=bool)
        state.done = xp.zeros((), dtype=bool)

    def flag(self, state):
        """The breakdown flag after :meth:`begin` as a device scalar to read
        with the solve's first scalars, or None: the start never breaks."""
        return None

    def started(self, state, h, broke):
        """The first check's ``(h, broke)``, read by the loop with ``||b||``."""
        self.status = (h, bool(broke))

    def read(self, state):
        """``(h, broke)`` at a host check: the relative recursive residual
        and the breakdown flag (the one host synchronisation).  The
        tolerance reached inside the last stretch froze the iterate: the
        check is then at that iteration."""
        xp = self.engine.xp
        if self.status is not None:              # the first check: read with ||b||
            status, self.status = self.status, None
            return status
        if bool(state.done):
            seg = state.hist[state.last_check + 1: state.it + 1] <= state.tol_rel
            state.it = state.last_check + 1 + int(xp.argmax(seg))
        return float(state.hist[state.it]), bool(state.bad)

    def restart(self, state, r):
        """Restart from ``state.x`` with its true residual ``r``."""
        e = self.engine
        state.r = r
        y = e.precondition(r)
        state.p = y.copy()
        state.rz = e.dot(r, y)
        state.bad[...] = False
        state.done[...] = False

    def plan(self, it, h, steady, restarted=False):
        """Nothing to plan: checks every ``check_every`` iterations."""

    def chunk(self, state):
        """Iterations to the next multiple of ``check_every`` (or ``maxiter``)."""
        return min(self.check_every - state.it % self.check_every, self.maxiter - state.it)

    def run(self, state, count, callback=None):
        """``count`` CG steps, no host synchronisation.  A zero or
        non-finite curvature ``p . A p`` or ``r . M^-1 r`` freezes the
        iterate until the next check (a breakdown), as does the tolerance
        reached (``done``): the count stays exact (on the host, where the
        flags cost nothing to read, the stretch ends there instead).  A
        negative one does not:
        as SciPy's CG, the iteration goes on, and an indefinite system may
        still converge (the true residual decides)."""
        e, xp = self.engine, self.engine.xp
        host = not on_device(self.engine.system.backend)
        x, r, p, hist = state.x, state.r, state.p, state.hist
        bad, done, rz = state.bad, state.done, state.rz
        for _ in range(count):
            w = e.operator(p)
            pw = e.dot(p, w)
            bad |= ~(xp.isfinite(pw) & (pw != 0))
            frozen = bad | done
            # The scalars are float64 (0-d arrays); cast to the vectors' dtype
            # so that float32 updates stay float32 (no-op for float64).
            alpha = xp.where(frozen, 0.0, rz / pw).astype(x.dtype, copy=False)
            x += alpha * p
            r -= alpha * w
            state.it += 1
            if e.sums_together:
                y = e.precondition(r)
                rr, rz_new = e.dots((r, r), (r, y))
            else:
                rr, y = e.dot(r, r), None
            hist[state.it] = xp.sqrt(rr) / state.bnorm
            done |= hist[state.it] <= state.tol_rel
            if host and (done or bad):
                # On the host the flags cost nothing to read: the stretch
                # ends here (on one process without preconditioning a
                # residual no step uses).
                if callback is not None:
                    callback(e.finish(x))
                break
            if y is None:
                y = e.precondition(r)
                rz_new = e.dot(r, y)
            bad |= ~xp.isfinite(rz_new)
            beta = xp.where(bad | frozen, 0.0, rz_new / rz).astype(x.dtype, copy=False)
            rz = rz_new
            p *= beta
            p += y
            if callback is not None:
                callback(e.finish(x))
        state.rz = rz
