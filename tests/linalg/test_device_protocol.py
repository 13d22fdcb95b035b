"""The Krylov loop's device protocol (bubbleflow.linalg.krylov.device) on a
NumPy stand-in of a device engine: textbook PCG that stops "on the device"
at the tolerance.  A check's true residual queued behind a stretch of
iterations and read with their status gives the solve of reading it after
the status, bit for bit, with one host wait fewer per such check."""
import numpy as np
import pytest

from bubbleflow.case.problem import bubbly_column
from bubbleflow.compute.backend import get_backend
from bubbleflow.linalg.krylov import cg as cg_module
from bubbleflow.linalg.krylov import solve
from bubbleflow.linalg.krylov.device import DeviceIterations
from bubbleflow.linalg.krylov.engine import ArrayEngine
from bubbleflow.linalg.precond import make_preconditioner


class NumpyDeviceEngine:
    """The protocol's calls on NumPy (one iteration at a time, the flags
    plain host values)."""

    bytes_per_iteration = 0

    def __init__(self, system):
        self.e = ArrayEngine(system)
        self.settles = self.status_alone = 0

    def begin(self, x, r, hist, it, bnorm=None, tol_rel=None, own=True):
        self.x = np.zeros_like(r) if x is None else x.copy()     # (None: the zero guess)
        self.r_current, self.hist, self.it = r.copy(), hist, it
        y = self.e.precondition(self.r_current)
        self.p, self.rz = y.copy(), float(self.e.dot(self.r_current, y))
        self.bad = np.zeros((), dtype=bool)
        self.done = False
        if bnorm is not None:
            self.tolerance(bnorm, tol_rel)

    def tolerance(self, bnorm, tol_rel):
        self.bnorm, self.tol_rel = bnorm, tol_rel

    def load(self, x, r, p, rz, bad, hist, it, bnorm, tol_rel):
        self.x[...] = x
        self.r_current, self.p, self.rz = r.copy(), p.copy(), float(rz)
        self.hist, self.it, self.done = hist, it, False
        self.bad[...] = False
        self.tolerance(bnorm, tol_rel)

    def iterate(self, count):
        for _ in range(count):
            if self.done or self.bad:
                continue                    # past the tolerance: no-ops
            w = self.e.operator(self.p)
            pw = float(self.e.dot(self.p, w))
            if not np.isfinite(pw) or pw == 0.0:
                self.bad[...] = True
                continue
            alpha = self.rz / pw
            self.x += alpha * self.p
            self.r_current -= alpha * w
            self.it += 1
            self.hist[self.it] = float(self.e.norm(self.r_current)) / self.bnorm
            if self.hist[self.it] <= self.tol_rel:
                self.done = True
                continue
            y = self.e.precondition(self.r_current)
            rz = float(self.e.dot(self.r_current, y))
            self.p = y + (rz / self.rz) * self.p
            self.rz = rz

    def settle(self, it, count, extra=(), read=None):
        self.settles += 1
        self.status_alone += not extra          # a transfer (a host wait) of its own
        status = (self.it, float(self.hist[self.it]), bool(self.bad))
        return (*status, read(list(extra))) if extra else status


def _solve(monkeypatch, ahead, A, b, M, **kw):
    """A solve on the stand-in, its check's work queued ahead or not;
    ``(x, record, host waits, settles)``: a wait per transfer, the status
    read alone one too."""
    if not ahead:
        monkeypatch.setattr(cg_module, "DeviceIterations",
                            lambda *a, ahead=None, **k: DeviceIterations(*a, **k))
    x, rec, transfers, engine = _solve_on(NumpyDeviceEngine, monkeypatch, A, b, M, **kw)
    return x, rec, transfers + engine.status_alone, engine.settles


