"""The arguments of ``bubbleflow bench``: configurations, peers, limits, validated before any work."""
from __future__ import annotations

import importlib
import math
import os
from dataclasses import dataclass

from ...case.bounds import max_csr_cells
from ...case.config import CaseError, option_value
from ...linalg.registry import DEFLATIONS, PRECONDITIONERS

__all__ = ["PROG", "DEFAULT_CONFIGS", "DEFAULT_CONFIGS_3D", "PEERS", "DEFAULT_MAXITER_PER_N",
           "DIMENSIONS", "LIMITS", "Config", "BenchConfig", "default_rtol", "cells_per_subdomain",
           "parse_config", "parse_args", "check_configs_3d", "count_option", "max_side",
           "check_copy_fits"]

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

#: Our default configurations in 3-D (``--dim 3``): PCG with multigrid, and
#: with Jacobi (the peer's algorithm with our kernels) up to 256^3.  Others
#: run where they work on a 3-D operator (:func:`check_configs_3d`).
DEFAULT_CONFIGS_3D = ("multigrid:none", "jacobi:none@256")
#: The problem's dimensions (``--dim``).
DIMENSIONS = (2, 3)

#: The peers: name -> description.
PEERS = {
    "cupy_cg": "cupy cg+jacobi (cuSPARSE CSR)",
    "scipy_cg": "scipy cg+jacobi (CSR)",
    "pyamg": "scipy cg + pyamg SA V-cycle",
    "pyamg_rs": "scipy cg + pyamg Ruge-Stuben V-cycle",
}

_SHORT = {"none": "none", "jacobi": "jac", "block_ic": "bic", "incomplete_poisson": "ip",
          "incomplete_poisson_scaled": "ips", "subdomains": "sd", "stripes": "str",
          "levelset_subdomains": "lsd", "multigrid": "mg"}
#: Default iteration limits, ours and the peer's: this many times n, enough
#: for the peer's CG + Jacobi to converge on the bubbly column (its counts:
#: docs/performance_records.md, "Figures behind code choices").
DEFAULT_MAXITER_PER_N = 30


#: Options that are a number of cells per side: at most :func:`max_side`
#: (the peers' CSR matrices and the deflation spaces index their entries
#: with int32, as case files with deflation do).
SIDE_OPTIONS = ("--sizes", "--peer-max-size", "--configs", "--weak-sizes")
_SIDE_WHY = "n^{dim} cells at most the int32 index limit of the CSR matrices"
#: Bounds of the size and count options: option -> (least, most, why the most).
LIMITS = {
    "--sizes": (16, None, _SIDE_WHY),
    "--peer-max-size": (1, None, _SIDE_WHY),
    "--configs": (1, None, _SIDE_WHY),          # @MAXN
    "--weak-sizes": (4, None, _SIDE_WHY),
    # The copy holds two buffers of this size at once.  Past the caches (at
    # most a few hundred MiB) the measured bandwidth no longer changes, so a
    # larger copy only risks the memory.
    "--copy-mib": (1, 8192, "two buffers of it are allocated; past the caches a larger copy "
                            "measures the same bandwidth"),
    # Each repeat is a whole timed solve: the median of a thousand is as
    # settled as it gets, and more is a typo that would run for hours.
    "--repeat": (1, 1000, "each is a whole timed solve; the median is settled long before"),
    "--peer-repeat": (1, 1000, "each is a whole timed solve; the median is settled long before"),
    # CG needs about 30 n iterations on the column (n at most max_side(2));
    # a larger limit only lets a stalled solve run for days.
    "--maxiter": (1, 10 ** 7, "a stalled solve would otherwise run for days"),
    "--peer-maxiter": (1, 10 ** 7, "a stalled solve would otherwise run for days"),
    "--check-every": (1, 10 ** 7, "iterations between checks: more than any --maxiter means none"),
    # The flow benchmark times every phase of every step: a few hundred steps
    # settle the means, and beyond this the run takes days.
    "--steps": (1, 10 ** 5, "each step is timed phase by phase; the means settle long before"),
    "--skip": (0, 10 ** 5, "warm-up needs a few steps"),
    # mpiexec -n R runs R processes on this one host: no host has this many
    # cores or GPUs, so a larger count is a typo.
    "--scaling": (1, 1024, "ranks on this one host"),
    # Each round runs every count's whole flow benchmark.
    "--rounds": (1, 100, "each round runs every count's whole benchmark; the medians settle "
                         "long before"),
}


