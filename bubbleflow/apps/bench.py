"""Speed benchmark of the pressure solve, ours against the peer: ``bubbleflow bench``.

::

    bubbleflow bench [--sizes N ...] [--contrasts C ...] [--backend auto|numpy|cupy]
                     [--configs PRE:DEFL[@MAXN] ...] [--cells-per-subdomain N]
                     [--rhs gravity|random] [--seed S] [--rtol R] [--maxiter N]
                     [--check-every N] [--repeat K] [--peers NAME ...] [--no-peer]
                     [--peer-maxiter N] [--peer-repeat K] [--peer-max-size N]
                     [--copy-mib M] [--csv FILE] [--no-progress]

The standard solver problem of ``shared/notes/benchmarks.md`` (the bubbly
column of :func:`bubbleflow.case.problem.bubbly_column_phases`, ``n x n`` cells,
at each size and density contrast) is solved, on the same matrix,
right-hand side and tolerance, by

* our configurations (``PRE:DEFL``: :class:`~bubbleflow.linalg.solver.PressureSolver`
  with that preconditioner and deflation; DPCG A-DEF2 with a deflation, PCG
  without one, CG without either);
* the peer a user would pick instead (``--peers``): ``cupy_cg``, CuPy's
  ``cupyx.scipy.sparse.linalg.cg`` with a Jacobi ``LinearOperator`` on a
  cuSPARSE CSR matrix (GPU); ``scipy_cg``, SciPy's ``cg`` with Jacobi (CPU);
  ``pyamg``, SciPy's ``cg`` preconditioned by a PyAMG smoothed-aggregation
  V-cycle (CPU; where PyAMG is importable).

Right-hand sides (``--rhs``): ``gravity``, the first pressure solve of a
fluid at rest (:func:`bubbleflow.operators.poisson.gravity_rhs`); ``random``, seeded
uniform values, made zero-mean (at 4096^2 the gravity right-hand side has an
attainable-accuracy floor near 2e-8 in float64, above rtol 1e-8).

Timing: each configuration is warmed up once per size (set-up and solve, for
kernel compilation and library handles), then built once with its set-up
timed, solved once untimed for the memory count (the CuPy pool's free blocks
released before it, its size read after it: no allocation inside a timed
solve), and solved ``--repeat`` times; the peer gets a short warm-up (10
iterations, also its memory count) and ``--peer-repeat`` timed solves.  The
device is synchronised before every clock reading, and the TRUE residual of
every timed solve is computed.  The reported run is the median (lower median
for an even count) by solve time.

Columns (CSV: every column of :data:`COLUMNS`; the printed table: the main
ones): iterations, ms per iteration, time to solution, set-up time, final
true relative residual, converged and reason, bytes per iteration (the
solver's own count, ``SolveRecord.bytes_per_iteration``, else the model of
:func:`model_bytes_per_iteration`), achieved GB/s, floor ms per iteration
(bytes / copy bandwidth measured in the same run by a large device-to-device
copy, counting bytes read plus written), ratio to the floor, speedup over the
peer (solve only, and set-up plus solve), peak GPU memory (CuPy memory pool)
in bytes and in float64 grid arrays.  ``docs/performance.md`` defines each.

Exit codes: 0 when every run completed (converged or not: see the
``converged`` column), 1 when a run raised an error (it is recorded and the
others go on), 2 for bad arguments (one ``error:`` line, nothing run).
"""
from __future__ import annotations

import gc
import inspect
import io
import math
import os
import platform
import sys
import time
from dataclasses import dataclass

import numpy as np

from ..case.config import CaseError

__all__ = [
    "add_subparser", "cmd_bench", "run_bench", "parse_args", "BenchConfig", "Config",
    "COLUMNS", "DEFAULT_CONFIGS", "PEERS", "model_bytes_per_iteration",
    "peer_bytes_per_iteration", "copy_bandwidth", "cells_per_subdomain", "default_rtol",
    "format_table", "write_csv",
]

PROG = "bubbleflow bench"

#: Our default configurations: DPCG (A-DEF2) with level-set-subdomain
#: deflation and three preconditioners, and PCG without deflation (the
#: peer's algorithm with our kernels) up to 1024^2, where it is affordable.
DEFAULT_CONFIGS = (
    "jacobi:levelset_subdomains",
    "incomplete_poisson_scaled:levelset_subdomains",
    "block_ic:levelset_subdomains",
    "jacobi:none@1024",
    "incomplete_poisson_scaled:none@1024",
)

#: The peers: name -> description.
PEERS = {
    "cupy_cg": "cupy cg+jacobi (cuSPARSE CSR)",
    "scipy_cg": "scipy cg+jacobi (CSR)",
    "pyamg": "scipy cg + pyamg SA V-cycle",
}

#: Every CSV column, in order (``docs/performance.md`` says what each means).
COLUMNS = (
    "size", "cells", "contrast", "rhs", "rtol", "kind", "solver", "config",
    "iterations", "ms_per_iteration", "solve_ms", "setup_ms", "total_ms",
    "true_residual", "converged", "reason",
    "bytes_per_iteration", "bytes_source", "achieved_gb_s", "floor_ms_per_iteration",
    "ratio_to_floor", "speedup_solve", "speedup_total", "speedup_vs", "speedup_note",
    "peak_gpu_bytes", "peak_gpu_arrays",
    "operator_ms", "solver_setup_ms", "setup_cold_ms", "deflation_vectors", "subdomains",
    "maxiter",
    "runs", "solve_ms_min", "solve_ms_max", "engine",
    "backend", "device", "copy_gb_s",
)

_SHORT = {"none": "none", "jacobi": "jac", "block_ic": "bic", "incomplete_poisson": "ip",
          "incomplete_poisson_scaled": "ips", "subdomains": "sd", "stripes": "str",
          "levelset_subdomains": "lsd"}
_PEER_SHORT = {"cupy_cg": "cupy cg+jac", "scipy_cg": "scipy cg+jac", "pyamg": "pyamg sa+cg"}
_PEER_WARMUP_ITERATIONS = 10

#: Default iteration limits, ours and the peer's: this many times n (the
#: peer's CG + Jacobi needs about 4 n at contrast 1, 11 n at 1e3 and 19 n at
#: 1e6 (rtol 1e-6) on the bubbly column).
DEFAULT_MAXITER_PER_N = 30


