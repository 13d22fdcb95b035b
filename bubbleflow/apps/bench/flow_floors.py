"""The bandwidth floor of each phase of a flow step, in any dimension: the bytes it must move.

A phase's floor is the time its bytes take at the copy bandwidth measured in
the same run: each field the phase reads counted once and each field it
writes counted once, every field a whole grid's worth of float64 values (a
face field counted as a cell field; on an ``nx x ny (x nz)`` grid,
``8 nx ny (nz)`` bytes).  The fields are named per phase in
:data:`PHASE_FIELDS`; how many of each a case has (one per grid axis for a
velocity, none for the gas fraction without CLSVOF, ...) is
:data:`FIELD_COUNTS`, so one table serves 2-D and 3-D, the level set and
CLSVOF.  Intermediate arrays of a phase are not counted (a fused kernel
keeps them on chip), nor are the preconditioner's and the deflation's own
arrays in the pressure set-up, nor the implicit viscous solves in the
momentum: each floor is a lower bound.

The pressure solve's floor is its iterations times the bytes of one
iteration: the solver's own count where it keeps one (the fused engines),
else the model of the dimension (:data:`SOLVE_MODELS`).  The output's is one
snapshot's fields (:data:`OUTPUT_FIELDS`) written once on the host, over the
host's copy bandwidth.
"""
from __future__ import annotations

import math

from ...case.time_step import viscosity_scheme
from ...io.layout import flow_fields
from ...linalg import registry
from .model3d import bytes_per_iteration_3d

__all__ = ["PHASE_FIELDS", "FIELD_COUNTS", "PHASE_RATES", "OUTPUT_FIELDS", "OUTPUT",
           "SOLVE", "SOLVE_MODELS", "OPERATOR_ARRAYS", "field_count", "cell_bytes",
           "phase_bytes", "phase_floors", "solve_bytes_per_iteration"]

#: The name of the output phase (a snapshot written, per step).
OUTPUT = "output"
#: The name of the pressure solve's phase (its floor: iterations x bytes per iteration).
SOLVE = "pressure solve"

#: The pressure operator's stored arrays by storage, per grid dimension: the
#: diagonals (5-point in 2-D, 7-point in 3-D) or one face-coupling array per axis.
OPERATOR_ARRAYS = {"diagonals": lambda ndim: 2 * ndim + 1, "matrix_free": lambda ndim: ndim}


def _ndim(case):
    return case.grid.ndim


def _clsvof(case):
    return 1 if case.levelset.method == "clsvof" else 0


def _viscous_limit(case):
    # rho and mu are read for the explicit viscous limit of an adaptive step only.
    return 2 if case.time.dt is None and viscosity_scheme(case) == "explicit" else 0


def _deflation_phi(case):
    # phi read and the liquid/gas labels written where the deflation splits by the interface.
    return 2 if registry.deflation(case.solver.deflation.type).needs_phi else 0


def _reduced_gravity(case):
    # The dynamic pressure is stored beside the whole one (apps.run.write_run_snapshot).
    return 1 if case.momentum.gravity == "reduced" and case.physics.gravity != 0 else 0


#: Fields of a kind a case has, where that is not one: a name of
#: :data:`PHASE_FIELDS` not listed here is one cell field.
FIELD_COUNTS = {
    "velocity": _ndim,               # u, v (, w): one face component per grid axis
    "old velocity": _ndim,           # the step's starting velocity
    "u*": _ndim,                     # the provisional velocity
    "face densities": _ndim,         # rho on the faces of each axis
    "c": _clsvof,                    # CLSVOF's gas volume fraction
    "viscous limit": _viscous_limit,
    "operator": lambda case: OPERATOR_ARRAYS[case.operator.storage](_ndim(case)),
    "deflation labels": _deflation_phi,
    "cell velocity": lambda case: 3,  # the snapshot's cell-centred (u, v, w) for viewers
    "p dynamic": _reduced_gravity,
    "flow fields": lambda case: len(flow_fields(_ndim(case))),   # phi, rho, p, u, v (, w)
}

