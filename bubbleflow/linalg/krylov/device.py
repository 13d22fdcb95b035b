"""The iteration protocol for an engine that runs whole iterations on the device.

Such an engine (the engines of :mod:`bubbleflow.linalg.fused`, whose shared
part is :class:`bubbleflow.linalg.fused.protocol.DeviceEngine`; injected by
the caller: this module imports none) provides

``begin(x, r, hist, it, bnorm, tol_rel, own)``   the start, by its own kernels
                        (``x`` None: the zero guess; ``bnorm`` None: the
                        tolerance comes later, by ``tolerance``; the start
                        does not need it)
``tolerance(bnorm, tol_rel)``   ``1 / ||b||`` and the relative tolerance of
                        the solve, into the engine's device scalars
``load(x, r, p, rz, bad, hist, it, bnorm, tol_rel)``   a restart's state
``iterate(count)``      ``count`` iterations, no host synchronisation; it
                        stops on the device at the tolerance
``settle(it, count, extra=(), read=None)``   ``(iteration, h, broke)`` after
                        ``iterate``; with ``extra`` device arrays read in the
                        same transfer, their host values fourth
``status()``            ``(iteration, h, broke)``: one transfer
``x``, ``r_current``, ``p``, ``rz``, ``bad``, ``bytes_per_iteration``
``history(size)``       optional: a zeroed history buffer the engine owns
                        (kept from solve to solve, so that what the engine
                        captured of it stays valid)
``tolerance_from_norms(norms, rtol, atol, has_reference)``   optional: the
                        tolerance from the start's norms on the device, so
                        that the first stretch is queued before the host
                        reads them (:meth:`DeviceIterations.first_stretch`)

Restarts are prepared by the array engine (its preconditioner and
deflation), then loaded.
"""
from __future__ import annotations

from .stopping import device_chunk

__all__ = ["DeviceIterations"]


