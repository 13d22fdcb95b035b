"""The named cases of ``bubbleflow bench --flow``, 2-D and 3-D, and the sizes they run at.

The case files live in the source tree's ``cases/`` folder, which an
installed package does not carry, so the benchmark's named cases are
written here as the text of those files (``tests/apps/test_bench_flow.py``
checks that they still resolve to the same cases as the files named in
:data:`NAMED_CASES`: ``cases/two_phase.yaml``, ``cases/bubbly_column_flow.yaml``,
``cases/rising_bubble_3d.yaml`` and ``cases/bubbly_column_3d_flow.yaml``).
Any other ``mode: flow`` case file can be named by its path instead.

A size is the cells of every axis of the case's grid: ``NX`` (the other
axes from the case's aspect), or one number per axis (``NXxNY`` in 2-D,
``NXxNYxNZ`` in 3-D).
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...case.config import CaseError, case_from_dict, load_case
from ...linalg import registry
from .options import PROG

__all__ = ["NAMED_CASES", "FlowConfig", "named_case_data", "named_case", "parse_size", "size_cells",
           "build_configs", "case_loader", "case_at_cells", "nearest_divisor", "subdomain_counts",
           "uses_subdomains", "CASES_HELP", "SIZES_HELP", "DEFAULT_LABELS"]

#: The size of each grid axis, as ``--sizes`` writes it (x first).
AXES = ("NX", "NY", "NZ")
#: The grid keys a size sets, x first.
GRID_AXIS_KEYS = ("grid.nx", "grid.ny", "grid.nz")

#: ``cases/two_phase.yaml``: Hysing et al. (2009) rising bubble, test case 1.
HYSING_TEXT = """
name: two_phase
mode: flow
backend: auto
precision: float64
grid: {nx: 40, ny: 80, lx: 1.0, ly: 2.0}
fluids:
  liquid: {density: 1000.0, viscosity: 10.0}
  gas:    {density: 100.0,  viscosity: 1.0}
physics: {gravity: 0.98, surface_tension: 24.5}
geometry:
  bubbles:
    - {center: [0.5, 0.5], radius: 0.25}
boundaries: {left: free_slip, right: free_slip, bottom: no_slip, top: no_slip}
operator: {face_density: levelset, storage: diagonals}
solver:
  method: pcg
  preconditioner: {type: multigrid}
  deflation: {type: none}
  rtol: 1.0e-9
time: {end: 3.0, cfl: 0.25}
levelset: {reinit_every: 5, reinit_iterations: 4}
output: {directory: outputs, interval: 0.5}
"""

#: ``cases/bubbly_column_flow.yaml``: six air bubbles rising in water under a free surface.
COLUMN_TEXT = """
name: bubbly_column_flow
mode: flow
backend: auto
precision: float64
grid: {nx: 64, ny: 128, lx: 0.5, ly: 1.0}
fluids:
  liquid: {density: 1000.0, viscosity: 1.0e-3}
  gas:    {density: 1.0,    viscosity: 1.8e-5}
physics: {gravity: 9.81, surface_tension: 0.0728}
geometry:
  free_surface: 0.8
  bubbles:
    - {center: [0.12, 0.15], radius: 0.045}
    - {center: [0.38, 0.18], radius: 0.05}
    - {center: [0.25, 0.32], radius: 0.04}
    - {center: [0.11, 0.45], radius: 0.04}
    - {center: [0.37, 0.50], radius: 0.045}
    - {center: [0.24, 0.60], radius: 0.04}
boundaries: {left: free_slip, right: free_slip, bottom: no_slip, top: no_slip}
operator: {face_density: levelset, storage: diagonals}
solver:
  method: pcg
  preconditioner: {type: multigrid}
  deflation: {type: none}
  rtol: 1.0e-9
time: {end: 1.0, cfl: 0.25}
levelset: {reinit_every: 5, reinit_iterations: 4}
output: {directory: outputs, interval: 0.1}
"""



#: ``cases/rising_bubble_3d.yaml``: the 3-D rising bubble of Adelsberger et al. (2014), case 1.
RISING3D_TEXT = """
name: rising_bubble_3d
mode: flow
backend: auto
precision: float64
grid: {nx: 32, ny: 32, nz: 64, lx: 1.0, ly: 1.0, lz: 2.0}
fluids:
  liquid: {density: 1000.0, viscosity: 10.0}
  gas:    {density: 100.0,  viscosity: 1.0}
