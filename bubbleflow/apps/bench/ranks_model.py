"""A performance model of one CG iteration on several ranks, what it needs
measured, and ``mpiexec -n N bubbleflow bench``, which prints it beside the
measured time.

One Jacobi-PCG iteration on a rank costs

* its memory traffic, ``passes x 8 x cells_on_the_rank`` bytes at the
  rank's share of the node's copy bandwidth (every rank copying at once,
  over as many bytes as the iteration's arrays hold, :func:`working_bytes`:
  a cache's rate where they fit in one);
* one halo swap (the operator's product): a message of one plane to each
  neighbour and one from it, overlapped with the slab's own faces but not
  with the rest, costed as the swap itself measured (latency: the swap of
  8 bytes; bandwidth: a plane's bytes over the time a plane's swap adds),
  the path the product takes (NCCL device to device, or MPI, CuPy arrays
  staged through the host);
* its all-reduces: the array loop's three of one value (``p . w``,
  ``r . r``, ``r . y``), the fused engine's two (``p . w``, then ``r . r``
  and ``r . y`` together), each measured as the loop makes it (the fused
  engine's replayed from a CUDA graph, into kept buffers);
* the array loop's three dot products at the rank's dot rate, measured as
  the copy bandwidth is (a dot reads two vectors; it runs below the copy
  rate, cuBLAS's at about half on an H100); the fused engine sums its dots
  inside its kernels, at the copy rate;
* the host's and the launches' own time: an iteration takes at least that,
  measured as the loop's time on a 16^d grid less its swaps and sums (the
  array loop on a GPU: the host issuing some forty operations; the fused
  engine: its graph's launches).

The passes of the fused engine (:mod:`bubbleflow.linalg.fused.ranks`) are
counted on its kernels (:func:`fused_passes`: each array read once and
written once); those of the array loop on its code (each NumPy operation
reads its operands and writes its result once): the product, for ``d``
axes, zeroes the result (1) and per axis forms the difference, the flux
and adds it to both sides (12), then returns a copy (2); ``p . w`` (2),
``x += alpha p`` and ``r -= alpha w`` (5 each: the scaled temporary and the
add), ``r . r`` (1: one operand read), ``y = D^-1 r`` (3), ``r . y`` (2),
``p = y + beta p`` (5); on CuPy each operation is a kernel that does the
same, but the product is one kernel (``d + 2`` arrays, then the copy).
"""
from __future__ import annotations

import dataclasses
import time
import warnings
from dataclasses import dataclass

import numpy as np

from .ranks_solve import default_solve, solve_line

__all__ = ["array_passes", "Link", "predict_iteration", "measure_link", "working_bytes",
           "run_ranks_bench",
           "RANKS_ITERATIONS", "RANKS_MORE", "RANKS_SOLVES", "DOT_PASSES", "fused_passes",
           "ALLREDUCES"]

#: Jacobi-PCG iterations of the short timed solves (rtol 0: no tolerance stops them)
#: and how many more the long ones take (an iteration: their difference).
RANKS_ITERATIONS = 20
RANKS_MORE = 100

#: Timed solves of each length per size, after one untimed; their median is used.
RANKS_SOLVES = 3


def fused_passes(ndim, jacobi=True):
    """Grid arrays one iteration of the ranks' fused engine
    (:mod:`bubbleflow.linalg.fused.ranks`) reads or writes: the product
    (``p`` and the ``ndim`` couplings read, ``w`` written), the update
    (``x``, ``p``, ``r``, ``w`` and ``D^-1`` read, ``x`` and ``r`` written;
    its dots summed on the way) and the direction (``r``, ``D^-1`` and
    ``p`` read, ``p`` written): the engine's ``bytes_per_iteration``."""
    return (ndim + 2) + (6 + jacobi) + (3 + jacobi)


#: All-reduces an iteration: the array loop's three (``p . w``, ``r . r``,
#: ``r . y``), the fused engine's two (``r . r`` and ``r . y`` together).
ALLREDUCES = {"generic": 3, "fused": 2}