#: Short forms of preconditioner options in the table's solver column.
_OPTION_SHORT = {"w_levels": "w", "cycle_precision": "", "degree": "k", "scale": "s",
                 "ratio": "r", "coarsest": "c", "min_side": "ms", "block_lines": "m"}
_VALUE_SHORT = {"float32": "f32", "float64": "f64"}


@dataclass(frozen=True)
class Config:
    """One of our configurations: ``PRE[(K=V,...)]:DEFL[@MAXN]``."""

    token: str
    preconditioner: str
    deflation: str
    max_size: int = 0          # 0: every size
    options: tuple = ()        # (name, value) pairs of the preconditioner's options

    @property
    def preconditioner_options(self):
        return dict(self.options)

    def _options_text(self, short):
        if not self.options:
            return ""
        if short:
            parts = [f"{_OPTION_SHORT.get(k, k)}{_VALUE_SHORT.get(str(v), v)}"
                     for k, v in self.options]
        else:
            parts = [f"{k}={v}" for k, v in self.options]
        return "(" + ",".join(parts) + ")"

    @property
    def method(self):
        if self.deflation != "none":
            return "dpcg"
        return "pcg" if self.preconditioner != "none" else "cg"

    @property
    def name(self):
        tail = f"+{self.deflation}" if self.deflation != "none" else ""
        return f"{self.method} {self.preconditioner}{self._options_text(False)}{tail}"

    @property
    def short(self):
        tail = f"+{_SHORT.get(self.deflation, self.deflation)}" if self.deflation != "none" else ""
        pre = _SHORT.get(self.preconditioner, self.preconditioner)
        return f"{self.method} {pre}{self._options_text(True)}{tail}"

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
    dim: int = 2                     # 2: n^2 cells; 3: n^3
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


def _int(option, text, minimum, maximum=None, why=""):
    """An integer option's value, ``minimum`` to ``maximum`` (None: no upper
    bound); ``why``: the bound's reason, said in the error."""
    try:
        v = float(text)
        ok = math.isfinite(v) and v == int(v)
    except (TypeError, ValueError):
        ok = False
    if not ok or int(v) < minimum or (maximum is not None and int(v) > maximum):
        expected = f"an integer >= {minimum}"
        if maximum is not None:
            expected += f" and <= {maximum}" + (f" ({why})" if why else "")
        raise _error(option, repr(text) if isinstance(text, str) else text, expected)
    return int(v)


def count_option(option, text, dim=2):
    """The value of a size or count option, within its bounds (:data:`LIMITS`)."""
    minimum, maximum, why = LIMITS[option]
    if option in SIDE_OPTIONS:
        maximum, why = max_side(dim), why.format(dim=dim)
    return _int(option, text, minimum, maximum, why)


