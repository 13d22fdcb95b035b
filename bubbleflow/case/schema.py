"""The case schema: the ``*Config`` dataclasses of the sections and
:class:`Case`, with the allowed values of the enum fields.

Each field carries its checker (``metadata["spec"]``,
:func:`~.field_specs.checked_field`) next to its default, so adding a key
or an enum value is a one-line change.  The validation is hand-written on
purpose (no schema library): the messages are the product.  Each field's
``doc`` is the one text of what its key means: the key reference
(docs/reference/case_keys.md) is generated from these fields (:mod:`.key_reference`).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Optional, Tuple

import yaml

from ..io.compression import COMPRESSIONS
from ..linalg import registry as _registry
from ..mesh.grid import Grid as _Grid
from .bounds import (MAX_AXIS_CELLS, MAX_CIRCLES, MAX_COARSE_REFRESH, MAX_COARSEST_CELLS,
                     MAX_DEGREE, MAX_ITERATIONS, MAX_MIN_SIDE, MAX_REINIT_ITERATIONS, MAX_SEED,
                     MAX_STEPS, MAX_W_LEVELS)
from .field_specs import (EnumSpec, FloatSpec, IntSpec, ListSpec, OptionalSpec, SectionSpec,
                          StrSpec, TupleSpec, checked_field)
from .provenance import Where

# Allowed values of the enum fields.  The solver's names (methods, variants,
# preconditioners, deflations) come from its registry, which imports nothing
# of the numerics (reading a case file stays independent of them).
MODES = ("pressure", "flow")
WALL_CONDITIONS = ("no_slip", "free_slip")
BACKENDS = ("auto", "numpy", "cupy")
PRECISIONS = ("float64",)
FACE_DENSITIES = ("arithmetic", "harmonic", "levelset")
STORAGES = ("diagonals", "matrix_free")
METHODS = tuple(_registry.METHODS)
VARIANTS = tuple(_registry.VARIANTS)
PRECONDITIONERS = tuple(_registry.PRECONDITIONERS)
DEFLATIONS = tuple(_registry.DEFLATIONS)

#: ``solver.preconditioner.type`` when the case does not give one.
DEFAULT_PRECONDITIONER = {m.name: m.default_preconditioner for m in _registry.METHODS.values()}
#: ``solver.deflation.cells_per_subdomain`` when the case gives neither it nor subdomains.
DEFAULT_CELLS_PER_SUBDOMAIN = _registry.DEFAULT_CELLS_PER_SUBDOMAIN
#: ``solver.deflation.type`` when the case does not give one.
DEFAULT_DEFLATION = {m.name: m.default_deflation for m in _registry.METHODS.values()}


def _choices(table):
    """The entries of a solver registry table in words, ``"`name`: doc; ..."``,
    so the key reference lists what the solver offers."""
    return "; ".join(f"`{name}`: {entry.doc}" for name, entry in table.items())


def _by_method(defaults):
    """A default that depends on ``solver.method`` in words, ``"`none` (cg,
    pcg), `levelset_subdomains` (dpcg)"``."""
    methods = {}
    for method, value in defaults.items():
        methods.setdefault(value, []).append(method)
    return ", ".join(f"`{value}` ({', '.join(names)})" for value, names in methods.items())


class _Precision(EnumSpec):
    """float64 only; float32 (documented before) is refused with the measured reason."""

    def convert(self, ctx, path, value):
        if value == "float32":
            # Refinement from a float32 operator needs eps32 * cond(A) < 1, and
            # cond(A) grows with n^2 and the contrast: measured on the bubbly
            # column, contrast 1e3 converges up to 256^2 but 1e4 stalls at
            # 128^2 (true residual 5e-3) and breaks down at 256^2.
            ctx.bad(path, value, "'float64' (float32 cannot reach the tolerance of bubbly-flow "
                    "pressure solves: refinement from a float32 operator stalls from contrast "
                    "1e4 on grids of 128^2 and more)")
        return super().convert(ctx, path, value)