# --------------------------------------------------------------------------
# Bytes per iteration: our own count
# --------------------------------------------------------------------------

# Arrays of N float64 that one iteration reads or writes, by piece (each
# array counted once per read and once per write).  The model of
# scripts/bench_solver.py, kept; used when the solver does not report its
# own count (SolveRecord.bytes_per_iteration).
#   matvec: five stored diagonals + x read, y written; matrix-free: two face
#   coupling arrays + x read, y written (the halo reads hit the cache)
_MATVEC = {"diagonals": 7, "matrix_free": 5}
#   preconditioner application: its coefficients and input read, output written
_PRECOND = {"none": 0, "jacobi": 3, "incomplete_poisson": 12, "incomplete_poisson_scaled": 13,
            "block_ic": 14}
#   CG vector work: 3 dot products (6 reads), x and r updates (6), p update (3)
_VECTORS = 15
#   A-DEF2 coarse correction: Z^T r (r + labels), (AZ)^T s (about 5 entries per
#   row: values and column indices, ~7.5 arrays), prolongation (labels +
#   write), the add (3)
_DEFLATION = 14


def model_bytes_per_iteration(n_cells, preconditioner, deflation, storage="diagonals"):
    """Bytes one of our iterations must move, by the model above (float64).

    >>> model_bytes_per_iteration(100, "jacobi", "none") // (8 * 100)
    25
    >>> model_bytes_per_iteration(100, "jacobi", "levelset_subdomains") // (8 * 100)
    39
    """
    arrays = _MATVEC[storage] + _PRECOND[preconditioner] + _VECTORS
    if deflation != "none":
        arrays += _DEFLATION
    return 8 * n_cells * arrays


def peer_bytes_per_iteration(n_cells, nnz, index_bytes=4, pointer_bytes=4):
    """Bytes one CG + Jacobi iteration on a CSR matrix must move (float64).

    SpMV: values and column indices (8 + ``index_bytes`` per entry), row
    pointers, x read, y written; Jacobi: inverse diagonal and r read, z
    written; two dot products (4 reads), the residual norm (1), and the p, x
    and r updates (9): 19 vector arrays in all with the SpMV's x and y.

    >>> peer_bytes_per_iteration(100, 500)
    21604
    """
    return (8 + index_bytes) * nnz + pointer_bytes * (n_cells + 1) + 8 * n_cells * 19


# --------------------------------------------------------------------------
# Arguments
# --------------------------------------------------------------------------

@dataclass(frozen=True)
class Config:
    """One of our configurations: ``PRE:DEFL[@MAXN]``."""

    token: str
    preconditioner: str
    deflation: str
    max_size: int = 0          # 0: every size

    @property
    def method(self):
        if self.deflation != "none":
            return "dpcg"
        return "pcg" if self.preconditioner != "none" else "cg"

    @property
    def name(self):
        tail = f"+{self.deflation}" if self.deflation != "none" else ""
        return f"{self.method} {self.preconditioner}{tail}"

    @property
    def short(self):
        tail = f"+{_SHORT.get(self.deflation, self.deflation)}" if self.deflation != "none" else ""
        return f"{self.method} {_SHORT.get(self.preconditioner, self.preconditioner)}{tail}"

    def runs_at(self, n):
        return not self.max_size or n <= self.max_size


@dataclass
class BenchConfig:
    """Validated arguments of ``bubbleflow bench``."""

    sizes: list
    contrasts: list
    backend: object
    configs: list
    peers: list
    cells_per_subdomain: int = 0     # 0: auto
    rhs: str = "gravity"
    seed: int = 0
    rtol: float = 0.0                # 0: per contrast (default_rtol)
    maxiter: int = 0                 # 0: 30 n
    check_every: int = 10
    storage: str = "diagonals"
    repeat: int = 3
    peer_maxiter: int = 0            # 0: 30 n
    peer_repeat: int = 1
    peer_max_size: int = 0           # 0: every size
    copy_mib: int = 0                # 0: 512 on the GPU, 64 on the CPU
    csv: str = None
    progress: bool = True
    # measured by run_bench
    device: str = ""
    host_device: str = ""
    copy_bw: float = 0.0             # bytes/s, the floor's bandwidth
    copy_host_bw: float = None       # bytes/s on the host, for CPU peers


def default_rtol(contrast):
    """rtol of the standard problem: 1e-8, 1e-6 at contrast 1e6 and above."""
    return 1e-6 if contrast >= 1e6 else 1e-8


def cells_per_subdomain(n, requested=0):
    """Deflation block edge in cells: ``requested``, else 64 at n >= 2048,
    32 at 256 <= n < 2048, and 8 below (16 x 16 blocks at 128^2, like the
    shipped case).

    >>> [cells_per_subdomain(n) for n in (32, 256, 1024, 2048, 4096)]
    [8, 32, 32, 64, 64]
    """
    if requested:
        return int(requested)
    if n >= 2048:
        return 64
    return 32 if n >= 256 else 8


def _error(option, got, expected):
    return CaseError(PROG, option, f"got {got}", expected)


def _int(option, text, minimum):
    try:
        v = float(text)
        ok = math.isfinite(v) and v == int(v)
    except (TypeError, ValueError):
        ok = False
    if not ok or int(v) < minimum:
        raise _error(option, repr(text) if isinstance(text, str) else text,
                     f"an integer >= {minimum}")
    return int(v)


def _float(option, text, low=0.0, high=math.inf, what=None):
    try:
        v = float(text)
    except (TypeError, ValueError):
        v = math.nan
    if not (math.isfinite(v) and low < v < high):
        raise _error(option, repr(text) if isinstance(text, str) else text,
                     what or f"a number > {low:g}")
    return v


def parse_config(token):
    """``PRE:DEFL[@MAXN]`` -> :class:`Config` (CaseError when malformed)."""
    from ..linalg.deflation import DEFLATIONS
    from ..linalg.precond import PRECONDITIONERS

    expected = ("PRE:DEFL[@MAXN] with PRE one of " + ", ".join(PRECONDITIONERS)
                + " and DEFL one of " + ", ".join(DEFLATIONS))
    text, _, limit = str(token).partition("@")
    pre, sep, defl = text.partition(":")
    if not sep or pre not in PRECONDITIONERS or defl not in DEFLATIONS:
        raise _error("--configs", repr(token), expected)
    max_size = 0
    if limit:
        max_size = _int("--configs", limit, 1)
    return Config(str(token), pre, defl, max_size)


