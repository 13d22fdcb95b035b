"""The ranks' fused engine (bubbleflow.linalg.fused.ranks) against its twin,
the generic loop on the same distributed operator (one rank here; several
ranks over NCCL: tests/parallel/test_mpi.py's GPU tests): the same
iterations and answers, its CUDA graphs the same bits as its direct
launches, and its traffic the model's count."""
import numpy as np
import pytest

from bubbleflow import pcg
from bubbleflow.case.problem import bubbly_column, bubbly_column_3d
from bubbleflow.compute.comm import SingleProcess
from bubbleflow.operators.distributed import DistributedOperator

pytestmark = pytest.mark.gpu


def _system(dim, backend):
    # Contrast 10, as the ranks' tests: at 1000 unpreconditioned CG to 1e-10
    # is long enough that two summation orders part by more than 2 iterations.
    if dim == 2:
        A, b, _ = bubbly_column(64, 10.0, backend="cupy")
    else:
        A, b, _ = bubbly_column_3d(16, 10.0, backend="cupy")
    D = DistributedOperator.from_operator(A, SingleProcess(), align=4)
    return D, backend.xp.asarray(b).ravel()


def _preconditioner(M, D):
    """``M`` as the ranks take it: the slab multigrid built on ``D``."""
    if M == "multigrid":
        from bubbleflow.linalg.precond.agglomerated_multigrid import DistributedMultigrid

        return DistributedMultigrid(D, coarsest=64, min_side=2)
    return M


def _solve_with(D, b, M, **engine_options):
    """A solve by the ranks' fused engine (options set on it), and the engine."""
    from bubbleflow.linalg.fused.ranks import engine_for
    from bubbleflow.linalg.krylov import solve

    engines = []

    def select(system):
        e = engine_for(system.A, system.prec_obj, system.prec_name, system.deflation,
                       system.variant, system.b)
        for key, value in engine_options.items():
            setattr(e, key, value)
        engines.append(e)
        return e

    x, info = solve(D, b, rtol=1e-10, M=M, maxiter=5000, select=select)
    return x, info, engines[0]


def _kept_engine():
    """``(kept, select)``: a Krylov loop's engine selection that reuses the
    engine of the previous solve where it fits (as a flow's solver does),
    the engine in use in ``kept[0]``."""
    from bubbleflow.linalg.fused.ranks import engine_for

    kept = []

    def select(system):
        previous = kept[0] if kept else None
        kept[:] = [engine_for(system.A, system.prec_obj, system.prec_name, system.deflation,
                              system.variant, system.b, previous=previous)]
        return kept[0]
    return kept, select


@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("M", [None, "jacobi", "multigrid"])
def test_the_fused_engine_on_a_slab_is_the_generic_loop(dim, M, cupy_backend):
    D, b = _system(dim, cupy_backend)
    M = _preconditioner(M, D)
    xf, info_f = pcg(D, b, rtol=1e-10, M=M, maxiter=5000, engine="fused")
    xg, info_g = pcg(D, b, rtol=1e-10, M=M, maxiter=5000, engine="generic")
    assert (info_f.engine, info_g.engine) == ("fused", "generic")
    assert info_f.converged and info_g.converged
    # Two summation orders (blocks' partial sums, the array loop's fixed-order
    # dots): unpreconditioned CG's hundreds of iterations to 1e-10 part by a
    # few; Jacobi's within 2.
    slack = 2 if M else 2 + 0.03 * info_g.iterations
    assert abs(info_f.iterations - info_g.iterations) <= slack, \
        (info_f.iterations, info_g.iterations)
    xf, xg = cupy_backend.to_host(xf), cupy_backend.to_host(xg)
    assert np.abs(xf - xg).max() <= 1e-9 * np.abs(xg).max()
    # The same iterates: their residuals agree to rounding's drift.
    n = min(len(info_f.residual_history), len(info_g.residual_history), 40)
    assert np.allclose(info_f.residual_history[:n], info_g.residual_history[:n], rtol=1e-6)


@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("M", ["jacobi", "multigrid"])
def test_its_graphs_give_the_bits_of_its_direct_launches(dim, M, cupy_backend):
    """Jacobi in the kernels, and the slab multigrid's cycle captured with
    the iteration (its launches skipped once the solve is done)."""
    D, b = _system(dim, cupy_backend)
    M = _preconditioner(M, D)
    xg, info_g, graphs = _solve_with(D, b, M, direct_first=0)
    xd, info_d, direct = _solve_with(D, b, M, use_graphs=False)
    assert graphs.capture_error is None and any(g is not None for g in graphs._graphs.values())
    assert not direct._graphs
    assert info_g.iterations == info_d.iterations
    assert cupy_backend.xp.array_equal(xg, xd)


@pytest.mark.parametrize("dim", [2, 3])
def test_its_traffic_is_the_models_count(dim, cupy_backend):
    from bubbleflow.apps.bench.ranks_model import fused_passes

    D, b = _system(dim, cupy_backend)
    for M, jacobi in ((None, False), ("jacobi", True)):
        _, _, engine = _solve_with(D, b, M)
        assert engine.bytes_per_iteration == 8 * fused_passes(dim, jacobi) * D.shape[0]