_POINT = TupleSpec(FloatSpec(), (2, 3), "two numbers [x, y] (three, [x, y, z], in 3-D)")
# Cells per axis: no bound of their own, MAX_CELLS bounds their product (checked with the grid).
_AXIS = IntSpec(min=4)
# Lattice sides and random bubbles: MAX_CIRCLES in all (checked with the grid).
_CIRCLES = IntSpec(min=1, max=MAX_CIRCLES, why="bubbles and droplets in all")
# Counts that must divide a grid axis (checked with the grid).
_AXIS_PART = dict(max=MAX_AXIS_CELLS, why="a part of one grid axis")


class _Node:
    """Shared behaviour of the config dataclasses."""

    def to_dict(self):
        """Plain nested ``dict``/``list``/scalars, defaults included."""
        return _plain(self)


def _plain(obj):
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: _plain(getattr(obj, f.name))
                for f in dataclasses.fields(obj) if "spec" in f.metadata}
    if isinstance(obj, (list, tuple)):
        return [_plain(v) for v in obj]
    return obj


@dataclass(frozen=True)
class GridConfig(_Node):
    """``grid``: cells and domain size (m)."""

    nx: int = checked_field(_AXIS, 128, doc="cells along x")
    ny: int = checked_field(_AXIS, 128, doc="cells along y (up in 2-D)")
    lx: float = checked_field(FloatSpec(gt=0), 1.0, doc="domain size along x (m)")
    ly: float = checked_field(FloatSpec(gt=0), 1.0,
                              doc="domain size along y (m): the height in 2-D, the depth in 3-D")
    nz: Optional[int] = checked_field(
        OptionalSpec(_AXIS), None,
        doc="cells along z: a 3-D grid with z up (gravity along -z, the free surface a height "
            "in z, centres `[x, y, z]`); null: a 2-D grid with y up")
    lz: Optional[float] = checked_field(OptionalSpec(FloatSpec(gt=0)), None,
                                        doc="domain height along z in 3-D (m); null: 1.0")

    @property
    def ndim(self):
        return 2 if self.nz is None else 3

    @property
    def cells(self):
        """Cells per axis, x first."""
        return (self.nx, self.ny) if self.nz is None else (self.nx, self.ny, self.nz)

    @property
    def lengths(self):
        """Domain size per axis (m), x first."""
        if self.nz is None:
            return (self.lx, self.ly)
        return (self.lx, self.ly, 1.0 if self.lz is None else self.lz)


@dataclass(frozen=True)
class FluidConfig(_Node):
    """One fluid: density (kg/m^3) and dynamic viscosity (Pa s)."""

    density: float = checked_field(FloatSpec(gt=0), 1000.0, doc="density (kg/m^3)")
    viscosity: float = checked_field(FloatSpec(gt=0), 1.0e-3, doc="dynamic viscosity (Pa s)")


_GAS = {"density": 1.0, "viscosity": 1.8e-5}


@dataclass(frozen=True)
class FluidsConfig(_Node):
    """``fluids``: the liquid (water by default) and the gas (air)."""

    liquid: FluidConfig = checked_field(SectionSpec(FluidConfig), factory=FluidConfig)
    gas: FluidConfig = checked_field(SectionSpec(FluidConfig, _GAS),
                                     factory=lambda: FluidConfig(**_GAS))


@dataclass(frozen=True)
class PhysicsConfig(_Node):
    """``physics``: gravity (m/s^2), acting along -y."""

    gravity: float = checked_field(FloatSpec(ge=0), 9.81,
                                   doc="gravitational acceleration (m/s^2), along -y (-z in 3-D)")
    surface_tension: float = checked_field(
        FloatSpec(ge=0), 0.0, doc="flow: surface tension between liquid and gas (N/m)")


@dataclass(frozen=True)
class CircleConfig(_Node):
    """A bubble (gas) or droplet (liquid): centre ``(x, y)`` (``(x, y, z)``
    in 3-D) and radius (m)."""

    center: Tuple[float, ...] = checked_field(_POINT,
                                              doc="centre (m): `[x, y]`, `[x, y, z]` in 3-D")
    radius: float = checked_field(FloatSpec(gt=0), doc="radius (m)")