def _pyamg_importable():
    try:
        import pyamg  # noqa: F401
        return True
    except Exception:
        return False


def parse_args(args):
    """The parsed ``argparse.Namespace`` -> :class:`BenchConfig`; CaseError on bad input."""
    from ..compute.backend import BackendUnavailable, get_backend

    try:
        backend = get_backend(args.backend)
    except BackendUnavailable as exc:
        raise CaseError(PROG, "--backend", f"got {args.backend!r}",
                        f"'auto' or 'numpy' on this machine (cupy unavailable: {exc})") from None
    gpu = backend.name == "cupy"
    sizes = [_int("--sizes", s, 16) for s in (args.sizes or ([1024, 2048, 4096] if gpu
                                                             else [256, 512]))]
    _check_sizes_fit(sizes, backend)
    contrasts = [_float("--contrasts", c) for c in (args.contrasts or ["1", "1e3", "1e6"])]
    configs = [parse_config(t) for t in (args.configs if args.configs is not None
                                         else DEFAULT_CONFIGS)]
    if args.no_peer:
        peers = []
    elif args.peers:
        peers = []
        for p in args.peers:
            if p not in PEERS:
                raise _error("--peers", repr(p), "one of " + ", ".join(PEERS))
            if p == "cupy_cg" and not gpu:
                raise _error("--peers", "'cupy_cg' with the numpy backend",
                             "scipy_cg or pyamg, or --backend cupy")
            if p == "pyamg" and not _pyamg_importable():
                raise _error("--peers", "'pyamg', which cannot be imported here",
                             "cupy_cg or scipy_cg (or pip install pyamg)")
            if p not in peers:
                peers.append(p)
    else:
        peers = ["cupy_cg"] if gpu else ["scipy_cg"] + (["pyamg"] if _pyamg_importable() else [])
    if not configs and not peers:
        raise CaseError(PROG, None, "nothing to run (no --configs and no peer)",
                        "at least one configuration or peer")
    cfg = BenchConfig(
        sizes=sizes, contrasts=contrasts, backend=backend, configs=configs, peers=peers,
        cells_per_subdomain=(_int("--cells-per-subdomain", args.cells_per_subdomain, 1)
                             if args.cells_per_subdomain is not None else 0),
        rhs=args.rhs, seed=_int("--seed", args.seed, 0),
        rtol=(_float("--rtol", args.rtol, 0.0, 1.0, "a number in (0, 1)")
              if args.rtol is not None else 0.0),
        maxiter=_int("--maxiter", args.maxiter, 1) if args.maxiter is not None else 0,
        check_every=_int("--check-every", args.check_every, 1),
        storage=args.storage,
        repeat=_int("--repeat", args.repeat, 1),
        peer_maxiter=(_int("--peer-maxiter", args.peer_maxiter, 1)
                      if args.peer_maxiter is not None else 0),
        peer_repeat=_int("--peer-repeat", args.peer_repeat, 1),
        peer_max_size=(_int("--peer-max-size", args.peer_max_size, 1)
                       if args.peer_max_size is not None else 0),
        copy_mib=_int("--copy-mib", args.copy_mib, 1) if args.copy_mib is not None else 0,
        csv=args.csv, progress=not args.no_progress)
    if cfg.csv is not None:
        _check_writable(cfg.csv)
    return cfg


def _check_sizes_fit(sizes, backend):
    """Refuse a size whose arrays cannot fit in the free memory, before any work."""
    from ..compute.backend import get_backend
    from ..case.resources import ARRAYS_PER_CELL, SAFETY, available_memory

    # The pressure solver's arrays plus the peer's: its CSR matrix (5 float64
    # values and 5 int32 indices a row: 7.5 arrays) and CG vectors (x, r, p, q),
    # rounded up to whole arrays.  An estimate, not a measured peak.
    per_cell = ARRAYS_PER_CELL["pressure"] + 12
    n = max(sizes)
    need = per_cell * 8 * n * n
    where = [available_memory(backend)]
    if backend.name != "numpy":            # the problem is built on the host first
        where.append(available_memory(get_backend("numpy")))
    for free, device in where:
        if free is not None and need > SAFETY * free:
            fit = int((SAFETY * free / (per_cell * 8)) ** 0.5)
            raise _error("--sizes", str(n), f"a size whose arrays fit in {device}: {n}^2 needs "
                         f"about {need / 2 ** 30:.3g} GiB, {free / 2 ** 30:.3g} GiB is free "
                         f"(at most about {fit} here)")


def _check_writable(path):
    if not path or os.path.isdir(path):
        raise _error("--csv", repr(path), "a file path (not a folder)")
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise _error("--csv", repr(path),
                     f"a file in a folder that can be created ({exc.strerror})")
    from ..io.atomic import probe_writable

    try:
        probe_writable(folder, f".{os.path.basename(path)}.{os.getpid()}.probe.tmp")
    except OSError as exc:
        raise _error("--csv", repr(path), f"a file in a writable folder ({exc.strerror})") from None


# --------------------------------------------------------------------------
# Measurements
# --------------------------------------------------------------------------

