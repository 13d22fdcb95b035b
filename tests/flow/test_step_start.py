"""A step's start (the level set's properties and the step scalars) read
with the previous step's figures: the same step as one that computes it."""
import dataclasses
import os

import numpy as np
import pytest

from bubbleflow.case.config import load_case
from bubbleflow.flow.navier_stokes import FlowSolver
from helpers.cli import ROOT


def _copy(state, xp):
    """A new state object with copies of every array (no carried start)."""
    fields = {f.name: getattr(state, f.name) for f in dataclasses.fields(state)}
    for name, value in fields.items():
        if isinstance(value, tuple):
            fields[name] = tuple(xp.array(v, copy=True) for v in value)
        elif hasattr(value, "shape"):
            fields[name] = xp.array(value, copy=True)
    return type(state)(**fields)


def _same(a, b, to_host):
    for f in dataclasses.fields(a):
        x, y = getattr(a, f.name), getattr(b, f.name)
        if isinstance(x, tuple):
            assert all(np.array_equal(to_host(p), to_host(q)) for p, q in zip(x, y)), f.name
        elif hasattr(x, "shape"):
            assert np.array_equal(to_host(x), to_host(y)), f.name
        else:
            assert x == y, f.name


@pytest.mark.parametrize("case_file,sets", [
    ("cases/two_phase.yaml", ["grid.nx=20", "grid.ny=40"]),
    ("cases/rising_bubble_3d.yaml", ["grid.nx=8", "grid.ny=8", "grid.nz=16"]),
])
def test_a_step_from_the_state_a_step_made_reads_one_transfer_fewer_and_the_same_bits(
        backend, case_file, sets):
    case = load_case(os.path.join(ROOT, case_file), sets)
    made_by = FlowSolver(case, backend)
    fresh = FlowSolver(case, backend)
    state = made_by.initial_state()
    for _ in range(2):       # the same history (the pressure solver's kept set-up)
        fresh.step(_copy(state, backend.xp))
        state, _ = made_by.step(state)
    reads = []
    for solver in (made_by, fresh):
        one, many = backend.to_host, backend.to_host_many
        counted = {"n": 0}

        def to_host(a, one=one, counted=counted):
            counted["n"] += 1
            return one(a)

        def to_host_many(arrays, many=many, counted=counted):
            counted["n"] += 1
            return many(arrays)

        backend.to_host, backend.to_host_many = to_host, to_host_many
        try:
            start = state if solver is made_by else _copy(state, backend.xp)
            new, report = solver.step(start)
        finally:
            del backend.to_host, backend.to_host_many
        reads.append((counted["n"], new, report))
    (n_made, new_made, rep_made), (n_fresh, new_fresh, rep_fresh) = reads
    assert n_made == n_fresh - 1, (n_made, n_fresh)
    _same(new_made, new_fresh, backend.to_host)
    assert rep_made.dt == rep_fresh.dt and rep_made.diagnostics == rep_fresh.diagnostics
    assert rep_made.bounds == rep_fresh.bounds


def _counting(backend, counted):
    one, many = backend.to_host, backend.to_host_many

    def to_host(a):
        counted["n"] += 1
        return one(a)

    def to_host_many(arrays):
        counted["n"] += 1
        return many(arrays)

    return to_host, to_host_many


@pytest.mark.parametrize("case_file,sets", [
    ("cases/two_phase.yaml", ["grid.nx=20", "grid.ny=40"]),
    ("cases/hysing_case2.yaml", ["grid.nx=20", "grid.ny=40"]),
    ("cases/bubbly_column_flow.yaml", ["grid.nx=16", "grid.ny=32"]),
    ("cases/rising_bubble_3d.yaml", ["grid.nx=8", "grid.ny=8", "grid.nz=16"]),
])
def test_the_transport_check_read_with_the_figures_is_the_same_step_with_one_read_fewer(
        backend, case_file, sets):
    case = load_case(os.path.join(ROOT, case_file), sets)
    runs = {}
    for ahead in (False, True):
        flow = FlowSolver(case, backend)
        flow.check_ahead = ahead
        state, reads, shortened, redone = flow.initial_state(), [], [], []
        for _ in range(4):
            counted, before = {"n": 0}, flow.ends_redone
            backend.to_host, backend.to_host_many = _counting(backend, counted)
            try:
                state, report = flow.step(state)
            finally:
                del backend.to_host, backend.to_host_many
            reads.append(counted["n"])
            shortened.append(report.shortened)
            redone.append(flow.ends_redone - before)
        runs[ahead] = (state, reads, shortened, redone, report)
    (s0, r0, sh0, _, rep0), (s1, r1, sh1, redone, rep1) = runs[False], runs[True]
    _same(s0, s1, backend.to_host)
    assert sh0 == sh1 and rep0.dt == rep1.dt and rep0.diagnostics == rep1.diagnostics
    # A step that passes the check reads it with its figures; one whose check
    # fails (a shortened step: from rest, the column's first) reads the end
    # queued ahead in vain.
    assert [b - a for a, b in zip(r0, r1)] == [1 if n else -1 for n in redone]
    assert all(n == 1 for n, s in zip(redone, sh0) if s)
    assert sh0[0] >= 1 or "column" not in case_file
