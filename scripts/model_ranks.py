"""The performance model of a CG iteration on several ranks against the
measured time (bubbleflow.apps.bench.ranks_model).

    mpiexec -n N python3 scripts/model_ranks.py [--dim 2|3] [--n CELLS] [--iterations K]

Every rank measures, at the same time as the others: its copy bandwidth,
a ping-pong with its neighbour (8 bytes and one plane), an all-reduce of one
value; then the ranks run K Jacobi-PCG iterations of the bubbly column
(contrast 1000, rtol 0: no early stop) on their slabs, timed on rank 0.
Rank 0 prints one line: the measured and the predicted time per iteration,
the model's parts and its error.  Run it for 1, 2, 4 ranks and compare.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

import numpy as np  # noqa: E402

from bubbleflow import pcg  # noqa: E402
from bubbleflow.apps.bench.ranks_model import Link, predict_iteration  # noqa: E402
from bubbleflow.case.problem import bubbly_column, bubbly_column_3d  # noqa: E402
from bubbleflow.compute.comm import communicator  # noqa: E402
from bubbleflow.operators.distributed import DistributedOperator  # noqa: E402


def _barrier(comm):
    comm.allreduce_sum(np.zeros(1))


def copy_bandwidth(comm, nbytes=2 ** 27, repeat=10):
    """This rank's copy bandwidth (read plus written, bytes/s) while every
    rank copies: the median of ``repeat``."""
    a = np.random.default_rng(comm.rank).random(nbytes // 8)
    b = np.empty_like(a)
    times = []
    for _ in range(repeat):
        _barrier(comm)
        t = time.perf_counter()
        np.copyto(b, a)
        times.append(time.perf_counter() - t)
    return 2 * a.nbytes / float(np.median(times))


def ping_pong(comm, nbytes, repeat=200):
    """Half a round trip between ranks 0 and 1 (s), the others waiting."""
    if comm.size < 2:
        return 0.0
    buf = np.zeros(max(1, nbytes // 8))
    raw = getattr(comm, "comm", None)
    _barrier(comm)
    t = time.perf_counter()
    for _ in range(repeat):
        if comm.rank == 0:
            raw.Send(buf, dest=1)
            raw.Recv(buf, source=1)
        elif comm.rank == 1:
            raw.Recv(buf, source=0)
            raw.Send(buf, dest=0)
    half = (time.perf_counter() - t) / (2 * repeat)
    return comm.broadcast(half)


def allreduce_latency(comm, repeat=200):
    if comm.size < 2:
        return 0.0
    one = np.ones(1)
    _barrier(comm)
    t = time.perf_counter()
    for _ in range(repeat):
        comm.allreduce_sum(one)
    return comm.broadcast((time.perf_counter() - t) / repeat)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dim", type=int, choices=(2, 3), default=2)
    ap.add_argument("--n", type=int, default=None, help="cells per side (2-D 1024, 3-D 96)")
    ap.add_argument("--iterations", type=int, default=50)
    args = ap.parse_args(argv)
    comm = communicator("auto")
    n = args.n or (1024 if args.dim == 2 else 96)
    A, b, _ = bubbly_column(n, 1e3) if args.dim == 2 else bubbly_column_3d(n, 1e3)
    Ad = DistributedOperator.from_operator(A, comm)
    plane = int(np.prod(A.grid_shape[1:]))
    bw = copy_bandwidth(comm)
    small = ping_pong(comm, 8)
    big = ping_pong(comm, 8 * plane)
    link = Link(copy_bandwidth=bw, latency=small,
                bandwidth=8 * plane / max(big - small, 1e-12), allreduce=allreduce_latency(comm))
    local_b = Ad.scatter_local(np.asarray(b))
    pcg(Ad, local_b, rtol=0.0, maxiter=5, M="jacobi")               # warm-up
    _barrier(comm)
    t = time.perf_counter()
    _, info = pcg(Ad, local_b, rtol=0.0, maxiter=args.iterations, M="jacobi")
    _barrier(comm)
    measured = (time.perf_counter() - t) / max(int(info.iterations), 1)
    predicted, parts = predict_iteration(A.shape[0], plane, len(A.grid_shape), comm.size, link)
    if comm.rank == 0:
        shown = ", ".join(f"{k} {1e3 * v:.3f}" for k, v in parts.items())
        links = (f", latency {1e6 * small:.1f} us, link {link.bandwidth / 1e9:.2f} GB/s, "
                 f"all-reduce {1e6 * link.allreduce:.1f} us") if comm.size > 1 else ""
        print(f"{comm.size} ranks, {args.dim}-D n = {n}: measured {1e3 * measured:.3f} ms/it, "
              f"model {1e3 * predicted:.3f} ms/it ({shown}), error "
              f"{100 * (predicted - measured) / measured:+.1f} %; copy {bw / 1e9:.2f} GB/s a "
              f"rank{links}")


if __name__ == "__main__":
    main()