def test_it_stops_at_the_tolerance_on_the_device(cupy_backend):
    """Iterations past the tolerance inside a graph are no-ops: the answer is
    the one at the iteration that reached it, and a second solve by the
    same engine (its graphs kept) repeats the first."""
    from bubbleflow.linalg.krylov import solve

    D, b = _system(2, cupy_backend)
    kept, select = _kept_engine()
    x1, info1 = solve(D, b, rtol=1e-8, M="jacobi", maxiter=5000, select=select,
                      check_every=50)
    first = kept[0]
    x2, info2 = solve(D, b, rtol=1e-8, M="jacobi", maxiter=5000, select=select,
                      check_every=50)
    assert kept[0] is first
    assert info1.converged and info1.iterations == info2.iterations
    assert cupy_backend.xp.array_equal(x1, x2)


def test_a_first_solve_within_its_direct_iterations_captures_nothing(cupy_backend):
    """The engine's first solve launches its first iterations directly: the
    slab multigrid's few iterations capture no graph and replay nothing;
    the same engine's next solve replays its start and its iterations from
    graphs, with the same iterations and bits."""
    from bubbleflow.linalg.krylov import solve

    D, b = _system(2, cupy_backend)
    M = _preconditioner("multigrid", D)
    kept, select = _kept_engine()
    x1, info1 = solve(D, b, rtol=1e-8, M=M, maxiter=5000, select=select)
    engine = kept[0]
    assert info1.converged and info1.iterations <= engine.direct_first
    assert not any(g is not None for g in engine._graphs.values())
    assert engine._start_graph is not None and engine._start_graph[1] is None
    x2, info2 = solve(D, b, rtol=1e-8, M=M, maxiter=5000, select=select)
    assert kept[0] is engine and info2.iterations == info1.iterations
    assert any(g is not None for g in engine._graphs.values())
    assert engine._start_graph[1] is not None
    assert cupy_backend.xp.array_equal(x1, x2)


@pytest.mark.parametrize("dim", [2, 3])
def test_the_engine_keeps_its_residual_in_the_cycles_buffers(dim, cupy_backend, monkeypatch):
    """With the slab multigrid the engine's residual and preconditioned
    residual are the cycle's finest buffers on the rank's own planes, so the
    cycle copies neither in nor out; the solves (graphs or direct launches)
    are the bits of an engine with buffers of its own, which the cycle
    copies, and a new preconditioner hands the engine its own buffers."""
    from bubbleflow.linalg.precond.agglomerated_multigrid import DistributedMultigrid

    D, b = _system(dim, cupy_backend)
    M = _preconditioner("multigrid", D)
    shared = [_solve_with(D, b, M, direct_first=direct) for direct in (0, 16)]
    engine = shared[0][2]
    r, y = M.device_buffers()
    assert engine.r.data.ptr == r.data.ptr and engine.dinv.data.ptr == y.data.ptr

    monkeypatch.setattr(DistributedMultigrid, "device_buffers", lambda self: None)
    copied = [_solve_with(D, b, M, direct_first=direct) for direct in (0, 16)]
    own = copied[0][2]
    assert own.r.data.ptr != r.data.ptr
    assert len(own.prec_launches) == len(engine.prec_launches) + 2      # the copy in and out
    for (xs, info_s, _), (xc, info_c, _) in zip(shared, copied):
        assert info_s.iterations == info_c.iterations
        assert cupy_backend.xp.array_equal(xs, xc)
    monkeypatch.undo()

    from bubbleflow.linalg.krylov import solve

    kept, select = _kept_engine()
    solve(D, b, rtol=1e-10, M=M, maxiter=5000, select=select)
    first = kept[0]
    other = _preconditioner("multigrid", D)
    x, info = solve(D, b, rtol=1e-10, M=other, maxiter=5000, select=select)
    assert kept[0] is first and info.converged
    assert first.r.data.ptr == other.device_buffers()[0].data.ptr
    assert cupy_backend.xp.array_equal(x, _solve_with(D, b, other)[0])


@pytest.mark.parametrize("dim", [2, 3])
@pytest.mark.parametrize("M", ["jacobi", "multigrid"])
def test_its_first_stretch_is_queued_before_the_start_is_read(dim, M, cupy_backend,
                                                              monkeypatch):
    """The engine takes the tolerance from the start's norms, summed over
    the ranks, on the device: the first stretch and its check are queued
    before the host reads the start's figures, which come in the check's
    transfer.  The same solve, bit for bit, with one transfer fewer."""
    from bubbleflow.linalg.krylov.device import DeviceIterations

    D, b = _system(dim, cupy_backend)
    prec = _preconditioner(M, D)
    runs = []
    for ahead in (False, True):
        with monkeypatch.context() as patch:
            if not ahead:
                patch.setattr(DeviceIterations, "starts_ahead", property(lambda self: False))
            reads = []
            many = D.backend.to_host_many
            patch.setattr(D.backend, "to_host_many",
                          lambda arrays: reads.append(len(arrays)) or many(arrays))
            x, info, engine = _solve_with(D, b, prec)
        runs.append((x, info, len(reads)))
    (x0, i0, n0), (x1, i1, n1) = runs
    assert i0.engine == i1.engine == "fused" and i1.converged
    assert cupy_backend.xp.array_equal(x0, x1)
    assert (i0.iterations, i0.residual, i0.rhs_norm) == (i1.iterations, i1.residual, i1.rhs_norm)
    np.testing.assert_array_equal(i0.residual_history, i1.residual_history)
    assert n1 == n0 - 1, (n0, n1)