physics: {gravity: 0.98, surface_tension: 24.5}
geometry:
  bubbles:
    - {center: [0.5, 0.5, 0.5], radius: 0.25}
boundaries: {left: no_slip, right: no_slip, front: no_slip, back: no_slip,
             bottom: no_slip, top: no_slip}
operator: {face_density: levelset}
solver:
  method: pcg
  preconditioner: {type: multigrid}
  deflation: {type: none}
  rtol: 1.0e-9
time: {end: 3.0, cfl: 0.25}
levelset: {reinit_every: 5, reinit_iterations: 4}
momentum: {gravity: reduced, viscosity: explicit}
output: {directory: outputs, interval: 0.5}
"""

#: ``cases/bubbly_column_3d_flow.yaml``: six air bubbles rising in water under a free surface, 3-D.
COLUMN3D_TEXT = """
name: bubbly_column_3d_flow
mode: flow
backend: auto
precision: float64
grid: {nx: 48, ny: 48, nz: 96, lx: 0.5, ly: 0.5, lz: 1.0}
fluids:
  liquid: {density: 1000.0, viscosity: 1.0e-3}
  gas:    {density: 1.0,    viscosity: 1.8e-5}
physics: {gravity: 9.81, surface_tension: 0.0728}
geometry:
  free_surface: 0.8
  random_bubbles: {count: 6, radius: 0.06, seed: 7, min_gap: 0.02,
                   region: [0.0, 0.5, 0.0, 0.5, 0.05, 0.6]}
boundaries: {left: free_slip, right: free_slip, front: free_slip, back: free_slip,
             bottom: no_slip, top: no_slip}
operator: {face_density: levelset}
solver:
  method: pcg
  preconditioner: {type: multigrid}
  deflation: {type: none}
  rtol: 1.0e-9
time: {end: 0.5, cfl: 0.25}
levelset: {reinit_every: 5, reinit_iterations: 4}
output: {directory: outputs, interval: 0.1}
"""

@dataclass(frozen=True)
class NamedCase:
    """A benchmark case by name: its case text, the case file it copies, default nx."""

    name: str
    text: str
    file: str
    gpu_sizes: tuple
    cpu_sizes: tuple
    what: str


#: The named cases of ``--cases``; default sizes are nx (the other axes from
#: the case's aspect), on the GPU and on the CPU (small: seconds a size).
NAMED_CASES = {
    "hysing": NamedCase("hysing", HYSING_TEXT, "cases/two_phase.yaml", (80, 160, 320),
                        (40, 80), "Hysing case 1"),
    "column": NamedCase("column", COLUMN_TEXT, "cases/bubbly_column_flow.yaml",
                        (512, 1024, 2048), (64, 128), "the bubbly column flow"),
    "rising3d": NamedCase("rising3d", RISING3D_TEXT, "cases/rising_bubble_3d.yaml",
                          (128, 256, 512), (16, 24), "the 3-D rising bubble"),
    "column3d": NamedCase("column3d", COLUMN3D_TEXT, "cases/bubbly_column_3d_flow.yaml",
                          (128, 256, 512), (16, 24), "the 3-D bubbly column flow"),
}
#: ``--cases`` when none is given.
DEFAULT_LABELS = ("hysing", "column")

#: The ``--cases`` help of the CLI.
CASES_HELP = ("; ".join(f"{c.name} ({c.what}, {c.file})" for c in NAMED_CASES.values())
              + "; or paths of mode: flow case files; comma- or space-separated (default "
              + ",".join(DEFAULT_LABELS) + ")")
#: The ``--sizes`` help of the CLI with ``--flow``.
SIZES_HELP = ("with --flow: NX (the other axes from the case's aspect), NXxNY (a 2-D case) or "
              "NXxNYxNZ (a 3-D case); default nx on the GPU (on the CPU): " + ", ".join(
                  f"{c.name} {' '.join(map(str, c.gpu_sizes))} ({' '.join(map(str, c.cpu_sizes))})"
                  for c in NAMED_CASES.values()) + "; a case file's own grid")

#: Override keys that fix the grid: they exclude ``--sizes``.
GRID_KEYS = ("grid",) + GRID_AXIS_KEYS
SUBDOMAIN_KEYS = ("solver", "solver.deflation", "solver.deflation.subdomains",
                  "solver.deflation.cells_per_subdomain")


@dataclass
class FlowConfig:
    """One configuration of the flow benchmark: a validated case and how it was made."""

    label: str             # a name of NAMED_CASES, or the case file's path
    case: object           # the validated Case, at its size
    subdomains_note: str   # which deflation subdomains, and why

    @property
    def title(self):
        """The label and every axis' cells: ``"rising3d 16 x 16 x 32"``."""
        return f"{self.label} {' x '.join(map(str, self.case.grid.cells))}"


