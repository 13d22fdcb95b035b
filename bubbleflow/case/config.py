"""Case files: YAML validated into a typed, frozen :class:`Case`.

A case file is a YAML mapping of sections (``grid``, ``fluids``, ``physics``,
``geometry``, ``operator``, ``solver``, ``output``) plus a few top-level
scalars (``name``, ``mode``, ``backend``, ``precision``).  :func:`load_case`
reads one, applies ``--set key.path=value`` overrides, checks every value and
the consistency between values, fills the defaults and returns a tree of
frozen dataclasses::

    case = load_case("cases/bubbly_column.yaml", ["grid.nx=512"])
    case.grid.nx, case.solver.preconditioner.type

Every problem is reported as one :class:`CaseError` whose message is a single
line naming the file (and line), the key path, the offending value and what
was expected, e.g.::

    cases/a.yaml:7: grid.nx: got -5; expected an integer >= 4

This module gathers the names of the case package; each concept lives in
a module of its own:

* :mod:`.errors`: :class:`CaseError` and how its messages quote values;
* :mod:`.key_paths`: dotted key paths, :func:`first_difference`;
* :mod:`.provenance`: where values came from (file lines, overrides);
* :mod:`.field_specs`: the field checkers the schema's fields carry;
* :mod:`.bounds`: the hard bounds (:data:`MAX_CELLS`, ...);
* :mod:`.schema`: the ``*Config`` dataclasses, :class:`Case`, the enums;
* :mod:`.loading`: :func:`load_case`, :func:`case_from_dict`, the overrides;
* :mod:`.checks`, :mod:`.geometry_checks`: the cross-field checks;
* :mod:`.relevance`: which keys a case reads given its other values, and
  the one-line warning for a ``--set`` that changes nothing;
* :mod:`.time_step`: the time-step limits, shared with the flow solvers;
* :mod:`.yaml_reader`: the one reader of every YAML text that enters.
"""
from __future__ import annotations

from .bounds import (  # noqa: F401
    LENGTH, MAGNITUDE, MAX_AXIS_CELLS, MAX_CASE_BYTES, MAX_CELLS, MAX_CIRCLES, MAX_COARSEST_CELLS,
    MAX_CONTRAST, MAX_DEGREE, MAX_ITERATIONS, MAX_MIN_SIDE, MAX_RANDOM_FILL,
    MAX_REINIT_ITERATIONS, MAX_SEED, MAX_SNAPSHOTS, MAX_STEPS, MAX_W_LEVELS,
    MIN_INTERVAL_FRACTION,
)
from .errors import MAX_MESSAGE_CHARS, MAX_PATH_CHARS, CaseError  # noqa: F401
from .field_specs import (
    EnumSpec, FloatSpec, IntSpec, ListSpec, OptionalSpec, SectionSpec, Spec, StrSpec, TupleSpec,
)
from .geometry_checks import lattice_centres
from .key_paths import first_difference
from .loading import case_from_dict, load_case, option_value, read_yaml_file  # noqa: F401
from .schema import (  # noqa: F401
    BACKENDS, DEFAULT_CELLS_PER_SUBDOMAIN, DEFAULT_DEFLATION, DEFAULT_PRECONDITIONER, DEFLATIONS,
    FACE_DENSITIES, GRAVITY_FORMS, INTERFACE_METHODS, METHODS, MODES, PRECISIONS,
    PRECONDITIONERS, STORAGES, VARIANTS, VISCOSITY_SCHEMES, WALL_CONDITIONS, BoundariesConfig,
    Case, CircleConfig, DeflationConfig, FluidConfig, FluidsConfig, GeometryConfig, GridConfig,
    LatticeConfig, LevelSetConfig, MomentumConfig, OperatorConfig, OutputConfig, PhysicsConfig,
    PreconditionerConfig, RandomBubblesConfig, SolverConfig, TimeConfig,
)
from .time_step import StepLimit, initial_dt_limits, step_limits, viscosity_scheme  # noqa: F401

__all__ = [
    "CaseError", "Case", "load_case", "case_from_dict", "lattice_centres", "first_difference",
    "initial_dt_limits", "MAX_CELLS", "MAX_CONTRAST",
    "GridConfig", "FluidConfig", "FluidsConfig", "PhysicsConfig", "CircleConfig",
    "LatticeConfig", "RandomBubblesConfig", "GeometryConfig", "OperatorConfig",
    "PreconditionerConfig", "DeflationConfig", "SolverConfig", "OutputConfig",
    "TimeConfig", "BoundariesConfig", "LevelSetConfig", "WALL_CONDITIONS",
    "MODES", "BACKENDS", "PRECISIONS", "FACE_DENSITIES", "STORAGES", "METHODS", "VARIANTS",
    "PRECONDITIONERS", "DEFLATIONS", "DEFAULT_PRECONDITIONER", "DEFAULT_DEFLATION",
]


# The field checkers under the names the schema tests walk the fields with.
_Spec, _Int, _Float, _Str, _Enum = Spec, IntSpec, FloatSpec, StrSpec, EnumSpec
_Optional, _Tuple, _List, _Section = OptionalSpec, TupleSpec, ListSpec, SectionSpec