@dataclass(frozen=True)
class LatticeConfig(_Node):
    """``geometry.bubble_lattice``: ``columns x rows`` equal bubbles
    (``columns x rows x layers`` spheres in 3-D).

    Centres are spread evenly over ``x_range`` and ``y_range`` (and
    ``z_range``; ends included); see :func:`~.geometry_checks.lattice_centres`.
    """

    columns: int = checked_field(_CIRCLES, doc="bubbles along x")
    rows: int = checked_field(_CIRCLES, doc="bubbles along y")
    radius: float = checked_field(FloatSpec(gt=0), doc="radius of every bubble (m)")
    x_range: Tuple[float, float] = checked_field(
        TupleSpec(FloatSpec(), 2, "two numbers [x0, x1] with x0 <= x1"),
        doc="x of the first and the last column's centres (m); one column: the midpoint")
    y_range: Tuple[float, float] = checked_field(
        TupleSpec(FloatSpec(), 2, "two numbers [y0, y1] with y0 <= y1"),
        doc="y of the first and the last row's centres (m); one row: the midpoint")
    layers: Optional[int] = checked_field(OptionalSpec(_CIRCLES), None,
                                          doc="3-D (required there): spheres along z")
    z_range: Optional[Tuple[float, float]] = checked_field(
        OptionalSpec(TupleSpec(FloatSpec(), 2, "two numbers [z0, z1] with z0 <= z1")), None,
        doc="3-D (required there): z of the bottom and the top layer's centres (m); "
            "one layer: the midpoint")


@dataclass(frozen=True)
class RandomBubblesConfig(_Node):
    """``geometry.random_bubbles``: ``count`` non-overlapping bubbles, reproducible
    from ``seed``, in ``region = [x0, x1, y0, y1]`` (``[x0, x1, y0, y1, z0,
    z1]`` in 3-D; None: the whole domain)."""

    count: int = checked_field(_CIRCLES, doc="number of bubbles")
    radius: float = checked_field(FloatSpec(gt=0), doc="radius of every bubble (m)")
    seed: int = checked_field(IntSpec(min=0, max=MAX_SEED, why="a signed 64-bit integer"), 0,
                              doc="seed of the random draw: a seed places the same bubbles "
                                  "on every run")
    min_gap: float = checked_field(
        FloatSpec(ge=0), 0.0,
        doc="least distance (m) between a bubble's surface and any other bubble's, those of "
            "`bubbles` and `bubble_lattice` included")
    region: Optional[Tuple[float, ...]] = checked_field(
        OptionalSpec(TupleSpec(FloatSpec(), (4, 6),
                               "four numbers [x0, x1, y0, y1] (six in 3-D, "
                               "[x0, x1, y0, y1, z0, z1])")), None,
        doc="the box (m) the bubbles lie in, each whole: `[x0, x1, y0, y1]`, "
            "`[x0, x1, y0, y1, z0, z1]` in 3-D; null: the whole domain")


@dataclass(frozen=True)
class GeometryConfig(_Node):
    """``geometry``: where the liquid and the gas are at the start."""

    free_surface: Optional[float] = checked_field(
        OptionalSpec(FloatSpec()), None,
        doc="height (m) of a flat liquid surface, liquid below and gas above (a height in z in "
            "3-D); null: a domain full of liquid")
    bubbles: Tuple[CircleConfig, ...] = checked_field(
        ListSpec(SectionSpec(CircleConfig), "a list of {center: [x, y], radius: r}"), (),
        doc="gas circles (spheres in 3-D) in the liquid")
    droplets: Tuple[CircleConfig, ...] = checked_field(
        ListSpec(SectionSpec(CircleConfig), "a list of {center: [x, y], radius: r}"), (),
        doc="liquid circles (spheres in 3-D) in the gas: above the free surface or inside "
            "a bubble")
    bubble_lattice: Optional[LatticeConfig] = checked_field(
        OptionalSpec(SectionSpec(LatticeConfig)), None,
        doc="equal bubbles evenly spaced, `columns x rows` (`x layers` spheres in 3-D); "
            "null: none")
    random_bubbles: Optional[RandomBubblesConfig] = checked_field(
        OptionalSpec(SectionSpec(RandomBubblesConfig)), None,
        doc="`count` equal bubbles at reproducible random places, apart from each other; "
            "null: none")


