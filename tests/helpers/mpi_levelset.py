"""The level set's functions on the ranks' slabs, run by ``mpiexec -n N
python3 mpi_levelset.py OUT`` (tests/parallel/test_mpi.py): each rank
advects, reinitialises, smooths and takes the curvature of its slab of a
level set with bubbles (SlabPadding); rank 0 gathers the results, computes
the same on the whole grid and writes one JSON line per case and function:
the largest difference, relative to the largest value."""
import json
import sys

import numpy as np

from bubbleflow.compute.comm import communicator
from bubbleflow.flow import levelset
from bubbleflow.flow.padding import WALLS
from bubbleflow.flow.slabs import SlabPadding
from bubbleflow.mesh.ranks import rank_slab

CASES = [(48, 40), (16, 20, 12)]            # (ny, nx) and (nz, ny, nx)


def fields(shape, seed):
    """A level set of two spheres (circles) and a smooth face velocity."""
    rng = np.random.default_rng(seed)
    nd = len(shape)
    h = [1.0 / n for n in shape[::-1]]             # spacing per grid axis (x first)
    centres = [(np.arange(n) + 0.5) / n for n in shape]
    grids = np.meshgrid(*centres, indexing="ij")
    phi = np.full(shape, 1.0)
    for _ in range(2):
        c = rng.uniform(0.3, 0.7, nd)
        r = np.sqrt(sum((g - ci) ** 2 for g, ci in zip(grids, c)))
        phi = np.minimum(phi, r - 0.15)
    velocity = []
    for a in range(nd):
        k = nd - 1 - a
        fshape = list(shape)
        fshape[k] += 1
        coords = [np.linspace(0, 1, n) for n in fshape]
        g = np.meshgrid(*coords, indexing="ij")
        velocity.append(np.sin(2 * np.pi * g[(k + 1) % nd]) * 0.5 + 0.1 * (a + 1))
    return phi, tuple(velocity), tuple(h)


def run(phi, velocity, h, padding):
    dt = 0.2 * min(h)
    out = {"advect": levelset.advect(phi, velocity, dt, h, padding=padding),
           "reinitialize": levelset.reinitialize(phi + 0.3 * phi ** 2, h, iterations=3,
                                                    padding=padding),
           "smooth": levelset.smooth(phi, passes=2, padding=padding)}
    out["curvature"] = levelset.curvature(out["smooth"], h, padding=padding)
    return out


def main(path):
    comm = communicator("auto")
    lines = []
    for shape in CASES:
        phi, velocity, h = fields(shape, seed=len(shape))
        slab = rank_slab(shape, comm.rank, comm.size)
        cells = slice(slab.lo, slab.hi)
        faces = slice(slab.lo, slab.hi + 1)
        nd = len(shape)
        mine = tuple(v[faces] if a == nd - 1 else v[cells] for a, v in enumerate(velocity))
        got = run(phi[cells], mine, h, SlabPadding(comm, slab))
        refs = run(phi, velocity, h, WALLS) if comm.rank == 0 else None
        for name, part in got.items():
            parts = comm.gather(part)
            if comm.rank != 0:
                continue
            whole = np.concatenate(parts, axis=0)
            ref = refs[name]
            lines.append(dict(case=f"{nd}-D {name}", ranks=comm.size,
                              diff=float(np.abs(whole - ref).max() / np.abs(ref).max())))
    if comm.rank == 0:
        with open(path, "w") as fh:
            fh.write("\n".join(json.dumps(line) for line in lines) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
