"""What the solver offers, by name: methods, deflation variants, preconditioners
and deflation spaces, with their rules, options and costs.

Every other module reads its names from here: the case file's enums
(:mod:`bubbleflow.case.config`), :class:`~bubbleflow.linalg.solver.PressureSolver`,
the factories (:func:`~bubbleflow.linalg.precond.make_preconditioner`,
:func:`~bubbleflow.linalg.deflation.space.make_deflation`), the fused GPU engine and
the benchmark's bytes model.  Standard library only: the factories are
``"module:attribute"`` strings imported on first use (:func:`load`), so
reading a case file never imports the numerics.

Adding a preconditioner: its module under ``bubbleflow/linalg/precond/`` and
one :class:`PreconditionerEntry` in :data:`PRECONDITIONERS` below.

What runs on a rank's slab of a distributed operator is read from the
entries too: a preconditioner or deflation space with a ``slab`` builder
runs on ranks, one without does not (:func:`on_slabs`), and the
preconditioner's ``slab_align`` says what the slab edges must fall on.

>>> [m.name for m in METHODS.values()]
['cg', 'pcg', 'dpcg']
>>> PRECONDITIONERS["jacobi"].fused
'jacobi'
>>> model_bytes_per_iteration(100, "jacobi", "none") // (8 * 100)
25
>>> on_slabs(DEFLATIONS)
('none', 'subdomains', 'stripes', 'levelset_subdomains')
"""
from __future__ import annotations

import functools
import importlib
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

__all__ = [
    "MethodEntry", "VariantEntry", "PreconditionerEntry", "DeflationEntry", "FusedVariant",
    "METHODS", "VARIANTS", "PRECONDITIONERS", "DEFLATIONS", "FUSED_VARIANTS", "ENGINES",
    "DEVICE_ENGINES", "RANK_DEVICE_ENGINES", "DEVICE_ENGINE_BACKENDS",
    "MATVEC_ARRAYS", "load", "preconditioner", "deflation", "method", "method_violations",
    "model_bytes_per_iteration", "fused_prec_code", "method_defaults", "on_slabs",
]

#: Engines that run the Krylov iteration: ``array`` (the backend loop, the
#: reference) and ``fused`` (the CUDA iteration, :mod:`bubbleflow.linalg.fused.engine`).
ENGINES = ("array", "fused")
#: Engines that run whole iterations on the device: ``name -> "module:factory"``,
#: ``factory(A, M, M_name, deflation, variant, b, previous=None)`` returning
#: the engine or None where it does not apply (:mod:`bubbleflow.linalg.engines`).
DEVICE_ENGINES = {"fused": "bubbleflow.linalg.fused.engine3d:engine_for"}
#: The same engines on one rank's rows of a distributed operator (its sums
#: reduced over the ranks between the kernels).
RANK_DEVICE_ENGINES = {"fused": "bubbleflow.linalg.fused.ranks:engine_for"}
#: The backends each device engine runs on (its module is not even imported
#: on the others).
DEVICE_ENGINE_BACKENDS = {"fused": ("cupy",)}


@dataclass(frozen=True)
class MethodEntry:
    """A Krylov method and what it takes.

    ``preconditioner`` and ``deflation`` are ``"forbidden"``, ``"optional"``
    or ``"required"`` (``"none"`` is the absent one).
    """

    name: str
    preconditioner: str
    deflation: str
    default_preconditioner: str
    default_deflation: str
    doc: str = ""


@dataclass(frozen=True)
class VariantEntry:
    """A deflation variant (Tang, Nabben, Vuik, Erlangga 2009)."""

    name: str
    doc: str = ""


@dataclass(frozen=True)
class FusedVariant:
    """A preconditioner branch of the fused update kernel.

    ``code`` is the kernel's ``#define PREC`` value; ``update_arrays`` the
    grid arrays its update reads and writes (each once), ``extra_arrays``
    what follows it (the generic branch's ``r . y``).
    """

    name: str
    code: int
    update_arrays: int
    extra_arrays: int = 0


