"""`PressureSolver` on a rank's slab of a distributed operator: what runs
there is read from the registry's ``slab`` builders (one rank here: the
slab is the whole grid, so each answer is the one process's); what has no
builder, float32 and a deflation space without the whole grid are refused
before any set-up; :func:`slab_align` asks the preconditioner's entry."""
from types import SimpleNamespace

import numpy as np
import pytest

from bubbleflow import PressureSolver, bubbly_column
from bubbleflow.case.problem import bubbly_column_3d
from bubbleflow.compute.comm import SingleProcess
from bubbleflow.linalg import registry
from bubbleflow.linalg.solver import slab_align
from bubbleflow.mesh.ranks import coarsening_align
from bubbleflow.operators.distributed import DistributedOperator


@pytest.fixture(scope="module")
def column():
    A, b, phi = bubbly_column(32, 10.0)
    return A, np.asarray(b).ravel(), np.asarray(phi), \
        DistributedOperator.from_operator(A, SingleProcess())


def test_what_runs_on_slabs_is_what_has_a_slab_builder():
    assert registry.on_slabs(registry.PRECONDITIONERS) == tuple(
        name for name, entry in registry.PRECONDITIONERS.items() if entry.slab is not None)
    assert set(registry.on_slabs(registry.PRECONDITIONERS)) == {
        "none", "jacobi", "block_ic", "incomplete_poisson", "incomplete_poisson_scaled",
        "multigrid"}
    assert set(registry.on_slabs(registry.DEFLATIONS)) == set(registry.DEFLATIONS)
    for table in (registry.PRECONDITIONERS, registry.DEFLATIONS):
        for name in registry.on_slabs(table):
            assert callable(registry.load(table[name].slab)), name