@pytest.mark.parametrize("rtol, check_every", [(1e-8, 10), (1e-8, 3), (1e-12, 50)])
def test_a_checks_work_queued_ahead_gives_the_same_solve_with_a_host_wait_fewer(
        monkeypatch, rtol, check_every):
    A, b, _ = bubbly_column(48, 1e3)
    M = make_preconditioner("multigrid", A)
    kw = dict(rtol=rtol, check_every=check_every, maxiter=400)
    x0, rec0, waits0, settles0 = _solve(monkeypatch, False, A, b, M, **kw)
    x1, rec1, waits1, settles1 = _solve(monkeypatch, True, A, b, M, **kw)
    assert rec1.engine == "fused"
    # (1e-12 is below this problem's attainable accuracy: restarts, then
    # stagnation, the checks' iterates from before the restarts.)
    assert rec1.converged == (rtol == 1e-8)
    np.testing.assert_array_equal(x1, x0)
    assert (rec1.iterations, rec1.residual, rec1.reason) == \
        (rec0.iterations, rec0.residual, rec0.reason)
    np.testing.assert_array_equal(rec1.residual_history, rec0.residual_history)
    assert rec1.true_residual_checks == rec0.true_residual_checks
    assert settles1 == settles0
    # A check whose iterate's true residual was queued reads it with the
    # status: a converged solve's one verified check waits once, not twice.
    checks = len(rec0.true_residual_checks)
    assert checks >= 1 and settles1 >= 1
    assert waits1 <= waits0
    if rec1.converged:
        assert checks == 1
        assert waits0 == 1 + settles0 + checks and waits1 == 1 + settles1


def test_no_work_is_queued_where_the_check_is_not_confirmed(monkeypatch):
    """``confirm=False`` (an inner solve whose caller checks the true
    residual): the recursion is accepted, nothing is queued for a check."""
    A, b, _ = bubbly_column(32, 1e3)
    M = make_preconditioner("multigrid", A)
    x, rec, waits, settles = _solve(monkeypatch, True, A, b, M, rtol=1e-8, confirm=False)
    assert rec.converged and rec.true_residual_checks == []
    assert waits == 1 + settles


class NumpyEngineTakingTheTolerance(NumpyDeviceEngine):
    """The stand-in that also takes the tolerance from the start's norms,
    as the fused engine's ``bf_tolerance_from_norms`` does: the first
    stretch is then queued before the start is read."""

    def tolerance_from_norms(self, norms, rtol, atol, has_reference):
        norms = np.asarray(norms, dtype=np.float64)
        bnorm = norms[0]
        against = norms[2] if has_reference and norms[2] != 0.0 else bnorm
        scaled = np.float64(rtol) * against
        tol = np.float64(atol) if atol > scaled else scaled
        with np.errstate(divide="ignore", invalid="ignore"):
            tol_rel, h0 = tol / bnorm, norms[1] / bnorm
        self.tolerance(float(bnorm), float(tol_rel))
        self.hist[0] = h0
        starts = bnorm > 0.0 and np.isfinite(bnorm) and np.isfinite(h0) and h0 > tol_rel
        self.done = self.done or not starts or bool(self.bad)


def _solve_on(engine_type, monkeypatch, A, b, M, **kw):
    """``(x, record, transfers, engine)`` of a solve on a stand-in engine."""
    backend = get_backend("numpy")
    transfers = []
    plain = type(backend).to_host_many

    def counted(self, arrays):
        transfers.append(len(arrays))
        return plain(self, arrays)
    monkeypatch.setattr(type(backend), "to_host_many", counted)
    engines = []

    def select(system):
        engines.append(engine_type(system))
        return engines[0]
    try:
        x, rec = solve(A, b, M=M, select=select, **kw)
    finally:
        monkeypatch.undo()
    return x, rec, len(transfers), engines[0] if engines else None


def _same_solves(one, two):
    (x0, r0, *_), (x1, r1, *_) = one, two
    np.testing.assert_array_equal(x1, x0)
    assert (r1.iterations, r1.residual, r1.reason, r1.converged, r1.rhs_norm) == \
        (r0.iterations, r0.residual, r0.reason, r0.converged, r0.rhs_norm)
    np.testing.assert_array_equal(r1.residual_history, r0.residual_history)
    assert r1.true_residual_checks == r0.true_residual_checks