@dataclass(frozen=True)
class PreconditionerEntry:
    """A preconditioner.

    Attributes
    ----------
    factory : str
        ``"module:class"``, called as ``factory(A, **options)``.
    options : tuple of str
        The keyword options it takes (from the case's
        ``solver.preconditioner`` section or the solver's arguments).
    dimensions : tuple of int
        Grid dimensions it supports.
    engines : tuple of str
        Engines that can apply it (:data:`ENGINES`).
    arrays : int
        Grid arrays (of N values) one application reads and writes, each
        counted once: the benchmark's bytes model.
    fused : str
        Its branch of the fused update kernel (:data:`FUSED_VARIANTS`):
        ``generic`` means applied by its own kernels after the update.
    slab : str or None
        ``"module:builder"``, called as ``builder(A_rank, **options)`` (the
        same options): the preconditioner on one rank's slab of a
        :class:`~bubbleflow.operators.distributed.DistributedOperator`.
        None: it does not run on ranks.
    slab_align : str or None
        ``"module:function"``, called as ``function(shape, ranks,
        **options)`` with the whole grid's array shape (planes first): the
        planes the ranks' slab edges must fall on a multiple of.  None: any
        plane (1).
    """

    name: str
    factory: str
    options: Tuple[str, ...] = ()
    dimensions: Tuple[int, ...] = (2,)
    engines: Tuple[str, ...] = ENGINES
    arrays: int = 0
    fused: str = "generic"
    doc: str = ""
    slab: Optional[str] = None
    slab_align: Optional[str] = None


@dataclass(frozen=True)
class DeflationEntry:
    """A deflation space: ``factory(A, phi=..., subdomains=..., stripes=..., ...)``.

    ``arrays``: grid arrays the A-DEF2 coarse correction moves per iteration.
    ``slab``: ``"module:builder"``, called as ``builder(name, A_rank, grid,
    phi=..., subdomains=..., stripes=..., cells_per_subdomain=...)`` (``grid``
    the whole grid, ``phi`` the level set on the rank's widened slab): the
    space on one rank's slab of a distributed operator, or None (``none``:
    no space); None: it does not run on ranks.
    """

    name: str
    factory: Optional[str]
    options: Tuple[str, ...] = ()
    needs_phi: bool = False
    dimensions: Tuple[int, ...] = (2,)
    engines: Tuple[str, ...] = ENGINES
    arrays: int = 0
    doc: str = ""
    slab: Optional[str] = None


_NONE = "none"

METHODS: Dict[str, MethodEntry] = {m.name: m for m in (
    MethodEntry("cg", "forbidden", "forbidden", _NONE, _NONE, "conjugate gradients"),
    MethodEntry("pcg", "required", "forbidden", "multigrid", _NONE,
                "preconditioned CG"),
    MethodEntry("dpcg", "optional", "required", "incomplete_poisson_scaled",
                "levelset_subdomains", "deflated preconditioned CG"),
)}

VARIANTS: Dict[str, VariantEntry] = {v.name: v for v in (
    VariantEntry("adef2", "preconditioner P^T M^-1 + Q, start Q b + P^T x (default)"),
    VariantEntry("def1", "CG on P A x^ = P b, x = Q b + P^T x^"),
)}

FUSED_VARIANTS: Dict[str, FusedVariant] = {v.name: v for v in (
    FusedVariant("identity", 0, 7),
    FusedVariant("jacobi", 1, 8),
    FusedVariant("scaled_incomplete_poisson", 2, 10),
    FusedVariant("generic", 3, 6, 2),
)}

_P = "bubbleflow.linalg.precond"
PRECONDITIONERS: Dict[str, PreconditionerEntry] = {p.name: p for p in (
    PreconditionerEntry("none", f"{_P}.base:Identity", fused="identity", doc="identity",
                        dimensions=(2, 3), slab=f"{_P}.base:Identity"),
    PreconditionerEntry("jacobi", f"{_P}.jacobi:Jacobi", options=("check",), arrays=3,
                        dimensions=(2, 3),
                        fused="jacobi", doc="D^-1", slab=f"{_P}.jacobi:Jacobi"),
    PreconditionerEntry("block_ic", f"{_P}.block_ic:BlockIC", options=("block_lines",),
                        dimensions=(2, 3),
                        arrays=14, doc="IC(0) in blocks of m grid lines",
                        slab=f"{_P}.block_ic:block_ic_on_slab",
                        slab_align=f"{_P}.block_ic:slab_alignment"),
    PreconditionerEntry("incomplete_poisson", f"{_P}.incomplete_poisson:IncompletePoisson",
                        arrays=12, doc="IP (Ament et al. 2010), (I - L D^-1)(I - D^-1 L^T)",
                        slab=f"{_P}.incomplete_poisson:DistributedIncompletePoisson"),
    PreconditionerEntry("incomplete_poisson_scaled",
                        f"{_P}.incomplete_poisson:ScaledIncompletePoisson", arrays=13,
                        dimensions=(2, 3),
                        fused="scaled_incomplete_poisson", doc="IP on D^-1/2 A D^-1/2",
                        slab=f"{_P}.incomplete_poisson:DistributedScaledIncompletePoisson"),
    # arrays: the default cycle (Multigrid.bytes_per_apply has the model per
    # options): per level, down reads the 2 couplings and b, writes x and
    # the coarse b (4.25); up reads the couplings, b, x and the coarse x,
    # writes the result (5.25); 9.5 per level, x 4/3 for the coarser levels.
    PreconditionerEntry("multigrid", f"{_P}.multigrid:Multigrid",
                        options=("degree", "ratio", "scale", "coarsest", "min_side",
                                 "cycle_precision", "w_levels", "coarse_refresh"),
                        dimensions=(2, 3),
                        arrays=13,
                        doc="V-cycle on 2x2-aggregated cells, Galerkin, Chebyshev smoothing",
                        slab=f"{_P}.agglomerated_multigrid:DistributedMultigrid",
                        slab_align=f"{_P}.agglomerated_multigrid:slab_alignment"),
)}