@dataclass(frozen=True)
class OperatorConfig(_Node):
    """``operator``: face-density rule and how the 5-point operator is stored."""

    face_density: str = checked_field(
        EnumSpec(FACE_DENSITIES), "arithmetic",
        doc="the density on a cell face: `arithmetic` (the mean of the two cells'), `harmonic` "
            "(their harmonic mean), `levelset` (from the smoothed Heaviside of phi at the "
            "face, epsilon = 1.5 h)")
    storage: str = checked_field(
        EnumSpec(STORAGES), "diagonals",
        doc="how the pressure operator is stored: `diagonals` (five diagonals, seven in 3-D) or "
            "`matrix_free` (the face couplings only); the same matrix either way",
        default_text="`diagonals` in 2-D, `matrix_free` in 3-D")


@dataclass(frozen=True)
class PreconditionerConfig(_Node):
    """``solver.preconditioner``.  ``type``'s default depends on the method."""

    type: str = checked_field(EnumSpec(PRECONDITIONERS), DEFAULT_PRECONDITIONER["pcg"],
                              doc="the preconditioner: " + _choices(_registry.PRECONDITIONERS),
                              default_text=_by_method(DEFAULT_PRECONDITIONER))
    block_lines: int = checked_field(
        IntSpec(min=2, **_AXIS_PART), 2,
        doc="`block_ic`: grid lines per incomplete-Cholesky block, a divisor of ny below ny "
            "(3-D: x-lines of one z-plane, a divisor of ny; ny: whole planes)")
    degree: int = checked_field(
        IntSpec(min=1, max=MAX_DEGREE,
                why="smoothing steps per visit; more cost more than they gain"), 2,
        doc="`multigrid`: Chebyshev smoothing steps per visit of a level")
    ratio: float = checked_field(
        FloatSpec(gt=1), 4.0,
        doc="`multigrid`: the smoother targets the eigenvalues of D^-1 A in `[2/ratio, 2]`")
    scale: float = checked_field(
        FloatSpec(gt=0, lt=2), 1.8,
        doc="`multigrid`: over-correction of the coarse-grid correction")
    coarsest: int = checked_field(
        IntSpec(min=1, max=MAX_COARSEST_CELLS,
                why="the coarsest level is solved through a dense inverse"), 512,
        doc="`multigrid`: cells of the coarsest level at most (it is solved directly)")
    min_side: int = checked_field(
        IntSpec(min=1, max=MAX_MIN_SIDE,
                why="it holds back levels of at most that many cells only"), 16,
        doc="`multigrid`: no level narrower than this many cells, among levels of up to "
            "1024 cells (the coarsening stops before one)")
    cycle_precision: str = checked_field(
        EnumSpec(("float64", "float32")), "float32",
        doc="`multigrid`: the cycle's arithmetic (`float32` halves its bytes); the Krylov "
            "method keeps its own")
    w_levels: object = checked_field(
        IntSpec(min=0, max=MAX_W_LEVELS, also=("auto",), why="more levels than any grid has"),
        "auto", doc="`multigrid`: top levels that visit their coarse level twice (a W-cycle "
                    "there); 0: a V-cycle; `auto`: those whose coarse level has at least "
                    "2^18 cells, at most 3")
    coarse_refresh: object = checked_field(
        IntSpec(min=1, max=MAX_COARSE_REFRESH, also=("auto",),
                why="an older coarsest inverse costs iterations"),
        "auto", doc="`multigrid`: a flow's steps between two computations of the coarsest "
                    "level's inverse (the levels above it every step); 1: every step; `auto`: "
                    "once the interface may have moved an eighth of a coarsest cell (at least "
                    "half a cell) since, at most 16 steps, and after a solve that took "
                    "clearly more iterations")

    def options(self):
        """Every preconditioner option of the section (the solver passes on
        those its preconditioner's registry entry lists)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "type"}


@dataclass(frozen=True)
class DeflationConfig(_Node):
    """``solver.deflation``.  ``type``'s default depends on the method."""

    type: str = checked_field(EnumSpec(DEFLATIONS), DEFAULT_DEFLATION["pcg"],
                              doc="the deflation space (dpcg): " + _choices(_registry.DEFLATIONS),
                              default_text=_by_method(DEFAULT_DEFLATION))
    subdomains: Optional[Tuple[int, int]] = checked_field(
        OptionalSpec(TupleSpec(IntSpec(min=1, **_AXIS_PART), (2, 3),
                               "two integers [px, py] >= 1 (three in 3-D)")), None,
        doc="`subdomains`, `levelset_subdomains`: block counts `[px, py]` (`[px, py, pz]` in "
            "3-D) dividing the grid's cells, instead of `cells_per_subdomain` (an override of "
            "either replaces the other); null: from `cells_per_subdomain`")
    cells_per_subdomain: Optional[int] = checked_field(
        OptionalSpec(IntSpec(min=1, **_AXIS_PART)), None,
        doc="`subdomains`, `levelset_subdomains`: subdomain width in cells, so refining the "
            f"grid refines the deflation; null: {DEFAULT_CELLS_PER_SUBDOMAIN} "
            f"({_registry.DEFAULT_CELLS_BY_DIMENSION[3]} in 3-D), wider where that would give "
            f"more than {_registry.DEFAULT_MAX_SUBDOMAINS} subdomains")
    stripes: int = checked_field(
        IntSpec(min=1, **_AXIS_PART), 16,
        doc="`stripes`: number of horizontal stripes, a divisor of ny (3-D: layers along z, "
            "a divisor of nz)")

    def subdomain_counts(self, nx, ny, nz=None):
        """``(px, py[, pz])``: as written, or blocks about
        ``cells_per_subdomain`` cells wide on an ``nx x ny (x nz)`` grid
        (default: 16 cells, at most 4096 blocks;
        :func:`bubbleflow.linalg.registry.default_subdomains`)."""
        if self.subdomains is not None:
            return tuple(self.subdomains)
        grid = (_Grid(nx, ny) if nz is None
                else _Grid.regular((nx, ny, nz), (1.0, 1.0, 1.0)))
        return _registry.default_subdomains(grid, self.cells_per_subdomain)