def copy_bandwidth(backend, nbytes, repeat=20):
    """Copy bandwidth in bytes/s, counting bytes read plus written.

    Returns ``(best, {method: bandwidth})``.  On the GPU a device-to-device
    copy of ``nbytes`` is timed with CUDA events, both as an elementwise
    kernel (``b[...] = a``) and as ``cudaMemcpyAsync``; the best is the
    floor's bandwidth.  On the CPU ``numpy.copyto`` is timed in batches.
    """
    xp = backend.xp
    n = max(1, int(nbytes) // 8)
    a = xp.random.random(n)                       # never time on zeros
    b = xp.empty_like(a)
    found = {}
    try:
        if backend.name == "cupy":
            def kernel():
                b[...] = a

            def memcpy():
                b.data.copy_from_device_async(a.data, a.nbytes)

            from ..compute.backend import gpu_median_ms

            for name, fn in (("kernel", kernel), ("memcpy", memcpy)):
                try:
                    found[name] = 2 * a.nbytes / (gpu_median_ms(fn, repeat, warmup=3) / 1e3)
                except Exception:                 # pragma: no cover - old CuPy
                    continue
        else:
            np.copyto(b, a)
            batch = 4
            times = []
            for _ in range(max(3, repeat // batch)):
                t = time.perf_counter()
                for _ in range(batch):
                    np.copyto(b, a)
                times.append((time.perf_counter() - t) / batch)
            found["memcpy"] = 2 * a.nbytes / float(np.median(times))
    finally:
        a = b = None
        _release(backend)
    return max(found.values()), found


def _release(backend):
    """Free what Python no longer holds, and the CuPy pool's free blocks."""
    gc.collect()
    if backend.name == "cupy":
        backend.synchronize()
        backend.xp.get_default_memory_pool().free_all_blocks()


def _pool_bytes(backend):
    if backend.name != "cupy":
        return None
    return int(backend.xp.get_default_memory_pool().total_bytes())


def _true_residual(matvec, b, x, xp):
    """``||b - A (x - mean x)|| / ||b||`` (b is zero-mean)."""
    r = b - matvec(x - x.mean())
    return float(xp.linalg.norm(r)) / float(xp.linalg.norm(b))


def device_info(backend):
    """Lines for the header: device, memory, versions."""
    import scipy

    info = {"device": backend.device_name, "backend": backend.name}
    versions = [f"numpy {np.__version__}", f"scipy {scipy.__version__}",
                f"python {platform.python_version()}"]
    if backend.name == "cupy":
        import cupy

        rt = cupy.cuda.runtime
        try:
            total = rt.getDeviceProperties(cupy.cuda.Device().id)["totalGlobalMem"]
        except Exception:                          # pragma: no cover
            total = rt.memGetInfo()[1]
        info["memory"] = f"{total / 2 ** 30:.1f} GiB GPU memory"

        def cuda(v):
            return f"{v // 1000}.{(v % 1000) // 10}"

        try:
            cudav = (f"CUDA runtime {cuda(rt.runtimeGetVersion())}, "
                     f"driver {cuda(rt.driverGetVersion())}")
        except Exception:                          # pragma: no cover
            cudav = "CUDA ?"
        versions = [cudav, f"cupy {cupy.__version__}"] + versions
    else:
        try:
            mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2 ** 30
            info["memory"] = f"{mem:.1f} GiB host memory, {os.cpu_count()} CPUs"
        except (ValueError, OSError, AttributeError):  # pragma: no cover
            info["memory"] = f"{os.cpu_count()} CPUs"
    try:
        import pyamg

        versions.append(f"pyamg {pyamg.__version__}")
    except Exception:
        pass
    from ..version import installed_version

    info["versions"] = f"bubbleflow {installed_version()}, " + ", ".join(versions)
    return info


# --------------------------------------------------------------------------
# One problem, one solver
# --------------------------------------------------------------------------

@dataclass
class Problem:
    n: int
    contrast: float
    rtol: float
    grid: object
    phi: np.ndarray
    phases: object
    rhs: np.ndarray        # flat, zero-mean, host


def make_problem(n, contrast, rhs="gravity", seed=0, rtol=0.0):
    """The bubbly column at ``n^2`` and ``contrast`` with its right-hand side (host)."""
    from ..operators.poisson import gravity_rhs
    from ..case.problem import bubbly_column_phases

    grid, phi, phases = bubbly_column_phases(n, contrast)
    if rhs == "gravity":
        f = gravity_rhs(grid, 9.81).ravel().astype(np.float64)
    else:
        f = np.random.default_rng(seed).uniform(-1.0, 1.0, n * n)
    f = f - f.mean()
    return Problem(n, float(contrast), rtol or default_rtol(contrast), grid, phi, phases, f)


def _inputs_on(backend, problem):
    """The face densities and the level set on ``backend``: a time step's inputs.

    Uploaded before the set-up clock starts (a flow run has them on the
    device already) and dropped before the memory count.
    """
    import types

    xp = backend.xp
    faces = types.SimpleNamespace(rho_x=xp.asarray(problem.phases.rho_x),
                                  rho_y=xp.asarray(problem.phases.rho_y))
    return faces, xp.asarray(problem.phi)


def _sync_clock(backend):
    backend.synchronize()
    return time.perf_counter()


def _median_run(runs):
    """The median run by solve time (the lower median for an even count)."""
    order = sorted(runs, key=lambda r: r["solve_s"])
    return order[(len(order) - 1) // 2]


def run_ours(problem, config, bench, warm_up, say):
    """One of our configurations on ``problem``: one row.

    Optional warm-up (set-up and solve); the timed set-up (operator assembly
    plus :class:`PressureSolver`: once on an emptied memory pool, then
    ``bench.repeat`` times, each replacing the last as a time step does, the
    median reported); a memory solve (the pool emptied of free
    blocks before it, its size read after it); ``bench.repeat`` timed solves.
    """
    from ..operators.poisson import assemble_pressure_operator
    from ..linalg.solver import PressureSolver

    backend = bench.backend
    xp = backend.xp
    n = problem.n
    cps = cells_per_subdomain(n, bench.cells_per_subdomain)
    blocks = (max(1, n // cps),) * 2
    maxiter = bench.maxiter or DEFAULT_MAXITER_PER_N * n

    def build():
        faces, phi = _inputs_on(backend, problem)
        t0 = _sync_clock(backend)
        A = assemble_pressure_operator(problem.grid, faces, backend=backend,
                                       storage=bench.storage)
        t1 = _sync_clock(backend)
        s = PressureSolver(A, method=config.method, preconditioner=config.preconditioner,
                           deflation=config.deflation, phi=phi, subdomains=blocks,
                           rtol=problem.rtol, maxiter=maxiter, check_every=bench.check_every)
        t2 = _sync_clock(backend)
        return A, s, t1 - t0, t2 - t1

    if warm_up:
        _release(backend)
        b = xp.asarray(problem.rhs)
        A, s, op_s, solver_s = build()
        t = _sync_clock(backend)
        x, rec = s.solve(b)
        dt = _sync_clock(backend) - t
        say(f"warm-up: set-up {1e3 * (op_s + solver_s):.1f} ms, {rec.iterations} its, "
            f"{1e3 * dt:.1f} ms, {rec.reason}")
        del A, s, b, x, rec
    _release(backend)
    b = xp.asarray(problem.rhs)
    # The set-up as a time step sees it: the previous step's operator and
    # solver are dropped and their memory is reused from CuPy's pool.  A
    # first set-up on an emptied pool (its device allocations included:
    # ``setup_cold_ms``), then ``bench.repeat`` set-ups, each replacing the
    # last; the one with the median total is reported.
    A, s, op_s, solver_s = build()
    cold_s = op_s + solver_s
    setups = []
    for _ in range(bench.repeat):
        A = s = None
        A, s, op_s, solver_s = build()
        setups.append((op_s + solver_s, op_s, solver_s))
    _, op_s, solver_s = sorted(setups)[(len(setups) - 1) // 2]
    _release(backend)                  # set-up temporaries out of the memory count
    x, rec = s.solve(b)                # the memory solve
    peaks = [_pool_bytes(backend)]
    say(f"set-up {1e3 * (op_s + solver_s):.1f} ms (operator {1e3 * op_s:.1f} ms; first, on an "
        f"emptied memory pool, {1e3 * cold_s:.1f} ms); memory solve: "
        f"{rec.iterations} its" + (f", pool {peaks[0] / 2 ** 30:.2f} GiB" if peaks[0] else ""))
    del x, rec
    runs = []
    for i in range(bench.repeat):
        t = _sync_clock(backend)
        x, rec = s.solve(b)
        dt = _sync_clock(backend) - t
        peaks.append(_pool_bytes(backend))
        res = _true_residual(A.matvec, b, x, xp)
        del x
        ok = bool(rec.converged) and res <= problem.rtol
        reason = rec.reason if (ok or not rec.converged) else "true residual above rtol"
        runs.append(dict(solve_s=dt, iterations=int(rec.iterations), residual=res, converged=ok,
                         reason=reason, bytes=getattr(rec, "bytes_per_iteration", None) or 0,
                         engine=getattr(rec, "engine", None),
                         solver_setup_s=float(getattr(rec, "setup_seconds", math.nan))))
        say(f"run {i + 1}/{bench.repeat}: {rec.iterations} its, {1e3 * dt:.1f} ms, "
            f"true residual {res:.2e}, {reason}")
    k = s.deflation.n_vectors if s.deflation is not None else 0
    del A, s, b
    _release(backend)
    med = _median_run(runs)
    nbytes, source = med["bytes"], "solver"
    if not nbytes:
        nbytes = model_bytes_per_iteration(n * n, config.preconditioner, config.deflation,
                                           bench.storage)
        source = "model"
    return _row(problem, bench, runs, med, kind="ours", solver=config.name, config=config.token,
                setup_s=op_s + solver_s, operator_s=op_s,
                solver_setup_s=med["solver_setup_s"], nbytes=nbytes, source=source,
                peaks=peaks, deflation_vectors=k, setup_cold_s=cold_s,
                subdomains=f"{blocks[0]}x{blocks[1]}" if config.deflation != "none" else None,
                maxiter=maxiter)


def _cg_function(gpu):
    """The peer's cg and LinearOperator, and a call that passes the tolerance."""
    if gpu:
        from cupyx.scipy.sparse.linalg import LinearOperator, cg
    else:
        from scipy.sparse.linalg import LinearOperator, cg
    params = inspect.signature(cg).parameters
    key = "rtol" if "rtol" in params else "tol"

    def solve(A, b, rtol, maxiter, M, callback):
        return cg(A, b, maxiter=maxiter, M=M, callback=callback, atol=0.0, **{key: rtol})

    return solve, LinearOperator


def run_peer(name, problem, bench, say):
    """The peer ``name`` on ``problem``: one row.

    The timed set-up (operator assembly, CSR matrix on the peer's device,
    inverse diagonal or AMG hierarchy; on the GPU after one untimed build
    that compiles the kernels); a short warm-up (the pool emptied of
    free blocks before it, its size read after it and after every timed
    solve); ``bench.peer_repeat`` timed solves.
    """
    from ..operators.poisson import assemble_pressure_operator

    gpu = name == "cupy_cg"
    backend = bench.backend if gpu else _numpy_backend()
    xp = backend.xp
    n = problem.n
    maxiter = bench.peer_maxiter or DEFAULT_MAXITER_PER_N * n
    _release(bench.backend)
    b = xp.asarray(problem.rhs)
    faces, _ = _inputs_on(backend, problem)
    cg, LinearOperator = _cg_function(gpu)

    def build():
        t0 = _sync_clock(backend)
        A = assemble_pressure_operator(problem.grid, faces, backend=backend)
        t1 = _sync_clock(backend)
        C = A.to_backend_sparse()
        del A
        if name == "pyamg":
            import pyamg

            ml = pyamg.smoothed_aggregation_solver(C, B=np.ones((C.shape[0], 1)),
                                                   symmetry="symmetric")
            M = ml.aspreconditioner(cycle="V")
        else:
            inv_d = 1.0 / C.diagonal()
            M = LinearOperator(C.shape, matvec=lambda r: inv_d * r, dtype=C.dtype)
        return C, M, t0, t1, _sync_clock(backend) - t0

    if gpu:
        # Untimed first build: CuPy compiles (or loads) the kernels it uses on
        # a fresh machine, seconds that are no part of a set-up.
        build()
        _release(backend)
    C, M, t0, t1, setup_s = build()
    del faces
    count = [0]

    def callback(_):
        count[0] += 1

    if gpu:
        _release(backend)              # set-up temporaries out of the memory count
    cg(C, b, problem.rtol, min(_PEER_WARMUP_ITERATIONS, maxiter), M, callback)   # warm-up
    peaks = [_pool_bytes(backend) if gpu else None]
    say(f"set-up {1e3 * setup_s:.1f} ms; solving (maxiter {maxiter})")
    runs = []
    for i in range(bench.peer_repeat):
        count[0] = 0
        t = _sync_clock(backend)
        x, info = cg(C, b, problem.rtol, maxiter, M, callback)
        dt = _sync_clock(backend) - t
        peaks.append(_pool_bytes(backend) if gpu else None)
        res = _true_residual(C.dot, b, x, xp)
        del x
        info = int(info)
        if info == 0:
            ok = res <= problem.rtol
            reason = "converged" if ok else "true residual above rtol"
        else:
            ok, reason = False, "maxiter" if info > 0 else "breakdown"
        runs.append(dict(solve_s=dt, iterations=count[0], residual=res, converged=ok,
                         reason=reason, engine=None))
        say(f"run {i + 1}/{bench.peer_repeat}: {count[0]} its, {1e3 * dt:.1f} ms, "
            f"true residual {res:.2e}, {reason}")
    nbytes = None
    if name != "pyamg":
        nbytes = peer_bytes_per_iteration(n * n, int(C.nnz), C.indices.dtype.itemsize,
                                          C.indptr.dtype.itemsize)
    del C, M, b
    _release(bench.backend)
    med = _median_run(runs)
    return _row(problem, bench, runs, med, kind="peer", solver=PEERS[name], config=name,
                setup_s=setup_s, operator_s=t1 - t0, solver_setup_s=None, nbytes=nbytes,
                source="model (peer)" if nbytes else None, peaks=peaks, deflation_vectors=None,
                subdomains=None, maxiter=maxiter, host=not gpu)


def _numpy_backend():
    from ..compute.backend import get_backend

    return get_backend("numpy")


def _row(problem, bench, runs, med, *, kind, solver, config, setup_s, operator_s,
         solver_setup_s, nbytes, source, peaks, deflation_vectors, subdomains, maxiter,
         host=False, setup_cold_s=None):
    n = problem.n
    its = med["iterations"]
    solve_ms = 1e3 * med["solve_s"]
    ms_it = solve_ms / its if its else None
    peaks = [p for p in peaks if p is not None]
    peak = max(peaks) if peaks else None
    reasons = sorted({r["reason"] for r in runs})
    bw = bench.copy_host_bw if host else bench.copy_bw
    row = dict(
        size=n, cells=n * n, contrast=problem.contrast, rhs=bench.rhs, rtol=problem.rtol,
        kind=kind, solver=solver, config=config, iterations=its, ms_per_iteration=ms_it,
        solve_ms=solve_ms, setup_ms=1e3 * setup_s, total_ms=1e3 * setup_s + solve_ms,
        true_residual=max(r["residual"] for r in runs),
        converged=all(r["converged"] for r in runs),
        reason=med["reason"] if len(reasons) == 1 else "/".join(reasons),
        bytes_per_iteration=int(nbytes) if nbytes else None, bytes_source=source,
        achieved_gb_s=None, floor_ms_per_iteration=None, ratio_to_floor=None,
        speedup_solve=None, speedup_total=None, speedup_vs=None, speedup_note=None,
        peak_gpu_bytes=peak, peak_gpu_arrays=(peak / (8 * n * n)) if peak is not None else None,
        operator_ms=1e3 * operator_s,
        solver_setup_ms=1e3 * solver_setup_s if solver_setup_s is not None else None,
        setup_cold_ms=1e3 * setup_cold_s if setup_cold_s is not None else None,
        deflation_vectors=deflation_vectors, subdomains=subdomains, maxiter=maxiter,
        runs=len(runs), solve_ms_min=1e3 * min(r["solve_s"] for r in runs),
        solve_ms_max=1e3 * max(r["solve_s"] for r in runs), engine=med.get("engine"),
        backend="numpy" if host else bench.backend.name,
        device=bench.host_device if host else bench.device,
        copy_gb_s=bw / 1e9 if bw else None)
    if nbytes and ms_it and bw:
        floor = 1e3 * nbytes / bw
        row.update(achieved_gb_s=nbytes / (ms_it * 1e-3) / 1e9, floor_ms_per_iteration=floor,
                   ratio_to_floor=ms_it / floor)
    return row


def add_speedups(rows, reference):
    """Speedup of our rows over the ``reference`` peer row of the same problem."""
    if reference is None:
        return
    for row in rows:
        if row["kind"] != "ours" or not row["solve_ms"]:
            continue
        row["speedup_solve"] = reference["solve_ms"] / row["solve_ms"]
        row["speedup_total"] = reference["total_ms"] / row["total_ms"]
        row["speedup_vs"] = reference["config"]
        notes = []
        if not reference["converged"]:
            notes.append(f"peer not converged ({reference['reason']}): a lower bound")
        if not row["converged"]:
            notes.append(f"ours not converged ({row['reason']})")
        row["speedup_note"] = "; ".join(notes) or None


# --------------------------------------------------------------------------
# Output
# --------------------------------------------------------------------------

def write_csv(path, rows):
    """Every column of :data:`COLUMNS`, one row per solver and problem, atomically."""
    import csv

    from ..io.atomic import atomic_text
    from .sweep import _cell

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(COLUMNS)
    for row in rows:
        w.writerow([_cell(row.get(c)) for c in COLUMNS])
    atomic_text(path, buf.getvalue())


def _fmt(v, spec, width):
    if v is None or (isinstance(v, float) and not math.isfinite(v)):
        return "-".rjust(width)
    return format(v, spec).rjust(width)


def _short_solver(row):
    if row["kind"] == "peer":
        return _PEER_SHORT.get(row["config"], row["config"])
    try:
        return parse_config(row["config"]).short
    except CaseError:
        return row["solver"]


def _reason_short(row):
    if row["converged"]:
        return "ok"
    r = row["reason"] or ""
    return {"true residual above rtol": "res>rtol", "stagnation": "stagn"}.get(r, r[:8])


def _contrast(v):
    """1 -> '1', 1000 -> '1e3', 1e6 -> '1e6', 31.6 -> '31.6'."""
    text = f"{v:g}"
    if "e" in text:
        mant, exp = text.split("e")
        text = f"{mant}e{int(exp)}"
    elif v >= 1000 and v == int(v) and str(int(v)).rstrip("0") == "1":
        text = f"1e{len(str(int(v))) - 1}"
    return text


def _speedup(row, key):
    v = row.get(key)
    if v is None:
        return "-"
    note = row.get("speedup_note") or ""
    mark = "?" if "ours not converged" in note else (">" if "peer not converged" in note else "")
    return mark + format(v, ".3g")


def format_table(rows):
    """The compact, aligned table of the main columns (one line per row)."""
    head = (f"{'n':>5} {'contrast':>8} {'solver':<15} {'its':>6} {'ms/it':>8} {'solve ms':>9} "
            f"{'setup ms':>9} {'true res':>8} {'status':<8} {'MB/it':>7} {'GB/s':>6} "
            f"{'floor ms':>8} {'x floor':>7} {'speedup':>7} {'+setup':>7} {'GiB':>6} "
            f"{'arrays':>6}")
    lines = [head]
    for r in rows:
        nbytes, peak = r.get("bytes_per_iteration"), r.get("peak_gpu_bytes")
        lines.append(
            f"{r['size']:>5} {_contrast(r['contrast']):>8} {_short_solver(r):<15.15} "
            f"{_fmt(r['iterations'], 'd', 6)} {_fmt(r['ms_per_iteration'], '.4f', 8)} "
            f"{_fmt(r['solve_ms'], '.1f', 9)} {_fmt(r['setup_ms'], '.1f', 9)} "
            f"{_fmt(r['true_residual'], '.1e', 8)} {_reason_short(r):<8.8} "
            f"{_fmt(nbytes / 1e6 if nbytes else None, '.1f', 7)} "
            f"{_fmt(r['achieved_gb_s'], '.0f', 6)} {_fmt(r['floor_ms_per_iteration'], '.4f', 8)} "
            f"{_fmt(r['ratio_to_floor'], '.2f', 7)} {_speedup(r, 'speedup_solve'):>7} "
            f"{_speedup(r, 'speedup_total'):>7} "
            f"{_fmt(peak / 2 ** 30 if peak is not None else None, '.2f', 6)} "
            f"{_fmt(r['peak_gpu_arrays'], '.1f', 6)}")
    return "\n".join(lines)


_LEGEND = ("# solver: dpcg = deflated PCG (A-DEF2), pcg = PCG without deflation; jac = jacobi, "
           "ips = incomplete_poisson_scaled, ip = incomplete_poisson, bic = block_ic; lsd = "
           "levelset_subdomains, sd = subdomains, str = stripes\n"
           "# status: ok = true residual <= rtol; speedup = peer solve time / ours, +setup = "
           "(set-up + solve) ratio; '>' lower bound (the peer stopped unconverged), '?' ours "
           "did not converge; GiB/arrays: peak CuPy memory pool, and / (8 n^2)")


# --------------------------------------------------------------------------
# The benchmark
# --------------------------------------------------------------------------

def run_bench(bench, out=None, err=None):
    """Run the benchmark described by ``bench`` (a :class:`BenchConfig`).

    Prints the header and, at the end, the table on ``out``; one progress
    line per run on ``err``.  Returns ``(rows, failures)``.
    """
    out = out or sys.stdout
    err = err or sys.stderr
    backend = bench.backend
    info = device_info(backend)
    bench.device = info["device"]
    bench.host_device = _numpy_backend().device_name
    gpu = backend.name == "cupy"
    mib = bench.copy_mib or (512 if gpu else 64)
    bench.copy_bw, found = copy_bandwidth(backend, mib * 2 ** 20)
    bench.copy_host_bw = None
    if any(p != "cupy_cg" for p in bench.peers):
        bench.copy_host_bw = (bench.copy_bw if not gpu
                              else copy_bandwidth(_numpy_backend(), 64 * 2 ** 20)[0])
    default_maxiter = f"{DEFAULT_MAXITER_PER_N} n"
    rtol_text = (f"{bench.rtol:g}" if bench.rtol
                 else "1e-8 (1e-6 at contrast >= 1e6)")
    print("# bubbleflow bench: the pressure solve, ours against the peer on the same matrix, "
          "right-hand side and tolerance", file=out)
    print(f"# device: {info['device']} ({backend.name}), {info['memory']}", file=out)
    print(f"# versions: {info['versions']}", file=out)
    print(f"# copy bandwidth (read + write, {mib} MiB): {bench.copy_bw / 1e9:.0f} GB/s ("
          + ", ".join(f"{k} {v / 1e9:.0f}" for k, v in found.items()) + ")"
          + (f"; host copy {bench.copy_host_bw / 1e9:.0f} GB/s (CPU peers)"
             if bench.copy_host_bw and gpu else ""), file=out)
    print(f"# problem: bubbly column n^2, float64, operator storage {bench.storage}, rhs "
          f"{bench.rhs}" + (f" (seed {bench.seed})" if bench.rhs == "random" else "")
          + f", rtol {rtol_text}", file=out)
    print("# ours: " + (", ".join(c.token for c in bench.configs) or "none")
          + "; deflation blocks of "
          + (f"{bench.cells_per_subdomain} cells" if bench.cells_per_subdomain
             else "64 cells (n >= 2048), 32 (256 <= n < 2048), 8 (n < 256)")
          + f"; maxiter {bench.maxiter or default_maxiter}; {bench.repeat} timed solves, "
          "median of them", file=out)
    print("# peers: " + (", ".join(bench.peers) or "none")
          + (f"; maxiter {bench.peer_maxiter or default_maxiter}; {bench.peer_repeat} timed "
             "solve(s)" + (f"; sizes <= {bench.peer_max_size}" if bench.peer_max_size else "")
             if bench.peers else ""), file=out)
    out.flush()

    jobs = []
    for n in bench.sizes:
        for contrast in bench.contrasts:
            peers = [p for p in bench.peers if not bench.peer_max_size or n <= bench.peer_max_size]
            configs = [c for c in bench.configs if c.runs_at(n)]
            jobs.append((n, contrast, peers, configs))
    total = sum(len(p) + len(c) for _, _, p, c in jobs)
    rows, failures, done = [], 0, 0
    warmed = set()
    t_start = time.perf_counter()

    def progress(label):
        def say(text):
            if bench.progress:
                print(f"bench [{done + 1}/{total}] {label}: {text} "
                      f"({time.perf_counter() - t_start:.0f} s)", file=err, flush=True)
        return say

    interrupted = False
    try:
        for n, contrast, peers, configs in jobs:
            problem = make_problem(n, contrast, bench.rhs, bench.seed, bench.rtol)
            these = []
            for name in peers:
                say = progress(f"{n}^2 contrast {_contrast(contrast)} {name}")
                try:
                    these.append(run_peer(name, problem, bench, say))
                except Exception as exc:
                    failures += 1
                    these.append(_failed_row(problem, bench, "peer", PEERS[name], name, exc))
                    say(f"failed: {these[-1]['reason']}")
                done += 1
            for config in configs:
                say = progress(f"{n}^2 contrast {_contrast(contrast)} {config.name}")
                key = (n, config.token)
                try:
                    these.append(run_ours(problem, config, bench, key not in warmed, say))
                    warmed.add(key)
                except Exception as exc:
                    failures += 1
                    these.append(_failed_row(problem, bench, "ours", config.name, config.token,
                                             exc))
                    say(f"failed: {these[-1]['reason']}")
                done += 1
            reference = next((r for r in these if r["kind"] == "peer"
                              and r.get("solve_ms") is not None), None)
            add_speedups(these, reference)
            rows.extend(these)
            if bench.csv:
                write_csv(bench.csv, rows)
    except KeyboardInterrupt:
        interrupted = True
        raise
    finally:
        if bench.csv and rows:
            write_csv(bench.csv, rows)
        if rows or not interrupted:
            if bench.csv:
                print(f"# wrote {bench.csv} ({len(rows)} rows, {len(COLUMNS)} columns)", file=out)
            if interrupted:
                print("# interrupted: the rows so far", file=out)
            print(_LEGEND, file=out)
            print(format_table(rows), file=out, flush=True)
    return rows, failures


def _failed_row(problem, bench, kind, solver, config, exc):
    _release(bench.backend)
    msg = " ".join(str(exc).split())[:200]
    row = {c: None for c in COLUMNS}
    row.update(size=problem.n, cells=problem.n ** 2, contrast=problem.contrast, rhs=bench.rhs,
               rtol=problem.rtol, kind=kind, solver=solver, config=config, converged=False,
               reason=f"failed: {type(exc).__name__}: {msg}", backend=bench.backend.name,
               device=bench.device)
    return row


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------

def cmd_bench(args):
    """``bubbleflow bench``: validate the arguments, run, print, write the CSV.

    Returns
    -------
    int
        0 when every run completed, 1 when one raised an error.

    Raises
    ------
    CaseError
        Bad arguments (before anything runs).
    """
    bench = parse_args(args)
    _, failures = run_bench(bench)
    return 1 if failures else 0


def _one_line_error(message):
    """argparse's errors for ``bench``: one ``error:`` line (exit 2), via CaseError."""
    raise CaseError(PROG, None, message)


def add_subparser(subparsers):
    """Register ``bubbleflow bench`` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "bench", help="speed benchmark of the pressure solve: ours against the peer",
        description="Solve the standard bubbly-column pressure problem at each size and "
                    "density contrast with our configurations and with the peer (CuPy cg + "
                    "Jacobi on the GPU, SciPy cg + Jacobi and PyAMG on the CPU), on the same "
                    "matrix, right-hand side and tolerance; print the device, versions, copy "
                    "bandwidth and a table (iterations, ms per iteration, time to solution, "
                    "set-up, true residual, bytes per iteration, GB/s, floor, speedup, peak "
                    "GPU memory); write every column to --csv.  See docs/performance.md.")
    p.add_argument("--sizes", nargs="+", metavar="N",
                   help="cells per side (default 1024 2048 4096 on the GPU, 256 512 on the CPU)")
    p.add_argument("--contrasts", nargs="+", metavar="C",
                   help="density contrasts rho_liquid / rho_gas (default 1 1e3 1e6)")
    p.add_argument("--backend", choices=("auto", "numpy", "cupy"), default="auto",
                   help="array backend of our solver and of the GPU peer (default auto)")
    p.add_argument("--configs", nargs="*", metavar="PRE:DEFL[@MAXN]",
                   help="our configurations, preconditioner:deflation, optionally @MAXN: only at "
                        "sizes <= MAXN (default: " + " ".join(DEFAULT_CONFIGS) + "); none "
                        "given: peers only")
    p.add_argument("--cells-per-subdomain", metavar="N",
                   help="deflation block edge in cells (default 64 at n >= 2048, 32 at "
                        "256 <= n < 2048, 8 below)")
    p.add_argument("--rhs", choices=("gravity", "random"), default="gravity",
                   help="gravity: the standard first-projection rhs; random: seeded uniform, "
                        "zero-mean (default gravity)")
    p.add_argument("--seed", default="0", metavar="S", help="seed of --rhs random (default 0)")
    p.add_argument("--rtol", metavar="R",
                   help="relative tolerance of every solve (default 1e-8, 1e-6 at contrast >= 1e6)")
    p.add_argument("--maxiter", metavar="N",
                   help=f"our iteration limit (default {DEFAULT_MAXITER_PER_N} n)")
    p.add_argument("--check-every", default="10", metavar="N",
                   help="our iterations between convergence checks (default 10)")
    p.add_argument("--storage", choices=("diagonals", "matrix_free"), default="diagonals",
                   help="our operator storage (default diagonals)")
    p.add_argument("--repeat", default="3", metavar="K",
                   help="timed solves of each of our configurations; the median is reported "
                        "(default 3)")
    p.add_argument("--peers", nargs="+", metavar="NAME",
                   help="peers: " + ", ".join(PEERS) + " (default cupy_cg on the GPU; scipy_cg, "
                        "and pyamg where importable, on the CPU)")
    p.add_argument("--no-peer", action="store_true", help="run no peer")
    p.add_argument("--peer-maxiter", metavar="N",
                   help=f"the peer's iteration limit (default {DEFAULT_MAXITER_PER_N} n, enough to "
                        "converge)")
    p.add_argument("--peer-repeat", default="1", metavar="K",
                   help="timed solves of the peer (default 1: it is slow)")
    p.add_argument("--peer-max-size", metavar="N", help="run the peer only at sizes <= N")
    p.add_argument("--copy-mib", metavar="M",
                   help="size of the copy that measures the bandwidth (default 512 MiB on the "
                        "GPU, 64 on the CPU)")
    p.add_argument("--csv", metavar="FILE", help="write every column to FILE (atomically)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress lines on stderr (one per run otherwise)")
    p.set_defaults(func=cmd_bench, one_line_errors=True)
    p.error = _one_line_error
    return p
