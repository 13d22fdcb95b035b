"""The peers a user would pick instead: CuPy's and SciPy's cg with Jacobi, SciPy cg with PyAMG."""
from __future__ import annotations

import inspect

import numpy as np

from .measure import MemoryPeak, release, true_residual
from .options import DEFAULT_MAXITER_PER_N, PEERS
from .problem import assemble, inputs_on, median_run, numpy_backend, result_row

__all__ = ["run_peer", "peer_bytes_per_iteration"]

_PEER_WARMUP_ITERATIONS = 10


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


def _peer_matrix(problem, faces, backend):
    """The peer's CSR matrix on ``backend`` (the operator's own export) and
    the operator's assembly time: the 5-point one from the diagonals (2-D),
    the 7-point one from the face couplings (3-D; matrix free, so that no
    diagonals outlive the export)."""
    t0 = backend.clock()
    A = assemble(problem, faces, backend, storage="diagonals" if problem.dim == 2 else "matrix_free")
    t1 = backend.clock()
    C = A.to_backend_sparse()
    return C, t1 - t0


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
    solve); ``bench.peer_repeat`` timed solves.  In 3-D then an untimed
    set-up plus warm-up for the memory columns (:class:`.measure.MemoryPeak`).
    """
    gpu = name == "cupy_cg"
    backend = bench.backend if gpu else numpy_backend()
    xp = backend.xp
    n = problem.n
    maxiter = bench.peer_maxiter or DEFAULT_MAXITER_PER_N * n
    release(bench.backend)
    b = xp.asarray(problem.rhs)
    faces, _ = inputs_on(backend, problem)
    cg, LinearOperator = _cg_function(gpu)

    def build(faces):
        t0 = backend.clock()
        C, operator_s = _peer_matrix(problem, faces, backend)
        if name in ("pyamg", "pyamg_rs"):
            import pyamg

            if name == "pyamg":
                ml = pyamg.smoothed_aggregation_solver(C, B=np.ones((C.shape[0], 1)),
                                                       symmetry="symmetric")
            else:
                ml = pyamg.ruge_stuben_solver(C)
            M = ml.aspreconditioner(cycle="V")
        else:
            inv_d = 1.0 / C.diagonal()
            M = LinearOperator(C.shape, matvec=lambda r: inv_d * r, dtype=C.dtype)
        return C, M, operator_s, backend.clock() - t0

    if gpu:
        # Untimed first build: CuPy compiles (or loads) the kernels it uses on
        # a fresh machine, seconds that are no part of a set-up.
        build(faces)
        release(backend)
    C, M, operator_s, setup_s = build(faces)
    faces = None                       # the set-up's inputs out of the memory count
    count = [0]

    def callback(_):
        count[0] += 1

    if gpu:
        release(backend)              # set-up temporaries out of the memory count
    cg(C, b, problem.rtol, min(_PEER_WARMUP_ITERATIONS, maxiter), M, callback)   # warm-up
    peaks = [backend.pool_bytes() if gpu else None]
    say(f"set-up {1e3 * setup_s:.1f} ms; solving (maxiter {maxiter})")
    runs = []
    for i in range(bench.peer_repeat):
        count[0] = 0
        t = backend.clock()
        x, info = cg(C, b, problem.rtol, maxiter, M, callback)
        dt = backend.clock() - t
        peaks.append(backend.pool_bytes() if gpu else None)
        res = true_residual(C.dot, b, x, xp)
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
    if not name.startswith("pyamg"):
        nbytes = peer_bytes_per_iteration(problem.cells, int(C.nnz), C.indices.dtype.itemsize,
                                          C.indptr.dtype.itemsize)
    del C, M
    release(bench.backend)
    memory = None
    if problem.dim == 3:
        faces, _ = inputs_on(backend, problem)
        with MemoryPeak(backend) as memory:
            C, M, _, _ = build(faces)
            cg(C, b, problem.rtol, min(_PEER_WARMUP_ITERATIONS, maxiter), M, callback)
            del C, M
        faces = None
        release(bench.backend)
    del b
    med = median_run(runs)
    return result_row(problem, bench, runs, med, kind="peer", solver=PEERS[name], config=name,
                      setup_s=setup_s, operator_s=operator_s, solver_setup_s=None,
                      nbytes=nbytes, source="model (peer)" if nbytes else None, peaks=peaks,
                      deflation_vectors=None, subdomains=None, maxiter=maxiter, host=not gpu,
                      memory=memory)