_ITERATIONS = IntSpec(min=1, max=MAX_ITERATIONS, why="the residual history is an array of maxiter")


@dataclass(frozen=True)
class SolverConfig(_Node):
    """``solver``: Krylov method, preconditioner, deflation, stopping."""

    method: str = checked_field(
        EnumSpec(METHODS), "pcg",
        doc="the Krylov method: " + "; ".join(f"`{m.name}`: {m.doc}"
                                              for m in _registry.METHODS.values()),
        default_text="`pcg`; `dpcg` where a deflation type other than `none` (or a deflation "
                     "option) is written, `cg` where the preconditioner `none` is")
    variant: str = checked_field(
        EnumSpec(VARIANTS), "adef2",
        doc="dpcg's deflation variant: `adef2` (robust; the preconditioner P^T M^-1 + Q) or "
            "`def1` (CG on P A x^ = P b, then x = Q b + P^T x^)")
    preconditioner: PreconditionerConfig = checked_field(SectionSpec(PreconditionerConfig),
                                                         factory=PreconditionerConfig)
    deflation: DeflationConfig = checked_field(SectionSpec(DeflationConfig),
                                               factory=DeflationConfig)
    rtol: float = checked_field(
        FloatSpec(gt=0, lt=1), 1.0e-8,
        doc="relative tolerance: the solve stops when the true residual "
            "`‖b - A x‖ <= max(rtol ‖b‖, atol)`")
    atol: float = checked_field(FloatSpec(ge=0), 0.0,
                                doc="absolute tolerance of that stop (`solver.rtol`)")
    maxiter: int = checked_field(_ITERATIONS, 10000,
                                 doc="iteration limit of a solve; one that reaches it unconverged "
                                     "fails")
    check_every: int = checked_field(
        _ITERATIONS, 10,
        doc="iterations between host-side convergence checks; the fused GPU engine tests the "
            "tolerance on the device every iteration and spaces its host checks out to up to "
            "16x this while the residual falls steadily")