class DeviceIterations:
    """Drives a device engine for the Krylov loop (see the module)."""

    name = "fused"
    report_every = 1                  # progress at every host check

    def __init__(self, device, engine, check_every, maxiter, ahead=None):
        self.device, self.engine = device, engine
        # ahead(state, stop) -> (payload, device arrays) or None: work the
        # next check will want, queued behind a stretch's iterations (ending
        # at most at ``stop``) and read with their status (state.ahead).
        self.ahead = ahead
        self.check_every, self.maxiter = check_every, maxiter
        self.bytes_per_iteration = device.bytes_per_iteration
        self.status = None
        self.next_chunk, self.prev_check = check_every, None
        #: The first stretch queued before the start's figures were read
        #: (:meth:`first_stretch`): ``(count, it, h, broke, payload, values)``.
        self.pending = None
        #: The iterate at the start, copied on the device before that stretch.
        self.x_start = None
        #: The zero guess of the start, where the solve began from it.
        self.zero_start = None

    @property
    def starts_ahead(self):
        """Whether the first stretch can be queued before the host reads the
        start's figures (:meth:`first_stretch`): the engine takes the
        tolerance from the norms on the device, a check is queued behind
        each stretch, and the solve may iterate at all."""
        return (self.ahead is not None and self.maxiter >= 1
                and hasattr(self.device, "tolerance_from_norms"))

    def begin(self, state):
        """The first preconditioned residual and direction by the engine's
        own kernels (the array engine's are a dozen library calls), queued
        before ``||b||`` is known: :meth:`started` gives the tolerance."""
        d = self.device
        # (The zero guess is set in the engine's buffer, not copied; the
        # zero array itself stays the start's iterate.)
        self.zero_start = state.x if state.zero else None
        d.begin(None if state.zero else state.x, state.r, state.hist, 0, own=True)
        state.x, state.r, state.p = d.x, d.r_current, d.p
        state.rz = d.rz
        # The engine keeps its breakdown flag (read by ``status``); the
        # state's flags only carry cleared ones into ``load`` at a restart.
        state.bad = state.done = None

    def flag(self, state):
        """The engine's breakdown flag after the start (a device scalar the
        loop reads with ``||b||``: the start's host check)."""
        return getattr(self.device, "bad", None)

    def started(self, state, h, broke):
        """``||b||`` and the tolerance are known: into the engine (there
        already after :meth:`first_stretch`); ``(h, broke)`` is the first
        check's status."""
        self.tol_rel = state.tol_rel
        if self.pending is None:
            self.device.tolerance(state.bnorm, state.tol_rel)
        self.status = (h, bool(broke))

    def read(self, state):
        """``(h, broke)`` as ``status``/``settle`` read them (one transfer;
        the engine stops on the device at the tolerance: no ``done``)."""
        status, self.status = self.status, None
        return status

    def first_stretch(self, state, norms, rtol, atol, has_reference, read):
        """The first stretch queued before the host knows ``||b||``: the
        tolerance from the start's ``norms`` on the device
        (:meth:`tolerance_from_norms`, which marks the solve done where the
        host's first check ends it, so that nothing then iterates), a copy
        of the start's iterate (:attr:`x_start`), the stretch that the first
        check plans (``check_every``, :meth:`chunk`) and its check, read by
        ``read`` (the start's figures in the same transfer).  :meth:`run`
        takes its outcome where the host asks for that stretch."""
        self.device.tolerance_from_norms(norms, rtol, atol, has_reference)
        self.x_start = state.x.copy() if self.zero_start is None else self.zero_start
        count = self.chunk(state)
        self.device.iterate(count)
        payload, arrays = self.ahead(state, state.it + count)
        it, h, broke, values = self.device.settle(state.it, count, arrays, read)
        self.pending = (count, it, h, broke, payload, values)

    def restart(self, state, r):
        """The array engine's restart, loaded into the device engine."""
        self.pending = None
        state.r = r
        e = self.engine
        y = e.precondition(r)
        state.p = y.copy()
        state.rz = e.dot(r, y)
        flags = e.xp.zeros(2, dtype=bool)
        state.bad, state.done = flags[0:1].reshape(()), flags[1:2].reshape(())   # 0-d views
        d = self.device
        d.load(state.x, state.r, state.p, state.rz, state.bad, state.hist, state.it, state.bnorm,
               state.tol_rel)
        state.x, state.r, state.p = d.x, d.r_current, d.p

    def plan(self, it, h, steady, restarted=False):
        """The next stretch's length, from this check (:func:`device_chunk`;
        ``h`` the true residual after a restart)."""
        self.next_chunk = device_chunk(self.check_every, h, self.prev_check, it,
                                       self.tol_rel, steady, restarted)
        self.prev_check = (it, h)

    def chunk(self, state):
        left = self.maxiter - state.it
        count = max(1, min(self.next_chunk, left))
        if count % 2 and count < left:
            # Even: the buffers' parity, and so the CUDA graphs captured for
            # it, stay the same (iterations past the tolerance are no-ops on
            # the device).
            count += 1
        return count

    def run(self, state, count, callback=None):
        pending, self.pending = self.pending, None
        if pending is not None and state.it == 0 and count == pending[0]:
            _, state.it, h, broke, payload, values = pending        # (run already)
            state.ahead = (state.it, payload, values)
            self.status = (h, broke)
            state.r = self.device.r_current
            return
        self.device.iterate(count)
        queued = None if self.ahead is None else self.ahead(state, state.it + count)
        # Stopped on the device at the tolerance?  (One transfer, with what
        # was queued for the check.)
        if queued is None:
            state.it, h, broke = self.device.settle(state.it, count)
        else:
            payload, arrays = queued
            state.it, h, broke, values = self.device.settle(
                state.it, count, arrays, self.engine.system.backend.to_host_many)
            state.ahead = (state.it, payload, values)
        self.status = (h, broke)
        state.r = self.device.r_current