def max_side(dim):
    """The most cells per side of a ``dim``-dimensional column: ``n^dim`` at
    most :func:`~bubbleflow.case.bounds.max_csr_cells` (the bench builds
    CSR matrices: the peers' and the deflation spaces')."""
    most = max_csr_cells(dim)
    n = int(round(most ** (1.0 / dim)))
    while n ** dim > most:
        n -= 1
    return n


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
    """``PRE[(K=V,...)]:DEFL[@MAXN]`` -> :class:`Config` (CaseError when
    malformed).  ``K=V``: options of the preconditioner (its registry entry's,
    e.g. ``multigrid(w_levels=3,cycle_precision=float32)``), values read as
    YAML scalars and checked here as the solver checks them; ``@MAXN`` within
    :func:`max_side`."""
    from ...linalg import registry

    expected = ("PRE[(K=V,...)]:DEFL[@MAXN] with PRE one of " + ", ".join(PRECONDITIONERS)
                + " and DEFL one of " + ", ".join(DEFLATIONS))
    text, _, limit = str(token).partition("@")
    pre, sep, defl = text.rpartition(":")
    options = []
    if pre.endswith(")") and "(" in pre:
        pre, _, inner = pre[:-1].partition("(")
        known = registry.PRECONDITIONERS[pre].options if pre in registry.PRECONDITIONERS else ()
        for item in filter(None, inner.split(",")):
            key, eq, value = item.partition("=")
            if not eq or key.strip() not in known:
                raise _error("--configs", repr(token),
                             f"options K=V of {pre!r}: " + (", ".join(known) or "none"))
            options.append((key.strip(), option_value(value.strip(), "--configs")))
    if not sep or pre not in PRECONDITIONERS or defl not in DEFLATIONS:
        raise _error("--configs", repr(token), expected)
    max_size = 0
    if limit:
        max_size = count_option("--configs", limit)
    return Config(str(token), pre, defl, max_size, _checked_options(token, pre, options))


def _checked_options(token, pre, options):
    """The ``K=V`` options of a configuration, checked as the solver checks
    them (:func:`~bubbleflow.linalg.solver.check_preconditioner_options`)
    before any work."""
    from ...linalg.solver import check_preconditioner_options

    try:
        checked = check_preconditioner_options(pre, dict(options))
    except ValueError as exc:
        raise _error("--configs", repr(token), f"options the solver takes ({exc})") from None
    return tuple((key, checked[key]) for key, _ in options)


def _pyamg_importable():
    try:
        importlib.import_module("pyamg")
        return True
    except Exception:
        return False


def _or(value, default):
    """An option's value, or its default when not given (None: so ``--flow`` can tell)."""
    return default if value is None else value


def parse_args(args):
    """The parsed ``argparse.Namespace`` -> :class:`BenchConfig`; CaseError on bad input."""
    from ...compute.backend import BackendUnavailable, get_backend

    dim = dim_option(getattr(args, "dim", None))
    try:
        backend = get_backend(args.backend)
    except BackendUnavailable as exc:
        raise CaseError(PROG, "--backend", f"got {args.backend!r}",
                        f"'auto' or 'numpy' on this machine (cupy unavailable: {exc})") from None
    gpu = backend.on_device
    if dim == 3:
        default_sizes = [128, 256, 512] if gpu else [32, 48]
    else:
        default_sizes = [1024, 2048, 4096] if gpu else [256, 512]
    sizes = [_int("--sizes", s, 16) for s in (args.sizes or default_sizes)]
    if dim == 2:
        _check_sizes_fit(sizes, backend)
    contrasts = [_float("--contrasts", c) for c in (args.contrasts or ["1", "1e3", "1e6"])]
    configs = [parse_config(t) for t in (args.configs if args.configs is not None
                                         else DEFAULT_CONFIGS if dim == 2
                                         else DEFAULT_CONFIGS_3D)]
    peers = _peers(args, gpu)
    if not configs and not peers:
        raise CaseError(PROG, None, "nothing to run (no --configs and no peer)",
                        "at least one configuration or peer")
    storage = args.storage or ("matrix_free" if dim == 3 else "diagonals")
    # A block wider than the grid is the whole grid: at most the largest size.
    cps = (_int("--cells-per-subdomain", args.cells_per_subdomain, 1, max(sizes),
                "the largest --sizes; a wider block is the whole grid")
           if args.cells_per_subdomain is not None else 0)
    # Every value checked before the 3-D probe (a set-up and two iterations).
    cfg = BenchConfig(
        sizes=sizes, contrasts=contrasts, backend=backend, configs=configs, peers=peers,
        cells_per_subdomain=cps,
        rhs=args.rhs or "gravity", seed=_int("--seed", _or(args.seed, "0"), 0),
        rtol=(_float("--rtol", args.rtol, 0.0, 1.0, "a number in (0, 1)")
              if args.rtol is not None else 0.0),
        maxiter=count_option("--maxiter", args.maxiter) if args.maxiter is not None else 0,
        check_every=count_option("--check-every", _or(args.check_every, "10")),
        storage=storage,
        repeat=count_option("--repeat", _or(args.repeat, "3")),
        peer_maxiter=(count_option("--peer-maxiter", args.peer_maxiter)
                      if args.peer_maxiter is not None else 0),
        peer_repeat=count_option("--peer-repeat", _or(args.peer_repeat, "1")),
        peer_max_size=(count_option("--peer-max-size", args.peer_max_size, dim)
                       if args.peer_max_size is not None else 0),
        copy_mib=count_option("--copy-mib", args.copy_mib) if args.copy_mib is not None else 0,
        csv=args.csv, progress=not args.no_progress, dim=dim)
    check_copy_fits(cfg.copy_mib, backend)
    if dim == 3:
        _check_sizes_fit_3d(sizes, backend, peers)
    # After the memory checks, whose line says what fits here; this bound
    # holds on any machine.
    for n in sizes:
        count_option("--sizes", n, dim)
    if dim == 3:
        check_configs_3d(configs, cps)
    if cfg.csv is not None:
        check_csv_writable(cfg.csv)
    return cfg