def named_case_data(name):
    """The case of ``NAMED_CASES[name]`` as a dict (parsed from its text)."""
    import yaml

    return yaml.safe_load(NAMED_CASES[name].text)


def named_case(name, cells, source, overrides=()):
    """The validated case ``NAMED_CASES[name]`` on ``cells`` (per axis, x
    first), with ``overrides`` (``"key=value"`` strings) after them;
    ``source`` names the caller in its messages."""
    sets = [f"{key}={n}" for key, n in zip(GRID_AXIS_KEYS, cells)] + list(overrides)
    return case_from_dict(named_case_data(name), source, sets)


def _size_forms(ndim):
    """``"NX (NY, NZ from the case's aspect) or NXxNYxNZ"`` for ``ndim`` axes."""
    return (f"NX ({', '.join(a.lower() for a in AXES[1:ndim])} from the case's aspect) or "
            + "x".join(AXES[:ndim]))


def parse_size(token, option="--sizes"):
    """The cells given per axis, x first: ``"80"`` -> ``(80,)``, ``"512x1024"`` ->
    ``(512, 1024)``, ``"32x32x64"`` -> ``(32, 32, 64)`` (each >= 4).

    Raises
    ------
    CaseError
        Not one to three integers >= 4 joined by ``x``.
    """
    parts = str(token).strip().lower().split("x")
    try:
        values = tuple(int(p) for p in parts)
    except ValueError:
        values = ()
    if not 1 <= len(values) <= len(AXES) or min(values) < 4:
        raise CaseError(PROG, option, f"got {token!r}",
                        "NX, NXxNY or NXxNYxNZ (cells per axis, each >= 4; NX alone: the other "
                        "axes from the case's aspect)")
    return values


def size_cells(values, grid, label, token, option="--sizes"):
    """The cells per axis of a case whose grid is ``grid`` at the size ``values``
    (:func:`parse_size`): one number per axis as given, or ``nx`` alone with
    the other axes in the grid's aspect.

    Raises
    ------
    CaseError
        As many numbers as neither one nor the grid's axes.
    """
    nd = grid.ndim
    if len(values) == nd:
        return tuple(values)
    if len(values) != 1:
        raise CaseError(PROG, option, f"got {token!r} for {label}, a {nd}-D case",
                        _size_forms(nd))
    nx = values[0]
    return (nx,) + tuple(max(4, round(nx * n / grid.nx)) for n in grid.cells[1:])