def array_passes(ndim, device=False):
    """Grid arrays one Jacobi-PCG iteration of the array code reads or writes;
    on a GPU (``device``) the product is one CUDA kernel (``x`` and the
    ``ndim`` couplings read, the result written) and its copy."""
    product = ndim + 2 + 2 if device else 1 + 12 * ndim + 2
    return product + 2 + 5 + 5 + 1 + 3 + 2 + 5


#: Of :func:`array_passes`, the dot products' (``p . w``, ``r . r``, ``r . y``).
DOT_PASSES = 5


@dataclass(frozen=True)
class Link:
    """What was measured of the node: per-rank copy bandwidth (bytes/s, read
    plus written, every rank copying at once), the link's latency (s) and
    bandwidth (bytes/s) from halo swaps, an all-reduce's latency (s); and
    the rank's dot product of two vectors (bytes of both read a second;
    None: at the copy bandwidth), which runs below it (cuBLAS's ``ddot``
    on an H100 at about half); and ``issue``, the host's time to issue one
    iteration's operations (s), which bounds a GPU iteration from below
    while the device is quicker (small grids)."""

    copy_bandwidth: float
    latency: float
    bandwidth: float
    allreduce: float
    dot_bandwidth: float = None
    issue: float = 0.0


def predict_iteration(cells, plane_cells, ndim, ranks, link, passes=None, engine="generic"):
    """Seconds one iteration takes on ``ranks`` ranks sharing ``cells``
    cells (slabs of whole planes of ``plane_cells`` cells, the thickest
    ``ceil(planes / ranks)``: the others wait for it), by the model above
    (``passes``: :func:`array_passes`, or :func:`fused_passes` for the
    ``fused`` engine, whose dots are summed inside its kernels at the copy
    rate); returns ``(total, {part: seconds})``."""
    fused = engine == "fused"
    if passes is None:
        passes = fused_passes(ndim) if fused else array_passes(ndim)
    # The thickest slab sets the pace (its rank is the one the others wait for).
    local = _thickest(cells, plane_cells, ranks)
    if link.dot_bandwidth is None or fused:
        parts = {"memory": passes * 8.0 * local / link.copy_bandwidth}
    else:
        # Three dots of two vectors each at the dot's own measured rate.
        parts = {"memory": (passes - DOT_PASSES) * 8.0 * local / link.copy_bandwidth,
                 "dots": 3 * 16.0 * local / link.dot_bandwidth}
    device = sum(parts.values())
    if link.issue > device:
        parts["issue"] = link.issue - device        # the host's wait beyond the device's work
    if ranks > 1:
        parts["halo"] = link.latency + 8.0 * plane_cells / link.bandwidth
        parts["allreduce"] = ALLREDUCES[engine] * link.allreduce
    return sum(parts.values()), parts