def _peers(args, gpu):
    """The peers to run: ``--peers`` checked, none with ``--no-peer``, else the default."""
    if args.no_peer:
        return []
    if not args.peers:
        return ["cupy_cg"] if gpu else ["scipy_cg"] + (["pyamg", "pyamg_rs"]
                                                       if _pyamg_importable() else [])
    peers = []
    for p in args.peers:
        if p not in PEERS:
            raise _error("--peers", repr(p), "one of " + ", ".join(PEERS))
        if p == "cupy_cg" and not gpu:
            raise _error("--peers", "'cupy_cg' with the numpy backend",
                         "scipy_cg or pyamg, or --backend cupy")
        if p.startswith("pyamg") and not _pyamg_importable():
            raise _error("--peers", f"{p!r}, which cannot be imported here",
                         "cupy_cg or scipy_cg (or pip install pyamg)")
        if p not in peers:
            peers.append(p)
    return peers


def dim_option(text):
    """``--dim``: 2 (default) or 3."""
    if text is None:
        return 2
    if str(text).strip() not in tuple(map(str, DIMENSIONS)):
        raise _error("--dim", repr(text) if isinstance(text, str) else text,
                     "2 (the n^2 column) or 3 (the n^3 column)")
    return int(str(text).strip())


#: The problem a 3-D configuration is tried on before anything runs: the
#: column at this many cells per side (multigrid gets levels), two iterations.
_PROBE_SIZE_3D = 16


