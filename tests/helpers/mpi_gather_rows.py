"""``mpiexec -n N python3 mpi_gather_rows.py OUT [BACKEND]``: each rank sends
arrays of its own number of rows (none on rank 1) and rank 0 writes whether
``gather_rows`` joined them as a concatenation would, and so
``gather_rows_to_device`` on BACKEND's arrays (numpy by default; cupy:
NCCL where each rank has a GPU), and whether ``allreduce_maxima`` and
``allreduce_max_into`` gave every rank the elementwise maxima, one JSON
line."""
import json
import sys

import numpy as np

from bubbleflow.compute.comm import communicator


def parts(rank, size):
    """Every rank's arrays, known to every rank: float64 planes, bool rows,
    int64 3-D blocks and empty rows."""
    rows = [0 if r == 1 else 2 + r for r in range(size)]
    rng = np.random.default_rng(rank)
    mine = rows[rank]
    return rows, [rng.standard_normal((mine, 5, 3)), rng.random((mine, 7)) < 0.5,
                  rng.integers(-9, 9, (mine, 2, 2, 2)), np.zeros((mine, 0))]


def maxima_of(rank):
    """A rank's host values for ``allreduce_maxima``: a 2 x 3 block with
    negatives, infinities and a value only this rank holds largest."""
    v = -np.arange(6, dtype=np.float64).reshape(2, 3) * (rank + 1)
    v[0, 0] = -np.inf if rank else 5.0
    v[1, rank % 3] = 10.0 + rank
    return v


def main(path, backend_name="numpy"):
    from bubbleflow.compute.backend import get_backend

    backend = get_backend(backend_name)
    comm = communicator("auto", backend)
    comm.use_device(backend)
    _, mine = parts(comm.rank, comm.size)
    got = [comm.gather_rows(a) for a in mine]
    on_device = [comm.gather_rows_to_device(backend.xp.asarray(a)) for a in mine]
    maxima = comm.allreduce_maxima(maxima_of(comm.rank))
    expected = np.max([maxima_of(r) for r in range(comm.size)], axis=0)
    into = np.empty((2, 3))
    comm.allreduce_max_into(maxima_of(comm.rank), into)
    agreed = bool(maxima.shape == expected.shape and np.array_equal(maxima, expected)
                  and np.array_equal(into, expected))
    if comm.rank != 0:
        assert all(g is None for g in got + on_device) and agreed
        return
    every = [parts(r, comm.size)[1] for r in range(comm.size)]
    same = [bool(g.dtype == e[0].dtype and np.array_equal(g, np.concatenate(e, axis=0)))
            for g, e in zip(got, zip(*every))]
    device = [bool(type(g) is type(backend.xp.asarray(e[0])) and g.dtype == e[0].dtype
                   and np.array_equal(backend.to_host(g), np.concatenate(e, axis=0)))
              for g, e in zip(on_device, zip(*every))]
    with open(path, "w") as fh:
        fh.write(json.dumps(dict(ranks=comm.size, same=same, device=device, maxima=agreed,
                                 comm=comm.name)) + "\n")


if __name__ == "__main__":
    main(*sys.argv[1:])