@pytest.mark.parametrize("preconditioner", registry.on_slabs(registry.PRECONDITIONERS))
@pytest.mark.parametrize("deflation", ["none", "levelset_subdomains"])
def test_one_rank_gives_the_one_process_answer(column, preconditioner, deflation):
    A, b, phi, D = column
    kw = dict(preconditioner=preconditioner, deflation=deflation, rtol=1e-10,
              subdomains=(4, 4) if deflation != "none" else None)
    x1, rec1 = PressureSolver(A, phi=phi, **kw).solve(b)
    solver = PressureSolver(D, phi=phi, grid=A.grid, **kw)
    x, rec = solver.solve(D.scatter_local(b))
    assert rec.converged and rec.preconditioner == preconditioner
    assert rec.deflation == deflation and solver.rtol == 1e-10 and solver.setup_seconds > 0
    # (the same method summed in another order: plain CG's count drifts)
    assert abs(rec.iterations - rec1.iterations) <= max(2, rec1.iterations // 10)
    assert np.abs(x - x1).max() <= 1e-7 * np.abs(x1).max()
    # update, then a solve from a guess with this solve's tolerances
    x2, rec2 = solver.update(D, phi=phi, check=False).solve(D.scatter_local(b), x0=x,
                                                             rtol=0.0, atol=1e-6)
    assert rec2.converged and rec2.iterations <= 2


def test_from_config_takes_the_whole_grid(column):
    from bubbleflow.case.config import load_case
    from pathlib import Path

    A, b, phi, D = column
    case = load_case(Path(__file__).resolve().parents[2] / "cases" / "bubbly_column.yaml",
                     ["solver.method=dpcg", "solver.deflation.type=stripes",
                      "solver.preconditioner.type=jacobi", "solver.deflation.stripes=4"])
    solver = PressureSolver.from_config(D, case.solver, phi=phi, grid=A.grid)
    x, rec = solver.solve(D.scatter_local(b))
    assert rec.converged and rec.deflation == "stripes" and rec.deflation_vectors == 4


def test_what_does_not_run_on_slabs_is_refused_before_any_set_up(column, monkeypatch):
    A, b, phi, D = column
    entry = registry.PreconditionerEntry("damped", "bubbleflow.linalg.precond.jacobi:Jacobi")
    monkeypatch.setitem(registry.PRECONDITIONERS, "damped", entry)
    monkeypatch.setattr(PressureSolver, "update",
                        lambda *a, **k: pytest.fail("the set-up started"))
    with pytest.raises(ValueError, match="preconditioner 'damped' does not run on a rank's "
                                         "slab; on ranks: none, jacobi"):
        PressureSolver(D, method="pcg", preconditioner="damped")
    with pytest.raises(ValueError, match="precision 'float32' runs on one process"):
        PressureSolver(D, method="pcg", preconditioner="jacobi", precision="float32")
    with pytest.raises(ValueError, match=r"needs the whole grid \(grid=\)"):
        PressureSolver(D, method="dpcg", preconditioner="jacobi", deflation="stripes")


def test_a_solver_keeps_its_partition(column):
    A, b, phi, D = column
    with pytest.raises(ValueError, match="built for a rank's slab"):
        PressureSolver(D, method="pcg", preconditioner="jacobi").update(A)
    with pytest.raises(ValueError, match="built for the whole grid"):
        PressureSolver(A, method="pcg", preconditioner="jacobi").update(D)


def test_a_slabs_solve_counts_its_grids_unknowns_without_a_collective(column, monkeypatch):
    """A solve on a rank's slab takes the unknowns over every rank (its
    default ``maxiter``, the gauge, the record) from the slab's grid: no
    collective that would make its set-up wait for the other ranks."""
    from bubbleflow.linalg.krylov.system import make_system

    A, b, _, D = column
    calls = []
    monkeypatch.setattr(SingleProcess, "sum_int", lambda self, v: calls.append(v) or v)
    system, _ = make_system(D, b, None, None, "adef2", "auto", None, 10, None,
                            dict(method="cg", rtol=1e-8))
    assert system.size == A.shape[0] == int(np.prod(D.slab.shape))
    assert system.maxiter == 10 * A.shape[0]
    assert calls == []
    whole, _ = make_system(A, b, None, None, "adef2", "auto", None, 10, None,
                           dict(method="cg", rtol=1e-8))
    assert whole.size == system.size


def test_slab_align_is_the_preconditioners_entrys():
    def cfg(kind, **options):
        pc = SimpleNamespace(type=kind, options=lambda: {"block_lines": 4, "degree": 2,
                                                          **options})
        return SimpleNamespace(preconditioner=pc)

    flat, deep = SimpleNamespace(shape=(256, 64), ndim=2), SimpleNamespace(shape=(64, 8, 8),
                                                                          ndim=3)
    assert slab_align(cfg("multigrid"), flat, 4) == coarsening_align(256, 4) == 32
    assert slab_align(cfg("block_ic"), flat, 4) == 4
    assert slab_align(cfg("block_ic"), deep, 4) == 1
    for kind in ("none", "jacobi", "incomplete_poisson_scaled"):
        assert slab_align(cfg(kind), flat, 4) == 1


def test_a_3d_slab_solves_with_the_agglomerated_multigrid():
    A, b, phi = bubbly_column_3d(16, 10.0)
    D = DistributedOperator.from_operator(A, SingleProcess())
    solver = PressureSolver(D, method="pcg", preconditioner="multigrid", rtol=1e-9,
                            preconditioner_options={"coarsest": 64, "min_side": 2})
    x, rec = solver.solve(D.scatter_local(np.asarray(b).ravel()))
    assert rec.converged and type(solver.M).__name__ == "DistributedMultigrid"
    assert solver.M.n_levels > 1


@pytest.mark.parametrize("dims", [2, 3])
def test_one_slab_multigrid_moves_the_bytes_of_the_whole_grids(dims):
    """The slab multigrid's byte model on one rank is the whole grid's
    multigrid's, level for level (both :func:`multigrid.cycle_bytes`)."""
    from bubbleflow.linalg.precond.agglomerated_multigrid import DistributedMultigrid
    from bubbleflow.linalg.precond.multigrid import Multigrid

    A = bubbly_column(64)[0] if dims == 2 else bubbly_column_3d(16)[0]
    slab = DistributedMultigrid(DistributedOperator.from_operator(A, SingleProcess()))
    whole = Multigrid(A)
    assert slab.n_levels == len(whole.levels) and slab.bytes_per_apply() > 0
    assert slab.bytes_per_apply() == whole.bytes_per_apply()
    assert slab.bytes_per_apply(io_itemsize=4) == whole.bytes_per_apply(io_itemsize=4)


@pytest.mark.gpu
@pytest.mark.parametrize("dims", [2, 3])
@pytest.mark.parametrize("precision, w_levels, gather_cells",
                         [("float64", 0, 0), ("float32", 1, 0), ("float32", "auto", None)])
def test_the_slab_cycle_kernels_are_the_one_gpu_cycle(cupy_backend, dims, precision, w_levels,
                                                      gather_cells, monkeypatch):
    """On CuPy the slab multigrid's cycle is the one-GPU kernels on widened
    slabs, replayed from a CUDA graph: on one rank it is the whole grid's
    kernel cycle (the same kernels on the same levels) to rounding, every
    level kept on the slab (0) or the small ones gathered (None); in
    float64 it is the array cycle to the rounding the contrast amplifies."""
    from bubbleflow.linalg.precond.agglomerated_multigrid import DistributedMultigrid
    from bubbleflow.linalg.precond.multigrid import Multigrid
    from bubbleflow.linalg.precond.slab_cycle_cuda import SlabGraphCycle

    A = bubbly_column(128, 1000.0, backend="cupy")[0] if dims == 2 else \
        bubbly_column_3d(32, 1000.0, backend="cupy")[0]
    D = DistributedOperator.from_operator(A, SingleProcess())
    options = dict(coarsest=64, min_side=2, cycle_precision=precision, w_levels=w_levels)
    mg = DistributedMultigrid(D, **options, gather_cells=gather_cells)
    assert isinstance(mg.runner, SlabGraphCycle)
    assert (mg.runner.gathered == mg.gathered) == (gather_cells == 0)
    cp = cupy_backend.xp
    r = cp.asarray(np.random.default_rng(3).standard_normal(D.shape[0]))
    r -= r.mean()
    one = Multigrid(A, **options)
    for m in (mg, one):
        m.prepare(r)
    got = mg.apply(r)
    assert mg.runner.graph is not None, mg.runner.capture_error
    again = mg.apply(r)
    assert bool((again == got).all()) and again.data.ptr != got.data.ptr
    want = one.apply(r)
    scale = float(cp.abs(want).max())
    err = float(cp.abs(got - want).max()) / scale
    print(f"slab kernels against the whole grid's: {err:.2e}")
    assert err <= (1e-12 if precision == "float64" else 1e-5)
    assert mg.whole is None and mg.bytes_per_apply() > 0     # (the runner keeps its own)
    if precision == "float64":
        from bubbleflow.linalg.precond import agglomerated_multigrid as am

        monkeypatch.setattr(am, "slab_cycle_runner", am.slab_cycle_runner.reference)
        plain = DistributedMultigrid(D, **options, gather_cells=gather_cells)
        assert plain.runner is None and plain.whole is not None
        plain.prepare(r)
        array = plain.apply(r)
        assert float(cp.abs(got - array).max()) <= 1e-8 * scale


@pytest.mark.parametrize("dims", [2, 3])
def test_a_refreshed_slab_multigrid_is_a_new_one(backend, dims):
    """``refresh`` takes the next operator of the same slab in place (a
    flow's step: the CUDA cycle's graph stays valid) and gives a new
    hierarchy's cycle bit for bit; another slab is refused."""
    from bubbleflow.linalg.precond.agglomerated_multigrid import DistributedMultigrid

    make = (lambda c: bubbly_column(64, c, backend=backend.name)[0]) if dims == 2 else \
        (lambda c: bubbly_column_3d(16, c, backend=backend.name)[0])
    comm = SingleProcess()
    first, second = (DistributedOperator.from_operator(make(c), comm) for c in (10.0, 1000.0))
    options = dict(coarsest=64, min_side=2, w_levels=1)
    mg = DistributedMultigrid(first, **options)
    r = backend.xp.asarray(np.random.default_rng(5).standard_normal(first.shape[0]))
    assert mg.refresh(second)
    fresh = DistributedMultigrid(second, **options)
    for m in (mg, fresh):
        m.prepare(r)
    assert bool((mg.apply(r) == fresh.apply(r)).all())
    other = DistributedOperator.from_operator(bubbly_column(32)[0] if dims == 2 else
                                              bubbly_column_3d(8)[0], comm)
    assert not mg.refresh(other)


@pytest.mark.parametrize("dims", [2, 3])
def test_refreshes_of_a_slab_multigrid_replayed_from_a_graph(backend, dims):
    """Refresh after refresh (on a GPU: the first launched, the next captured
    into one CUDA graph and the later ones replayed from it) each gives a new
    hierarchy's cycle bit for bit."""
    from bubbleflow.linalg.precond.agglomerated_multigrid import DistributedMultigrid

    make = (lambda c: bubbly_column(64, c, backend=backend.name)[0]) if dims == 2 else \
        (lambda c: bubbly_column_3d(16, c, backend=backend.name)[0])
    comm = SingleProcess()
    ops = [DistributedOperator.from_operator(make(c), comm) for c in (10.0, 1000.0, 3.0)]
    options = dict(coarsest=64, min_side=2, w_levels=1)
    mg = DistributedMultigrid(ops[0], **options)
    r = backend.xp.asarray(np.random.default_rng(6).standard_normal(ops[0].shape[0]))
    for step in range(5):
        op = ops[(step + 1) % 3]
        assert mg.refresh(op)
        fresh = DistributedMultigrid(op, **options)
        for m in (mg, fresh):
            m.prepare(r)
        assert bool((mg.apply(r) == fresh.apply(r)).all()), step
    if mg.runner is not None:
        assert mg.runner.replays.counts == {"run": 1, "captured": 1, "replayed": 4}