def check_configs_3d(configs, requested_cells_per_subdomain=0):
    """Refuse, before any work, a configuration that does not run on a 3-D
    operator (a preconditioner built from the five diagonals; a deflation
    that is 2-D only): each is set up on the 3-D column at ``16^3`` on the
    host, with the arguments :func:`.ours.run_ours` passes, and runs two
    iterations; its error is the line."""
    from ...case.problem import bubbly_column_3d
    from ...linalg.solver import PressureSolver

    A, b, phi = bubbly_column_3d(_PROBE_SIZE_3D, 1e3)
    cps = cells_per_subdomain(_PROBE_SIZE_3D, requested_cells_per_subdomain)
    blocks = (max(1, _PROBE_SIZE_3D // cps),) * 3        # as run_ours passes them
    for config in configs:
        try:
            solver = PressureSolver(A, method=config.method, preconditioner=config.preconditioner,
                                    deflation=config.deflation, phi=phi, subdomains=blocks,
                                    maxiter=2,
                                    preconditioner_options=config.preconditioner_options)
            solver.solve(b)
        except Exception as exc:
            reason = " ".join(str(exc).split())[:160] or type(exc).__name__
            raise _error("--configs", f"{config.token!r} with --dim 3, which fails on a 3-D "
                         f"operator ({reason})",
                         "a configuration that runs in 3-D, e.g. " + " or ".join(
                             DEFAULT_CONFIGS_3D)) from None


def _refuse_unless_fits(n, dim, checks):
    """Refuse size ``n`` where ``8 * arrays * n^dim`` bytes exceed the safe
    share of the free memory, for each ``((free, where), arrays)`` of ``checks``."""
    from ...case.resources import SAFETY, allowance

    for (free, where), arrays in checks:
        need = 8 * arrays * n ** dim
        if free is not None and need > SAFETY * free:
            fit = int((SAFETY * free / (8 * arrays)) ** (1.0 / dim))
            shape = f"{n}^{dim}" + (" (--dim 3)" if dim == 3 else "")
            raise _error("--sizes", str(n), f"a size whose arrays fit in {where}: {shape} needs "
                         f"about {need / 2 ** 30:.3g} GiB, more than {allowance(free)} "
                         f"(at most about {fit} here)")


def _check_sizes_fit(sizes, backend):
    """Refuse a size whose arrays cannot fit in the free memory, before any work."""
    from ...compute.backend import get_backend
    from ...case.resources import ARRAYS_PER_CELL, available_memory

    # The pressure solver's arrays plus the peer's: its CSR matrix (5 float64
    # values and 5 int32 indices a row: 7.5 arrays) and CG vectors (x, r, p, q),
    # rounded up to whole arrays.  An estimate, not a measured peak.
    per_cell = ARRAYS_PER_CELL["pressure"] + 12
    checks = [(available_memory(backend), per_cell)]
    if backend.on_device:            # the problem is built on the host first
        checks.append((available_memory(get_backend("numpy")), per_cell))
    _refuse_unless_fits(max(sizes), 2, checks)


def _check_sizes_fit_3d(sizes, backend, peers):
    """Refuse a 3-D size whose arrays cannot fit in the free memory (the
    device's, ``cudaMemGetInfo`` on CuPy, and the host's, where the problem
    is built and the CPU peers run), before any work:
    :func:`.model3d.arrays_per_cell_3d`."""
    from ...compute.backend import get_backend
    from ...case.resources import available_memory
    from .model3d import arrays_per_cell_3d

    device, host = arrays_per_cell_3d(peers, backend.on_device)
    checks = [(available_memory(get_backend("numpy")), host)]
    if device is not None:
        checks.insert(0, (available_memory(backend), device))
    _refuse_unless_fits(max(sizes), 3, checks)


def check_copy_fits(copy_mib, backend):
    """Refuse a ``--copy-mib`` whose two buffers exceed the safe share of
    the backend's free memory, before any work (0: the default, which fits)."""
    from ...case.resources import SAFETY, available_memory

    free, where = available_memory(backend)
    need = 2 * copy_mib * 2 ** 20
    if copy_mib and free is not None and need > SAFETY * free:
        raise _error("--copy-mib", str(copy_mib),
                     f"a copy whose two buffers fit in {where}: {need / 2 ** 30:.3g} GiB needed, "
                     f"{free / 2 ** 30:.3g} GiB free")


def check_csv_writable(path):
    """Refuse a ``--csv`` path that is a folder or cannot be written, before any work."""
    if not path or os.path.isdir(path):
        raise _error("--csv", repr(path), "a file path (not a folder)")
    folder = os.path.dirname(os.path.abspath(path))
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as exc:
        raise _error("--csv", repr(path),
                     f"a file in a folder that can be created ({exc.strerror})")
    from ...io.atomic import probe_writable

    try:
        probe_writable(folder, f".{os.path.basename(path)}.{os.getpid()}.probe.tmp")
    except OSError as exc:
        raise _error("--csv", repr(path), f"a file in a writable folder ({exc.strerror})") from None