@dataclass(frozen=True)
class OutputConfig(_Node):
    """``output``: where results are written.

    ``interval``: simulated time (s) between field snapshots in ``mode: flow``
    (each snapshot is also a restart checkpoint); null: start and end only.
    ``compression`` and ``compression_level``: how the fields are stored
    (:mod:`bubbleflow.io.compression`, chosen by measurement).
    ``bubbles_every``: steps between the samples of the bubble tracking
    (``mode: flow``; :mod:`bubbleflow.flow.bubble_tracking`), 0: none;
    ``auto``: :func:`bubbleflow.flow.bubble_tracking.sample_interval`.
    """

    directory: str = checked_field(
        StrSpec("a non-empty directory path"), "outputs",
        doc="the folder `<name>.h5` is written to (the command line's `-o` overrides it)")
    interval: Optional[float] = checked_field(
        OptionalSpec(FloatSpec(gt=0)), None,
        doc="flow: simulated time (s) between field snapshots, each also a restart "
            "checkpoint; null: start and end only")
    compression: str = checked_field(
        EnumSpec(COMPRESSIONS), "auto",
        doc="how the fields are stored: `none`, `gzip` (stock HDF5 and ParaView read both), or "
            "`auto`: each field with gzip where a sample of it shrinks at least 4 times (the "
            "density's and the volume fraction's few values), else uncompressed (gzip gains "
            "little on smooth fields, at a small part of a disk's speed)")
    compression_level: int = checked_field(
        IntSpec(min=1, max=9, why="gzip's levels"), 1,
        doc="gzip's level, 1 (fastest) to 9 (smallest); chunks of whole rows of about 1 MiB")
    bubbles_every: object = checked_field(
        IntSpec(min=0, max=MAX_STEPS, also=("auto",), why="the most steps of a flow"), "auto",
        doc="flow: steps between the samples of the bubble tracking (the steps that are "
            "multiples of it, step 0 included): every connected gas region labelled, measured "
            "and given an identity that it keeps from sample to sample, written to `/bubbles`; "
            "0: no tracking; `auto`: every step on the CPU, every 10 steps on a GPU, where a "
            "sample costs about half a step")


@dataclass(frozen=True)
class TimeConfig(_Node):
    """``time`` (mode flow): end time (s) and time-step control.

    The step is the smallest of the convective (``cfl``), viscous, capillary
    and gravity limits and ``dt_max``; ``dt`` fixes it instead.
    """

    end: float = checked_field(FloatSpec(gt=0), 1.0, doc="flow: end time (s)")
    cfl: float = checked_field(
        FloatSpec(gt=0, le=1), 0.25,
        doc="flow: convective CFL number, the step at most `cfl h / umax`; the viscous, "
            "capillary and gravity limits and `dt_max` bound it too")
    dt: Optional[float] = checked_field(
        OptionalSpec(FloatSpec(gt=0)), None,
        doc="flow: a fixed time step (s), at most the stability limit at t = 0; `cfl` and "
            "`dt_max` are then not read; null: the step from the limits, every step")
    dt_max: Optional[float] = checked_field(OptionalSpec(FloatSpec(gt=0)), None,
                                            doc="flow: upper bound of the step (s); null: none")


@dataclass(frozen=True)
class BoundariesConfig(_Node):
    """``boundaries`` (mode flow): wall condition of each side (x: left,
    right; y: bottom, top in 2-D, front, back in 3-D; z: bottom, top)."""

    left: str = checked_field(EnumSpec(WALL_CONDITIONS), "no_slip",
                              doc="flow: the wall at x = 0")
    right: str = checked_field(EnumSpec(WALL_CONDITIONS), "no_slip",
                               doc="flow: the wall at x = lx")
    bottom: str = checked_field(EnumSpec(WALL_CONDITIONS), "no_slip",
                                doc="flow: the wall at y = 0 (z = 0 in 3-D)")
    top: str = checked_field(EnumSpec(WALL_CONDITIONS), "no_slip",
                             doc="flow: the wall at y = ly (z = lz in 3-D)")
    front: str = checked_field(EnumSpec(WALL_CONDITIONS), "no_slip",
                               doc="flow, 3-D: the wall at y = 0")
    back: str = checked_field(EnumSpec(WALL_CONDITIONS), "no_slip",
                              doc="flow, 3-D: the wall at y = ly")