@pytest.mark.parametrize("rtol, check_every", [(1e-8, 10), (1e-8, 3), (1e-12, 50)])
def test_the_first_stretch_queued_before_the_start_is_read_is_the_same_solve(
        monkeypatch, rtol, check_every):
    A, b, _ = bubbly_column(48, 1e3)
    M = make_preconditioner("multigrid", A)
    kw = dict(rtol=rtol, check_every=check_every, maxiter=400)
    read_first = _solve_on(NumpyDeviceEngine, monkeypatch, A, b, M, **kw)
    ahead = _solve_on(NumpyEngineTakingTheTolerance, monkeypatch, A, b, M, **kw)
    _same_solves(read_first, ahead)
    assert ahead[1].engine == "fused"
    assert ahead[2] == read_first[2] - 1                 # the start's own transfer


@pytest.mark.parametrize("case", ["zero right-hand side", "start at the answer", "reference",
                                  "maxiter 1"])
def test_a_first_stretch_queued_ahead_where_the_first_check_ends_the_solve(monkeypatch, case):
    A, b, _ = bubbly_column(32, 1e3)
    M = make_preconditioner("multigrid", A)
    kw = dict(rtol=1e-8, maxiter=400)
    if case == "zero right-hand side":
        b = np.zeros_like(b)
    elif case == "start at the answer":
        kw["x0"] = _solve_on(NumpyDeviceEngine, monkeypatch, A, b, M, **kw)[0]
    elif case == "reference":
        kw["reference"] = 10.0 * b
    else:
        kw["maxiter"] = 1
    read_first = _solve_on(NumpyDeviceEngine, monkeypatch, A, b, M, **kw)
    ahead = _solve_on(NumpyEngineTakingTheTolerance, monkeypatch, A, b, M, **kw)
    _same_solves(read_first, ahead)
    if case in ("zero right-hand side", "start at the answer"):
        assert ahead[1].iterations == 0


def test_work_behind_a_check_is_queued_before_it_is_read_and_gets_the_answer(monkeypatch):
    """``behind`` sees each candidate before the transfer that reads its
    check; the answer returned is the candidate the last check accepted."""
    A, b, _ = bubbly_column(32, 1e3)
    M = make_preconditioner("multigrid", A)
    backend = get_backend("numpy")
    plain, reads, offered = type(backend).to_host_many, [], []

    def counted(self, arrays):
        reads.append(len(arrays))
        return plain(self, arrays)

    def behind(x):
        offered.append((x, len(reads)))

    monkeypatch.setattr(type(backend), "to_host_many", counted)
    x, rec = solve(A, b, M=M, rtol=1e-8, maxiter=400, behind=behind,
                   select=lambda system: NumpyEngineTakingTheTolerance(system))
    monkeypatch.undo()
    assert rec.converged and offered
    candidate, reads_before = offered[-1]
    assert x is candidate
    assert reads_before < len(reads)                     # read after it was offered
    plain_x, plain_rec, *_ = _solve_on(NumpyEngineTakingTheTolerance, monkeypatch, A, b, M,
                                       rtol=1e-8, maxiter=400)
    np.testing.assert_array_equal(x, plain_x)
    assert plain_rec.iterations == rec.iterations


class _Pointer:
    def __init__(self, ptr):
        self.ptr = ptr


class _DeviceArray:
    """What a launch argument's key reads of a device array: its address."""

    def __init__(self, ptr):
        self.data = _Pointer(ptr)


def test_launch_argument_keys_are_memoised_on_the_tuple():
    """The fused engine's signature keys a launch's arguments once per
    argument tuple: the same tuple gives the keys computed before (the
    memo's), an equal new tuple is keyed afresh, and the memo stays bounded."""
    from bubbleflow.linalg.fused import stages

    engine = stages.FusedStages.__new__(stages.FusedStages)
    engine._args_keys = {}
    args = (_DeviceArray(4096), np.int32(7), np.float64(0.5))
    keys = engine._args_key(args)
    assert keys == (("ptr", 4096), ("<i4", 7), ("<f8", 0.5))
    assert engine._args_key(args) is keys
    again = (_DeviceArray(4096), np.int32(7), np.float64(0.5))
    assert engine._args_key(again) == keys and engine._args_key(again) is not keys
    for k in range(stages.ARGS_KEYS_KEPT + 5):
        engine._args_key((_DeviceArray(k),))
    assert len(engine._args_keys) <= stages.ARGS_KEYS_KEPT