#: The fields each phase reads and writes, once each (inputs, then outputs);
#: the pressure solve's bytes come from the solver instead.
PHASE_FIELDS = {
    # phi -> H, rho, mu, face densities
    "properties": ("phi", "H", "rho", "mu", "face densities"),
    # velocity, phi (finite and max |u_a|), rho and mu (max mu/rho) -> a few scalars
    "finite check": ("velocity", "phi", "viscous limit"),
    # host arithmetic on the finite check's scalars: no device traffic
    "time step": (),
    # face densities -> the operator; phi -> labels where the deflation reads the interface
    "pressure set-up": ("face densities", "operator", "deflation labels"),
    # velocity, phi (curvature), H, mu, face densities -> u*, div u*, the rhs
    "momentum": ("velocity", "phi", "H", "mu", "face densities", "u*", "div u*", "rhs"),
    # u*, p, face densities, div u* -> velocity (its divergence norm on the way)
    "correction": ("u*", "p", "face densities", "div u*", "velocity"),
    # phi and (CLSVOF) c, carried by the velocity -> phi, c
    "advection": ("phi", "c", "velocity", "phi", "c"),
    # the level set: phi -> phi (every reinit_every steps); CLSVOF: phi, c -> phi (every step)
    "reinitialisation": ("phi", "c", "phi"),
    # the bubble sums (phi, velocity; CLSVOF: c) and the physical bounds (those and the old ones)
    "diagnostics": ("phi", "velocity", "c", "old phi", "old velocity"),
}


def _reinit_rate(case):
    """Reinitialisations per step: CLSVOF rebuilds the level set every step."""
    every = case.levelset.reinit_every
    return 1.0 if _clsvof(case) else (1.0 / every if every else 0.0)


#: Times per step a phase does its work, where that is not once.
PHASE_RATES = {"reinitialisation": _reinit_rate}

#: A snapshot's fields, each written once: the snapshot's own (phi, rho, p
#: and the face velocity), the cell velocity, and the gas fraction and the
#: dynamic pressure where the case has them.
OUTPUT_FIELDS = ("flow fields", "cell velocity", "c", "p dynamic")


def field_count(names, case):
    """Cell fields of ``names`` (kinds of :data:`FIELD_COUNTS`, or one each) in ``case``.

    Examples
    --------
    >>> from bubbleflow.case.config import case_from_dict
    >>> flat = case_from_dict({"mode": "flow", "grid": {"nx": 8, "ny": 8}})
    >>> field_count(PHASE_FIELDS["properties"], flat)
    6
    """
    return sum(FIELD_COUNTS.get(name, lambda case: 1)(case) for name in names)


def cell_bytes(case):
    """Bytes of one float64 field of the whole grid."""
    return 8 * math.prod(case.grid.cells)


def phase_bytes(case, name):
    """Bytes phase ``name`` must move per step (None: a phase without a model)."""
    fields = PHASE_FIELDS.get(name)
    if fields is None:
        return None
    return field_count(fields, case) * cell_bytes(case) * PHASE_RATES.get(name, lambda c: 1)(case)


def _model_2d(case, solver):
    return registry.model_bytes_per_iteration(
        math.prod(case.grid.cells), case.solver.preconditioner.type, case.solver.deflation.type,
        case.operator.storage)


def _model_3d(case, solver):
    return bytes_per_iteration_3d(solver)


#: Bytes of one pressure iteration where the solver keeps no count, per grid
#: dimension: the registry's 2-D model; in 3-D counted on the solver's own
#: arrays (its operator and preconditioner, :func:`.model3d.bytes_per_iteration_3d`).
SOLVE_MODELS = {2: _model_2d, 3: _model_3d}


def solve_bytes_per_iteration(case, record, solver):
    """Bytes of one iteration of the step's solve: ``record``'s own count, else the model."""
    return (getattr(record, "bytes_per_iteration", None)
            or SOLVE_MODELS[case.grid.ndim](case, solver))


def phase_floors(case, names, solve_bytes, copy_bw, host_bw):
    """``{phase: (bytes per step, floor ms per step)}`` for the phases with a model.

    ``solve_bytes``: mean bytes of one step's pressure solve (iterations x
    bytes per iteration).  The output's bytes are per snapshot (the caller
    amortises them).
    """
    out = {}
    for name in names:
        moved = solve_bytes if name == SOLVE else phase_bytes(case, name)
        if moved is not None:
            out[name] = (moved, 1e3 * moved / copy_bw)
    written = field_count(OUTPUT_FIELDS, case) * cell_bytes(case)
    out[OUTPUT] = (written, 1e3 * written / host_bw)
    return out
