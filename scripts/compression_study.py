"""What each HDF5 compression costs and gains on a result's fields: write
time (to the disk: flushed and fsync'ed), read time and size.

    python3 scripts/compression_study.py [--n 4096] [--dir DIR] [--repeat 2]
                                         [--threads 1 2 4 ...]

The fields are those a pressure case writes (``phi``, ``rho``, ``p`` of the
bubbly column at ``n x n``, float64), built as ``bubbleflow run`` builds
them (the pressure from one multigrid solve to rtol 1e-8 at up to 2048^2,
above that the hydrostatic column, whose bits compress about as well).
Each setting writes the three fields into one file in ``--dir`` (default: a
temporary folder on the disk that holds ``outputs/``), flushed and
``fsync``'ed before the clock stops, then reads them back; the best of
``--repeat`` rounds.  Settings: no compression, gzip levels 1 and 4, each
with and without byte shuffle, LZF with and without shuffle, on h5py's
automatic chunks and on 1 MiB row blocks.  Then gzip 1 in row blocks as
a run writes it (``bubbleflow.io.compression.write_field``: the chunks
compressed by a pool of threads and written directly) for each count of
``--threads`` (default 1 and every core), beside HDF5's own filter in the
same run.
"""
import argparse
import os
import sys
import tempfile
import time

import h5py
import numpy as np

if __package__ in (None, ""):
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

SETTINGS = {
    "none": {},
    "gzip 1": dict(compression="gzip", compression_opts=1),
    "gzip 1 + shuffle": dict(compression="gzip", compression_opts=1, shuffle=True),
    "gzip 4": dict(compression="gzip", compression_opts=4),
    "gzip 4 + shuffle": dict(compression="gzip", compression_opts=4, shuffle=True),
    "lzf": dict(compression="lzf"),
    "lzf + shuffle": dict(compression="lzf", shuffle=True),
}


def fields(n):
    from bubbleflow.case.problem import bubbly_column_phases

    grid, phi, phases = bubbly_column_phases(n)
    if n <= 2048:
        from bubbleflow import PressureSolver, bubbly_column

        A, b, _ = bubbly_column(n)
        solver = PressureSolver(A, preconditioner="multigrid", rtol=1e-8)
        p, _ = solver.solve(b)
        p = np.asarray(p).reshape(grid.shape)
    else:
        y = np.asarray(grid.centres[-1])[:, None]
        p = np.broadcast_to(1000.0 * 9.81 * (0.85 - y), grid.shape).copy()
    return {"phi": np.asarray(phi, dtype=np.float64), "rho": np.asarray(phases.rho), "p": p}


def write(path, data, options, rows):
    t0 = time.perf_counter()
    with h5py.File(path, "w") as fh:
        for name, a in data.items():
            chunks = (max(1, (1 << 20) // (8 * a.shape[1])), a.shape[1]) if rows else True
            fh.create_dataset(name, data=a, chunks=chunks if options or rows else None,
                              **options)
        fh.flush()
        os.fsync(fh.id.get_vfd_handle())
    return time.perf_counter() - t0


def write_pooled(path, data, threads):
    import bubbleflow.io.compression as compression

    compression.compression_threads = lambda: threads
    t0 = time.perf_counter()
    with h5py.File(path, "w") as fh:
        for name, a in data.items():
            compression.write_field(fh, name, a, compression.Compression("gzip", 1))
        fh.flush()
        os.fsync(fh.id.get_vfd_handle())
    return time.perf_counter() - t0


def read(path, data):
    t0 = time.perf_counter()
    with h5py.File(path, "r") as fh:
        for name, a in data.items():
            assert np.array_equal(fh[name][()], a)
    return time.perf_counter() - t0


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=4096)
    ap.add_argument("--dir", default=None)
    ap.add_argument("--repeat", type=int, default=2)
    ap.add_argument("--threads", type=int, nargs="+", default=None,
                    help="pool sizes of the pooled gzip 1 write (default 1 and every core)")
    args = ap.parse_args()
    data = fields(args.n)
    raw = sum(a.nbytes for a in data.values())
    base = args.dir or os.path.abspath("outputs")
    os.makedirs(base, exist_ok=True)
    print(f"# {args.n}^2 bubbly column, phi, rho, p: {raw / 2 ** 20:.0f} MiB raw; files in {base}")
    print(f"{'setting':18} {'chunks':8} {'write s':>8} {'MB/s':>7} {'read s':>7} {'size MiB':>9} "
          f"{'ratio':>6}")
    with tempfile.TemporaryDirectory(dir=base) as tmp:
        for name, options in SETTINGS.items():
            for rows in (False, True):
                if not options and rows:
                    continue
                path = os.path.join(tmp, "f.h5")
                w = min(write(path, data, options, rows) for _ in range(args.repeat))
                r = min(read(path, data) for _ in range(args.repeat))
                size = os.path.getsize(path)
                print(f"{name:18} {'rows' if rows else 'auto':8} {w:8.2f} {raw / w / 1e6:7.0f} "
                      f"{r:7.2f} {size / 2 ** 20:9.1f} {raw / size:6.2f}", flush=True)
                os.unlink(path)
        path = os.path.join(tmp, "f.h5")
        filtered = min(write(path, data, SETTINGS["gzip 1"], True) for _ in range(args.repeat))
        print(f"\n# gzip 1 in row blocks: HDF5's filter {filtered:.2f} s; the pooled write "
              f"(io.compression.write_field) side by side")
        print(f"{'threads':>7} {'write s':>8} {'MB/s':>7} {'x filter':>9}")
        for threads in args.threads or sorted({1, os.cpu_count() or 1}):
            w = min(write_pooled(path, data, threads) for _ in range(args.repeat))
            read(path, data)                 # (it checks the values)
            print(f"{threads:7d} {w:8.2f} {raw / w / 1e6:7.0f} {filtered / w:9.2f}", flush=True)
        os.unlink(path)


if __name__ == "__main__":
    main()