#: How the interface is carried (mode flow): the level set alone, or coupled
#: with a conservative volume of fluid (CLSVOF: the gas volume kept to
#: round-off; :mod:`bubbleflow.flow.vof_advection`).
INTERFACE_METHODS = ("levelset", "clsvof")


@dataclass(frozen=True)
class LevelSetConfig(_Node):
    """``levelset`` (mode flow): the interface method and the reinitialisation schedule."""

    method: str = checked_field(
        EnumSpec(INTERFACE_METHODS), "clsvof",
        doc="flow: `clsvof`: a gas volume fraction advected beside the level set by geometric "
            "PLIC fluxes (Weymouth-Yue split sweeps) keeps the gas volume to round-off, and the "
            "level set is rebuilt every step as the distance to the PLIC interface (the level "
            "set still gives the curvature, the densities and the deflation); its snapshots "
            "also hold `c`; or `levelset`: the level set alone, cheaper, its gas volume drifts "
            "(docs/interface_study.md)")
    reinit_every: int = checked_field(
        IntSpec(min=0, max=MAX_STEPS, why="the most steps of a flow"), 5,
        doc="flow, `method: levelset`: steps between reinitialisations of the level set; "
            "0: never (`clsvof` rebuilds it every step)")
    reinit_iterations: int = checked_field(
        IntSpec(min=1, max=MAX_REINIT_ITERATIONS,
                why="each is a pass over the grid; the flow reads the distance a few cells out"),
        4, doc="flow, `method: levelset`: pseudo-time steps of each reinitialisation (each "
               "carries the distance about 0.3 cells out from the interface)")


#: How gravity enters the momentum equation (mode flow).
GRAVITY_FORMS = ("reduced", "volumetric")
#: How the viscous stress is advanced (mode flow); ``auto`` resolves per case
#: (:func:`~.time_step.viscosity_scheme`).
VISCOSITY_SCHEMES = ("auto", "implicit", "explicit")
#: How the viscosity varies across the interface's width (mode flow).
VISCOSITY_MEANS = ("arithmetic", "harmonic")


@dataclass(frozen=True)
class MomentumConfig(_Node):
    """``momentum``: how gravity and viscosity enter the step (``gravity``
    also a pressure case's system; the rest mode flow only).

    ``gravity: reduced`` writes ``-grad p + rho g`` as ``-grad p_d + (rho_l -
    rho_g) g.(x - x0) grad H``: the pressure solved for is the dynamic part
    ``p_d = p - rho g.(x - x0)`` and gravity acts at the interface, on the
    faces, like the surface tension (the hydrostatic part is added back for
    output).  ``volumetric``: ``rho g`` on every face, ``p`` the whole
    pressure.  ``viscosity: implicit`` solves the variable-viscosity stress
    (backward Euler, the velocity components coupled through lagged
    cross-derivative terms) so the step has no viscous limit; ``explicit``
    keeps it explicit with ``dt <= 0.4 / ndim h^2 / nu``; ``auto`` (the
    default) is implicit where that limit would set the step, explicit where another
    limit is smaller anyway (:func:`~.time_step.viscosity_scheme`).
    """

    gravity: str = checked_field(
        EnumSpec(GRAVITY_FORMS), "reduced",
        doc="`reduced`: gravity acts at the interface, `(rho_l - rho_g) g.(x - x0) grad H` "
            "on the faces like the surface tension, the pressure solved for the dynamic part "
            "(`x0` on the free surface, else on the bottom; `p` in the output is the whole "
            "pressure); or `volumetric`: `rho g` on every face, the whole pressure solved for. "
            "A pressure case solves its fluid at rest's first projection in this form: the "
            "dynamic part reaches tolerances that the whole pressure's float64 rounding stops "
            "above on fine grids and at high contrast")
    viscosity: str = checked_field(
        EnumSpec(VISCOSITY_SCHEMES), "auto",
        doc="flow: `implicit`: the viscous stress backward Euler, one solve per velocity "
            "component by Jacobi-preconditioned Chebyshev, cross terms lagged, no viscous step "
            "limit; `explicit`: the step kept to `dt <= 0.4 / ndim h^2 / nu`; or `auto`: "
            "implicit where that limit would set the step at t = 0, explicit where another "
            "limit is smaller anyway")
    viscosity_mean: str = checked_field(
        EnumSpec(VISCOSITY_MEANS), "arithmetic",
        doc="flow: the viscosity across the interface's width: `arithmetic`, linear in the "
            "smoothed Heaviside H (`mu_g + (mu_l - mu_g) H`); `harmonic`, its inverse linear "
            "in H (`1 / ((1 - H) / mu_g + H / mu_l)`), the gas's viscosity holding further "
            "into the band")
    viscous_rtol: float = checked_field(
        FloatSpec(gt=0, lt=1), 1.0e-10,
        doc="flow: relative tolerance of the implicit viscous solves")