_D = "bubbleflow.linalg.deflation.space"
_DS = "bubbleflow.linalg.deflation.distributed:slab_deflation"
# A-DEF2 coarse correction: Z^T r (r + labels), (AZ)^T s (about 5 entries per
# row: values and column indices, ~7.5 arrays), prolongation (labels +
# write), the add (3).
_DEFLATION_ARRAYS = 14
DEFLATIONS: Dict[str, DeflationEntry] = {d.name: d for d in (
    DeflationEntry("none", None, doc="no deflation", slab=_DS),
    DeflationEntry("subdomains", f"{_D}:make_deflation", options=("subdomains", "cells_per_subdomain"),
                   dimensions=(2, 3), arrays=_DEFLATION_ARRAYS,
                   doc="px x py (x pz) rectangular blocks", slab=_DS),
    DeflationEntry("stripes", f"{_D}:make_deflation", options=("stripes",), dimensions=(2, 3),
                   arrays=_DEFLATION_ARRAYS, doc="horizontal stripes (z layers in 3-D)", slab=_DS),
    DeflationEntry("levelset_subdomains", f"{_D}:make_deflation", options=("subdomains", "cells_per_subdomain"),
                   needs_phi=True, dimensions=(2, 3), arrays=_DEFLATION_ARRAYS,
                   doc="blocks split into their liquid and gas parts", slab=_DS),
)}

#: Default width of a deflation subdomain, in cells (per axis): the
#: subdomain counts follow the grid (:meth:`Grid.blocks_of_about`), so a
#: refined case keeps its deflation as fine.  Chosen by measurement
#: (docs/performance_records.md, "Deflation subdomain size").
DEFAULT_CELLS_PER_SUBDOMAIN = 16
#: ... per grid dimension: 16 in 2-D, 8 in 3-D (boxes of 256 and 512 cells;
#: 16-cell cubes left a 32^3 column with 8 boxes, each holding two bubbles).
DEFAULT_CELLS_BY_DIMENSION = {2: DEFAULT_CELLS_PER_SUBDOMAIN, 3: 8}
#: ... and at most this many subdomains, so that the coarse system (two
#: vectors per subdomain with the level-set split) stays small beside the
#: grid: past it the default subdomains grow.
DEFAULT_MAX_SUBDOMAINS = 4096


def default_subdomains(grid, cells_per_subdomain=None):
    """Deflation block counts for ``grid`` (a :class:`bubbleflow.mesh.grid.Grid`):
    about ``cells_per_subdomain`` cells wide when given, else the default
    width within the default maximum count.  Remembered per grid (a flow asks
    at every step; the divisor search costs a fraction of a millisecond)."""
    try:
        return _default_subdomains(grid, cells_per_subdomain)
    except TypeError:                      # a grid that cannot be a key
        return _subdomains_of(grid, cells_per_subdomain)


def _subdomains_of(grid, cells_per_subdomain):
    if cells_per_subdomain is not None:
        return grid.blocks_of_about(cells_per_subdomain)
    width = DEFAULT_CELLS_BY_DIMENSION.get(grid.ndim, DEFAULT_CELLS_PER_SUBDOMAIN)
    return grid.blocks_of_about(width, DEFAULT_MAX_SUBDOMAINS)


