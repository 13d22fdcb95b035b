"""Where the ranks' fused iteration spends its time beyond one GPU's
(docs/performance_records.md, "Several GPUs"): ``mpiexec -n R python3
scripts/ranks_fused_profile.py N [N ...]`` times Jacobi-PCG iterations of
the bubbly column, ``N^2`` cells a rank (weak scaling), replayed from CUDA
graphs, with parts of the ranks' traffic taken out (timings only: the
iterates of those variants are wrong), and for a few launch shapes.

  full         the engine as it runs
  no swap      the halo planes not exchanged
  no sums      the all-reduces replaced by a device copy (one rank's sums)
  neither      both
  blocks xK    the full iteration, K times as many blocks a multiprocessor

Rank 0 prints one line a variant: ms an iteration (the slowest rank's,
median of 5 runs of 200 iterations).
"""
import sys
import time

import numpy as np


class _Without:
    """The rank's communicator less its swap and/or its all-reduces."""

    def __init__(self, comm, swap=True, sums=True):
        self._comm, self._swap, self._sums = comm, swap, sums
        self.name, self.rank, self.size = comm.name, comm.rank, comm.size

    def __getattr__(self, name):
        return getattr(self._comm, name)

    def start_exchange(self, *args):
        return self._comm.start_exchange(*args) if self._swap else None

    def wait(self, handle):
        if handle is not None:
            self._comm.wait(handle)

    def allreduce_into(self, send, out):
        if self._sums:
            return self._comm.allreduce_into(send, out)
        from bubbleflow.compute.comm import SingleProcess

        return SingleProcess().allreduce_into(send, out)


def main(sizes):
    from bubbleflow.case.problem import bubbly_column_planes
    from bubbleflow.compute.backend import get_backend
    from bubbleflow.compute.comm import communicator
    from bubbleflow.linalg.fused.ranks import RankFusedEngine
    from bubbleflow.linalg.precond import Jacobi
    from bubbleflow.mesh.ranks import rank_slab
    from bubbleflow.operators.distributed import DistributedOperator

    backend = get_backend("cupy")
    comm = communicator("auto", backend)
    comm.use_device(backend)
    cp = backend.xp
    for n in sizes:
        shape = (comm.size * n, n)
        slab = rank_slab(shape, comm.rank, comm.size)
        lo, hi, _, _ = slab.extended()
        couplings, rhs, _ = bubbly_column_planes(n, lo, hi, 2, 1e3, stack=comm.size)
        D = DistributedOperator.from_couplings(couplings, slab, comm, backend, first=lo)
        b = cp.asarray(rhs[slab.lo - lo:slab.hi - lo]).ravel()
        M = Jacobi(D)
        variants = [("full", {}, 1), ("no swap", dict(swap=False), 1),
                    ("no sums", dict(sums=False), 1), ("neither", dict(swap=False, sums=False), 1),
                    ("blocks x2", {}, 2), ("blocks x4", {}, 4)]
        for name, without, factor in variants:
            D.comm = _Without(comm, **without)
            RankFusedEngine.blocks_per_sm = 8 * factor
            engine = RankFusedEngine(D, M, "jacobi")
            hist = engine.history(10 ** 5)
            times = []
            for _ in range(6):
                engine.begin(cp.zeros_like(b), b.copy(), hist, 0, 1.0, 0.0)
                engine.iterate(8)                     # the graphs captured, warm
                cp.cuda.Device().synchronize()
                comm.allreduce_max(0.0)
                t = time.perf_counter()
                engine.iterate(200)
                cp.cuda.Device().synchronize()
                times.append(comm.allreduce_max(time.perf_counter() - t) / 200)
            D.comm = comm
            if comm.rank == 0:
                print(f"{comm.size} ranks, {n}^2 a rank, {name:<10}: "
                      f"{1e3 * float(np.median(times[1:])):.3f} ms/it "
                      f"(graphs: {engine.capture_error or 'yes'})", flush=True)
        RankFusedEngine.blocks_per_sm = 8


if __name__ == "__main__":
    main([int(a) for a in sys.argv[1:]] or [4096])