def nearest_divisor(n, count):
    """The divisor of ``n`` nearest to ``count`` (the larger one on a tie).

    >>> nearest_divisor(100, 8), nearest_divisor(160, 8), nearest_divisor(7, 4)
    (10, 8, 7)
    """
    small = [d for d in range(1, int(n ** 0.5) + 1) if n % d == 0]
    divisors = small + [n // d for d in small]
    return min(divisors, key=lambda d: (abs(d - count), -d))


def _keys(overrides):
    """The dotted keys of ``--set`` items (as written, stripped)."""
    return {str(item).partition("=")[0].strip() for item in overrides}


def case_loader(label, prog=f"{PROG} --flow"):
    """``load(overrides) -> Case`` for a name of :data:`NAMED_CASES` or a
    case file's path; ``prog``, the command, names a named case's source in
    its messages."""
    if label in NAMED_CASES:
        data = named_case_data(label)
        source = f"{prog} ({label}: {NAMED_CASES[label].file})"
        return lambda overrides: case_from_dict(data, source, overrides)
    return lambda overrides: load_case(label, overrides)


def uses_subdomains(case):
    """Whether the case's deflation is made of subdomains."""
    return case.solver.deflation.type in ("subdomains", "levelset_subdomains")


def subdomain_counts(case):
    """``(px, py[, pz])``: the deflation subdomains of ``case`` at its grid (as
    written, or from their width in cells where the case gives that instead)."""
    d, g = case.solver.deflation, case.grid
    counts = getattr(d, "subdomain_counts", None)
    return tuple(counts(*g.cells)) if counts is not None else tuple(d.subdomains)


def _by(values):
    return " x ".join(map(str, values))


def _note(case, overrides):
    """Which deflation subdomains a configuration uses, and where they come from."""
    d, g = case.solver.deflation, case.grid
    if not uses_subdomains(case):
        return f"deflation {d.type}"
    counts = subdomain_counts(case)
    if _keys(overrides) & set(SUBDOMAIN_KEYS):
        where = "--set"
    elif getattr(d, "subdomains", None) is None:
        width = getattr(d, "cells_per_subdomain", None)
        if width:
            where = f"blocks of about {width} cells, the case's"
        else:
            # The default width, or wider where the count would pass its maximum.
            actual = round((math.prod(g.cells) / math.prod(counts)) ** (1 / g.ndim))
            default = registry.DEFAULT_CELLS_BY_DIMENSION.get(
                g.ndim, registry.DEFAULT_CELLS_PER_SUBDOMAIN)
            where = (f"the default for the grid: blocks of about {actual} cells; "
                     f"{default} unless that makes more than "
                     f"{registry.DEFAULT_MAX_SUBDOMAINS} subdomains")
    else:
        where = "the case's"
    return f"deflation subdomains {_by(counts)} ({where})"


def case_at_cells(load, overrides, cells, origin, prog="bench"):
    """``(case, note)``: the case of ``load`` (:func:`case_loader`) with
    ``overrides`` on ``cells`` (``origin``: the option that set them, for
    messages); deflation subdomains that do not divide them replaced by the
    nearest ones (unless ``overrides`` set them), and ``note`` says which."""
    grid = [(key, n, origin) for key, n in zip(GRID_AXIS_KEYS, cells)]
    try:
        case = load(list(overrides) + grid)
        return case, _note(case, overrides)
    except CaseError as exc:
        if exc.key != "solver.deflation.subdomains" or _keys(overrides) & set(SUBDOMAIN_KEYS):
            raise
        counts = tuple(exc.value)
    fit = tuple(nearest_divisor(n, p) for n, p in zip(cells, counts))
    case = load(list(overrides) + grid
                + [("solver.deflation.subdomains", list(fit), f"{prog}: subdomains for the grid")])
    return case, (f"deflation subdomains {_by(fit)} (the case's {_by(counts)} do not divide "
                  f"{_by(cells)}: the nearest divisors)")


def _sizes_of(label, base, sizes, fixed, on_device):
    """``[(values, token), ...]``: ``--sizes``, else the named case's defaults
    for the device, else the case's own grid."""
    if sizes is not None:
        return sizes
    named = NAMED_CASES.get(label)
    if named is None or fixed:
        return [(base.grid.cells, "(the case's)")]
    return [((n,), str(n)) for n in (named.gpu_sizes if on_device else named.cpu_sizes)]


def build_configs(labels, sizes, overrides, on_device):
    """Every configuration, validated (CaseError on the first that cannot be run).

    ``sizes``: ``[(values, token), ...]`` (``values`` of :func:`parse_size`)
    or None for the defaults (the named case's sizes for the device, a case
    file's own grid).
    """
    configs = []
    fixed = _keys(overrides) & set(GRID_KEYS)
    if fixed and sizes:
        raise CaseError(PROG, "--set", f"got {sorted(fixed)[0]} together with --sizes",
                        "one of the two (--sizes sets the grid's cells: grid.nx, grid.ny and, "
                        "in 3-D, grid.nz)")
    for label in labels:
        load = case_loader(label)
        base = load(list(overrides))
        if base.mode != "flow":
            raise CaseError(PROG, "--cases", f"got {label!r}, a case of mode {base.mode!r}",
                            f"a mode: flow case (or {', '.join(NAMED_CASES)})")
        for values, token in _sizes_of(label, base, sizes, fixed, on_device):
            cells = size_cells(values, base.grid, label, token)
            if cells == tuple(base.grid.cells):
                configs.append(FlowConfig(label, base, _note(base, overrides)))
            else:
                configs.append(FlowConfig(label, *case_at_cells(load, overrides, cells,
                                                                f"--sizes {token}")))
    return configs
