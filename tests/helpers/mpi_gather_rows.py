"""``mpiexec -n N python3 mpi_gather_rows.py OUT``: each rank sends arrays of
its own number of rows (none on rank 1) and rank 0 writes whether
``gather_rows`` joined them as a concatenation would, one JSON line."""
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


def main(path):
    comm = communicator("auto")
    _, mine = parts(comm.rank, comm.size)
    got = [comm.gather_rows(a) for a in mine]
    if comm.rank != 0:
        assert all(g is None for g in got)
        return
    every = [parts(r, comm.size)[1] for r in range(comm.size)]
    same = [bool(g.dtype == e[0].dtype and np.array_equal(g, np.concatenate(e, axis=0)))
            for g, e in zip(got, zip(*every))]
    with open(path, "w") as fh:
        fh.write(json.dumps(dict(ranks=comm.size, same=same)) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