@functools.lru_cache(maxsize=64)
def _default_subdomains(grid, cells_per_subdomain):
    return tuple(_subdomains_of(grid, cells_per_subdomain))

#: Grid arrays one operator application moves, by storage: five stored
#: diagonals + x read, y written; matrix-free: two face-coupling arrays + x
#: read, y written (the halo reads hit the cache).
MATVEC_ARRAYS = {"diagonals": 7, "matrix_free": 5}
#: CG vector work per iteration: 3 dot products (6 reads), x and r updates
#: (6), p update (3).
VECTOR_ARRAYS = 15


def load(target: str):
    """The object a ``"module:attribute"`` string names (imported now)."""
    module, _, attr = target.partition(":")
    return getattr(importlib.import_module(module), attr)


def _lookup(table, kind, name):
    try:
        return table[name]
    except (KeyError, TypeError):
        raise ValueError(f"unknown {kind} {name!r}; expected one of "
                         f"{', '.join(table)}") from None


def method(name) -> MethodEntry:
    return _lookup(METHODS, "method", name)


def preconditioner(name) -> PreconditionerEntry:
    return _lookup(PRECONDITIONERS, "preconditioner", name)


def deflation(name) -> DeflationEntry:
    return _lookup(DEFLATIONS, "deflation", name)


def on_slabs(table):
    """The names of ``table`` (:data:`PRECONDITIONERS` or :data:`DEFLATIONS`)
    whose entries run on a rank's slab (a ``slab`` builder), in the
    table's order.

    >>> on_slabs(PRECONDITIONERS)
    ('none', 'jacobi', 'block_ic', 'incomplete_poisson', 'incomplete_poisson_scaled', 'multigrid')
    """
    return tuple(name for name, entry in table.items() if entry.slab is not None)


def method_violations(name, preconditioner_name, deflation_name):
    """The rules of method ``name`` that the pair breaks, as
    ``(what, rule)`` pairs: ``what`` is ``"preconditioner"`` or
    ``"deflation"``, ``rule`` ``"forbidden"`` or ``"required"``.

    >>> method_violations("cg", "jacobi", "none")
    [('preconditioner', 'forbidden')]
    >>> method_violations("dpcg", "jacobi", "none")
    [('deflation', 'required')]
    """
    entry = method(name)
    out = []
    for what, given, rule in (("preconditioner", preconditioner_name, entry.preconditioner),
                              ("deflation", deflation_name, entry.deflation)):
        if rule == "forbidden" and given != _NONE:
            out.append((what, rule))
        elif rule == "required" and given == _NONE:
            out.append((what, rule))
    return out


def method_defaults(method=None, preconditioner=None, deflation=None, deflation_options=False):
    """``(method, preconditioner, deflation)`` with those not given (None)
    filled in: the method from what was given (a deflation other than
    ``none``, or only options of one (``deflation_options``): ``dpcg``;
    else the preconditioner ``none``: ``cg``; else ``pcg``), then the
    method's default preconditioner and deflation."""
    if method is None and deflation is None and deflation_options:
        deflation = METHODS["dpcg"].default_deflation
    if method is None:
        if deflation not in (None, _NONE):
            method = "dpcg"
        elif preconditioner == _NONE:
            method = "cg"
        else:
            method = "pcg"
    entry = METHODS.get(method)
    if entry is not None:
        preconditioner = entry.default_preconditioner if preconditioner is None else preconditioner
        deflation = entry.default_deflation if deflation is None else deflation
    return method, preconditioner, deflation


def fused_prec_code(name) -> int:
    """The fused update kernel's ``PREC`` value for preconditioner ``name``
    (the generic branch for a name the registry does not know)."""
    entry = PRECONDITIONERS.get(name)
    return FUSED_VARIANTS[entry.fused if entry is not None else "generic"].code


def model_bytes_per_iteration(n_cells, preconditioner_name, deflation_name, storage="diagonals"):
    """Bytes one iteration must move by the model (float64): the operator,
    the preconditioner, the CG vector work and the coarse correction, each
    grid array counted once per read and once per write.

    >>> model_bytes_per_iteration(100, "jacobi", "levelset_subdomains") // (8 * 100)
    39
    """
    arrays = (MATVEC_ARRAYS[storage] + preconditioner(preconditioner_name).arrays
              + VECTOR_ARRAYS + deflation(deflation_name).arrays)
    return 8 * n_cells * arrays