def _thickest(cells, plane_cells, ranks):
    """Cells of the thickest of ``ranks`` slabs of whole planes."""
    return -(-(cells // plane_cells) // ranks) * plane_cells


def _barrier(comm):
    comm.allreduce_sum(np.zeros(1))


def _timed(comm, backend, step, repeat, warm=True):
    """Seconds one ``step()`` takes, every rank stepping at once: the mean
    over ``repeat`` (the device waited for), the slowest rank's; after one
    untimed step where ``warm``."""
    if warm:
        step()                                      # warm-up (allocations, kernels)
    backend.synchronize()
    _barrier(comm)
    t = time.perf_counter()
    for _ in range(repeat):
        step()
    backend.synchronize()
    return comm.allreduce_max((time.perf_counter() - t) / repeat)


def _captured_seconds(comm, backend, step, repeat):
    """Seconds one ``step()`` takes when ``repeat`` of them are replayed
    from one CUDA graph (as the fused engine's iterations are), every rank
    at once; timed as issued (:func:`_timed`) where a graph cannot hold
    them (the ranks agree)."""
    graph = None
    try:
        cp = backend.xp
        stream = cp.cuda.Stream(non_blocking=True)
        with stream:
            stream.begin_capture()
            try:
                for _ in range(repeat):
                    step()
            finally:
                graph = stream.end_capture()
    except Exception:
        graph = None
    if comm.sum_int(0 if graph is not None else 1):
        return _timed(comm, backend, step, repeat)
    return _timed(comm, backend, graph.launch, 1) / repeat


def _copy_bandwidth(comm, backend, nbytes=2 ** 27, repeat=10):
    """This rank's copy bandwidth (read plus written, bytes/s) while every
    rank copies (on a GPU several ranks share, their copies take turns)."""
    xp = backend.xp
    a = xp.asarray(np.random.default_rng(comm.rank).random(nbytes // 8))
    b = xp.empty_like(a)
    return 2 * a.nbytes / _timed(comm, backend, lambda: xp.copyto(b, a), repeat)


def _dot_bandwidth(comm, backend, nbytes=2 ** 27, repeat=10):
    """This rank's dot product of two vectors (bytes of both a second)
    while every rank runs one: the backend's own (:func:`~bubbleflow.compute.reductions.reductions`)."""
    from ...compute.reductions import reductions

    xp = backend.xp
    dot, _ = reductions(backend, np.float64)
    a = xp.asarray(np.random.default_rng(comm.rank).random(nbytes // 8))
    b = xp.asarray(np.random.default_rng(comm.rank + 1).random(nbytes // 8))
    return 2 * a.nbytes / _timed(comm, backend, lambda: dot(a, b), repeat)


def _swap_seconds(comm, backend, nbytes, repeat=100, captured=False):
    """One halo swap of ``nbytes`` with each neighbour, as the operator's
    product makes it (:meth:`exchange`: on NCCL device to device, on MPI
    through the host), every rank at once; ``captured``: replayed from a
    CUDA graph, as the fused engine's swaps are."""
    xp = backend.xp
    n = max(1, nbytes // 8)
    lower = comm.rank - 1 if comm.rank > 0 else None
    upper = comm.rank + 1 if comm.rank < comm.size - 1 else None
    send = (xp.ones(n), xp.ones(n))
    recv = (xp.empty(n), xp.empty(n))
    timed = _captured_seconds if captured else _timed
    return timed(comm, backend, lambda: comm.exchange(lower, upper, *send, *recv), repeat)


def _allreduce_latency(comm, backend, repeat=200, captured=False):
    """One all-reduce of a value, as the loop makes it: the array loop's
    (a new array each), or ``captured``, the fused engine's (two values
    into a kept buffer, replayed from a CUDA graph)."""
    one = backend.xp.ones(1)
    if not captured:
        return _timed(comm, backend, lambda: comm.allreduce_sum(one), repeat)
    send, out = backend.xp.ones(2), backend.xp.zeros(2)
    return _captured_seconds(comm, backend, lambda: comm.allreduce_into(send, out), repeat)


def working_bytes(local_cells, ndim):
    """Bytes of the grid arrays an iteration on ``local_cells`` cells keeps
    in use (``x``, ``r``, ``p``, ``w``, ``D^-1`` and the ``ndim`` face
    couplings): the copy bandwidth is measured over as many (half read,
    half written), so that a slab whose iteration stays in a cache (small
    grids on a CPU) is modelled at the cache's rate, one that does not at
    the memory's."""
    return 8 * int(local_cells) * (ndim + 5)


def measure_link(comm, plane_bytes, backend=None, captured=False, working=None):
    """The :class:`Link` of this node on ``backend`` (default NumPy),
    measured by every rank at once (the link's parts zero for one rank);
    ``captured``: the swaps and all-reduces replayed from CUDA graphs, as
    the fused engine runs them; ``working``: the bytes the copy and the dot
    run over (:func:`working_bytes`; default 512 MiB on a GPU, 128 MiB on
    the host)."""
    from ...compute.backend import get_backend
    from ...compute.transfer import on_device

    backend = backend or get_backend("numpy")
    size = working // 2 if working else 2 ** 29 if on_device(backend) else 2 ** 27
    size = max(size, 2 ** 16)
    bandwidth = _copy_bandwidth(comm, backend, size)
    dots = _dot_bandwidth(comm, backend, size)
    if comm.size < 2:
        return Link(bandwidth, 0.0, float("inf"), 0.0, dots)
    small = _swap_seconds(comm, backend, 8, captured=captured)
    big = _swap_seconds(comm, backend, plane_bytes, captured=captured)
    # A plane's swap no slower than 8 bytes': latency-bound, no bandwidth term.
    link = plane_bytes / (big - small) if big > small else float("inf")
    return Link(bandwidth, small, link, _allreduce_latency(comm, backend, captured=captured),
                dots)


def _loop_seconds(comm, backend, dim, n, stack=1, engine="auto"):
    """``(seconds an iteration, cells, plane cells, engine)`` of Jacobi PCG
    on the bubbly column (``n`` cells a side, its unit stacked ``stack``
    times along the slabs' axis) on the ranks' slabs (on one rank too: the
    loop the ranks run), by ``engine`` (``auto``: the fused engine where it
    runs, else the array loop; the name of the one that ran is returned).

    An iteration's time is the difference between solves of
    ``RANKS_ITERATIONS`` and of ``RANKS_ITERATIONS + RANKS_MORE`` iterations
    (each the median of ``RANKS_SOLVES``, the slowest rank's) over the
    iterations between them: what a solve costs once (its set-up, start and
    final check) is left out, as in a time step's solve of many iterations;
    the host checks between iterations are in.  The preconditioner and the
    fused engine are built once and kept, as the ranks' solver keeps them."""
    from ...case.problem import bubbly_column_planes
    from ...linalg.engines import device_engine_for
    from ...linalg.krylov import solve as krylov_solve
    from ...linalg.precond import Jacobi
    from ...mesh.ranks import rank_slab
    from ...operators.distributed import DistributedOperator

    # The rank's widened slab alone, built on the host and moved to its
    # device: no rank holds the whole problem.
    shape = (stack * n,) + (n,) * (dim - 1)
    slab = rank_slab(shape, comm.rank, comm.size)
    lo, hi, _, _ = slab.extended()
    couplings, rhs, _ = bubbly_column_planes(n, lo, hi, dim, 1e3, stack=stack)
    Ad = DistributedOperator.from_couplings(couplings, slab, comm, backend, first=lo)
    local_b = backend.xp.asarray(rhs[slab.lo - lo:slab.hi - lo]).ravel()
    cells, plane = int(np.prod(shape)), int(np.prod(shape[1:]))
    del couplings, rhs
    M = Jacobi(Ad)
    kept = [None]
    infos = []

    def select(system):
        if engine == "generic":
            return None
        kept[0] = device_engine_for(system.A, system.prec_obj, system.prec_name,
                                    system.deflation, system.variant, system.b,
                                    previous=kept[0])
        return kept[0]

    def solve(iterations):
        with warnings.catch_warnings():
            # rtol 0: the rounding left in b's mean exceeds a zero tolerance.
            warnings.simplefilter("ignore", RuntimeWarning)
            infos.append(krylov_solve(Ad, local_b, rtol=0.0, M=M, maxiter=iterations,
                                      select=select)[1])

    def timed(iterations):
        """``(seconds, iterations)`` of a solve: the median of a few."""
        seconds = float(np.median([_timed(comm, backend, lambda: solve(iterations), 1,
                                          warm=False) for _ in range(RANKS_SOLVES)]))
        return seconds, int(infos[-1].iterations)

    solve(RANKS_ITERATIONS)                         # warm-up (allocations, kernels, graphs)
    short, its_short = timed(RANKS_ITERATIONS)
    long, its_long = timed(RANKS_ITERATIONS + RANKS_MORE)
    ran = "fused" if infos[-1].engine == "fused" else "generic"
    if its_long > its_short and long > short:
        return (long - short) / (its_long - its_short), cells, plane, ran
    return long / max(its_long, 1), cells, plane, ran   # (stopped early: a tiny grid)


def run_ranks_bench(comm, dim, sizes, out=print, backend=None, weak_sizes=(), engine="auto"):
    """Per size: Jacobi-PCG iterations of the bubbly column (contrast 1000)
    on the ranks' slabs, on ``backend`` (default NumPy) by ``engine``
    (:func:`_loop_seconds`), the time per iteration measured and modelled;
    rank 0 prints one line a size.  ``sizes``: ``n^d`` cells in all (strong scaling);
    ``weak_sizes``: ``n^d`` cells a rank (the column stacked a unit a rank:
    weak scaling).  Returns the rows (rank 0) or an empty list: ``n``,
    ``ranks``, ``cells`` (in all), ``weak``, ``measured`` and ``predicted``
    (s an iteration) and the model's parts."""
    from ...compute.backend import get_backend
    from ...compute.transfer import on_device

    backend = backend or get_backend("numpy")
    # The host's issue time (with CUDA graphs, the launches' own): the loop
    # on a grid where the device has next to nothing to do, less what the
    # model gives its swaps and sums there.
    tiny = max(16, 4 * comm.size)
    seconds, cells, plane, ran = _loop_seconds(comm, backend, dim, tiny, engine=engine)
    fused = ran == "fused"
    passes = fused_passes(dim) if fused else array_passes(dim, on_device(backend))
    link = measure_link(comm, 8 * plane, backend, captured=fused,
                        working=working_bytes(_thickest(cells, plane, comm.size), dim))
    _, parts = predict_iteration(cells, plane, dim, comm.size, link, passes, ran)
    issue = max(seconds - parts.get("halo", 0.0) - parts.get("allreduce", 0.0), 0.0)
    # One rank's weak size is the strong one: measured once.
    jobs = [(n, False) for n in sizes] + [(n, True) for n in weak_sizes
                                          if comm.size > 1 or n not in sizes]
    rows = []
    for n, weak in jobs:
        measured, cells, plane, _ = _loop_seconds(comm, backend, dim, n,
                                                  comm.size if weak else 1, engine=ran)
        working = working_bytes(_thickest(cells, plane, comm.size), dim)
        link = dataclasses.replace(measure_link(comm, 8 * plane, backend, captured=fused,
                                                working=working), issue=issue)
        predicted, parts = predict_iteration(cells, plane, dim, comm.size, link, passes, ran)
        if comm.rank != 0:
            continue
        rows.append(dict(n=n, ranks=comm.size, dim=dim, cells=cells, weak=weak and comm.size > 1,
                         comm=comm.name, backend=backend.name, engine=ran, measured=measured,
                         predicted=predicted, copy_bandwidth=link.copy_bandwidth,
                         dot_bandwidth=link.dot_bandwidth, latency=link.latency,
                         link_bandwidth=link.bandwidth, allreduce_seconds=link.allreduce,
                         parts=parts))
        shown = ", ".join(f"{k} {1e3 * v:.3f}" for k, v in parts.items())
        rate = (f"{link.bandwidth / 1e9:.2f} GB/s" if np.isfinite(link.bandwidth)
                else "latency-bound (a plane's swap as quick as 8 bytes')")
        links = (f", latency {1e6 * link.latency:.1f} us, link {rate}, "
                 f"all-reduce {1e6 * link.allreduce:.1f} us") if comm.size > 1 else ""
        what = f"{n}^{dim} a rank" if weak and comm.size > 1 else f"n = {n}"
        out(f"{comm.size} ranks ({comm.name}, {backend.name}, {ran}), {dim}-D {what}: measured "
            f"{1e3 * measured:.3f} ms/it, model {1e3 * predicted:.3f} ms/it ({shown}), error "
            f"{100 * (predicted - measured) / measured:+.1f} %; copy "
            f"{link.copy_bandwidth / 1e9:.2f} GB/s, dot {link.dot_bandwidth / 1e9:.2f} GB/s a "
            f"rank{links}")
    # The default solver's time to solution at each strong size (every rank).
    for n in sizes:
        got = default_solve(comm, backend, dim, n)
        if comm.rank == 0:
            next(r for r in rows if r["n"] == n and not r["weak"])["solution"] = got
            out(solve_line(comm.size, comm.name, backend.name, dim, n, got))
    return rows