@dataclass(frozen=True)
class Case(_Node):
    """A validated case: every value checked, every default filled.

    Attributes
    ----------
    name, mode, backend, precision : str
    grid : GridConfig
    fluids : FluidsConfig
    physics : PhysicsConfig
    geometry : GeometryConfig
    operator : OperatorConfig
    solver : SolverConfig
    output : OutputConfig
    source : str
        The case file's path, or ``"<dict>"``; not part of :meth:`to_dict`.
    """

    # `name` names the output file, so no path separators.
    name: str = checked_field(
        StrSpec("a non-empty name without '/' or '\\' (it names the output file)",
                forbid="/\\\0"), "",
        doc="the run's name; it names the output file `<name>.h5`",
        default_text="the case file's name without its extension")
    mode: str = checked_field(
        EnumSpec(MODES), "pressure",
        doc="`pressure`: build the geometry, assemble the operator, solve once, write "
            "`<name>.h5`; `flow`: a time-dependent two-phase flow up to `time.end`")
    backend: str = checked_field(EnumSpec(BACKENDS), "auto",
                                 doc="`auto`: CuPy where a GPU is usable, else NumPy; `numpy`; "
                                     "`cupy`")
    precision: str = checked_field(
        _Precision(PRECISIONS), "float64",
        doc="the solve's arithmetic; `float32` is refused: its refinement cannot reach the "
            "tolerance at bubbly-flow contrasts (the Python API keeps it for moderate "
            "problems, see `PressureSolver`)")
    grid: GridConfig = checked_field(SectionSpec(GridConfig), factory=GridConfig)
    fluids: FluidsConfig = checked_field(SectionSpec(FluidsConfig), factory=FluidsConfig)
    physics: PhysicsConfig = checked_field(SectionSpec(PhysicsConfig), factory=PhysicsConfig)
    geometry: GeometryConfig = checked_field(SectionSpec(GeometryConfig), factory=GeometryConfig)
    operator: OperatorConfig = checked_field(SectionSpec(OperatorConfig), factory=OperatorConfig)
    solver: SolverConfig = checked_field(SectionSpec(SolverConfig), factory=SolverConfig)
    output: OutputConfig = checked_field(SectionSpec(OutputConfig), factory=OutputConfig)
    time: TimeConfig = checked_field(SectionSpec(TimeConfig), factory=TimeConfig)
    boundaries: BoundariesConfig = checked_field(SectionSpec(BoundariesConfig),
                                                 factory=BoundariesConfig)
    levelset: LevelSetConfig = checked_field(SectionSpec(LevelSetConfig), factory=LevelSetConfig)
    momentum: MomentumConfig = checked_field(SectionSpec(MomentumConfig), factory=MomentumConfig)
    source: str = "<dict>"
    # Lines and overrides, for errors found later (CaseError.from_runtime).
    _where: Optional[Where] = field(default=None, repr=False, compare=False)

    def to_yaml(self):
        """The resolved case as YAML text (loads back to an equal case)."""
        return yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None)
