"""The cases of ``bubbleflow bench --flow``: the two shipped flow cases, by name, at each size.

The case files live in the source tree's ``cases/`` folder, which an
installed package does not carry, so the two benchmark cases are written
here as the text of those files (``tests/apps/test_bench_flow.py`` checks
that they still resolve to the same cases as ``cases/two_phase.yaml`` and
``cases/bubbly_column_flow.yaml``).  Any other ``mode: flow`` case file can
be named by its path instead.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

from ...case.config import CaseError, case_from_dict, load_case
from ...linalg import registry

__all__ = ["NAMED_CASES", "FlowConfig", "named_case_data", "parse_size", "build_configs",
           "nearest_divisor", "subdomain_counts", "uses_subdomains"]

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
  method: dpcg
  variant: adef2
  preconditioner: {type: incomplete_poisson_scaled}
  deflation: {type: levelset_subdomains, cells_per_subdomain: 8}   # refines with the grid
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


@dataclass(frozen=True)
class NamedCase:
    """A benchmark case by name: its case text, the case file it copies, default nx."""

    name: str
    text: str
    file: str
    gpu_sizes: tuple
    cpu_sizes: tuple
    what: str


#: The named cases of ``--cases``; default sizes are nx (ny = 2 nx).
NAMED_CASES = {
    "hysing": NamedCase("hysing", HYSING_TEXT, "cases/two_phase.yaml", (80, 160, 320),
                        (40, 80), "Hysing case 1"),
    "column": NamedCase("column", COLUMN_TEXT, "cases/bubbly_column_flow.yaml",
                        (512, 1024, 2048), (64, 128), "bubbly column flow"),
}

#: Override keys that fix the grid: they exclude ``--sizes``.
GRID_KEYS = ("grid", "grid.nx", "grid.ny")
SUBDOMAIN_KEYS = ("solver", "solver.deflation", "solver.deflation.subdomains",
                  "solver.deflation.cells_per_subdomain")


@dataclass
class FlowConfig:
    """One configuration of the flow benchmark: a validated case and how it was made."""

    label: str             # "hysing", "column", or the case file's path
    case: object           # the validated Case, at its size
    subdomains_note: str   # which deflation subdomains, and why

    @property
    def title(self):
        g = self.case.grid
        return f"{self.label} {g.nx} x {g.ny}"


def named_case_data(name):
    """The case of ``NAMED_CASES[name]`` as a dict (parsed from its text)."""
    import yaml

    return yaml.safe_load(NAMED_CASES[name].text)


def parse_size(token, option="--sizes"):
    """``"80"`` -> ``(80, None)`` (ny from the case's aspect), ``"512x1024"`` -> ``(512, 1024)``."""
    text = str(token).strip().lower()
    parts = text.split("x")
    try:
        values = [int(p) for p in parts]
    except ValueError:
        values = []
    if len(values) not in (1, 2) or min(values) < 4:
        raise CaseError("bubbleflow bench", option, f"got {token!r}",
                        "NX (cells in x, >= 4; ny from the case's aspect) or NXxNY")
    return values[0], (values[1] if len(values) == 2 else None)


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


def _loader(label):
    """``(load(overrides) -> Case, default sizes or None)`` for a ``--cases`` token."""
    if label in NAMED_CASES:
        data = named_case_data(label)
        source = f"bubbleflow bench --flow ({label}: {NAMED_CASES[label].file})"
        return lambda overrides: case_from_dict(data, source, overrides)
    return lambda overrides: load_case(label, overrides)


def uses_subdomains(case):
    """Whether the case's deflation is made of subdomains."""
    return case.solver.deflation.type in ("subdomains", "levelset_subdomains")


def subdomain_counts(case):
    """``(px, py)``: the deflation subdomains of ``case`` at its grid (as written, or
    from their width in cells where the case gives that instead)."""
    d, g = case.solver.deflation, case.grid
    counts = getattr(d, "subdomain_counts", None)
    return tuple(counts(g.nx, g.ny)) if counts is not None else tuple(d.subdomains)


def _note(case, overrides):
    """Which deflation subdomains a configuration uses, and where they come from."""
    d = case.solver.deflation
    if not uses_subdomains(case):
        return f"deflation {d.type}"
    px, py = subdomain_counts(case)
    if _keys(overrides) & set(SUBDOMAIN_KEYS):
        where = "--set"
    elif getattr(d, "subdomains", None) is None:
        width = getattr(d, "cells_per_subdomain", None)
        if width:
            where = f"blocks of about {width} cells, the case's"
        else:
            # The default width, or wider where the count would pass its maximum.
            actual = round(math.sqrt(case.grid.nx * case.grid.ny / (px * py)))
            where = (f"the default for the grid: blocks of about {actual} cells; "
                     f"{registry.DEFAULT_CELLS_PER_SUBDOMAIN} unless that makes more than "
                     f"{registry.DEFAULT_MAX_SUBDOMAINS} subdomains")
    else:
        where = "the case's"
    return f"deflation subdomains {px} x {py} ({where})"


def _at_size(load, label, overrides, nx, ny, size_token):
    """The case at ``nx x ny``; subdomains that do not divide it replaced by the nearest ones."""
    grid = [("grid.nx", nx, f"--sizes {size_token}"), ("grid.ny", ny, f"--sizes {size_token}")]
    try:
        case = load(list(overrides) + grid)
        return case, _note(case, overrides)
    except CaseError as exc:
        if exc.key != "solver.deflation.subdomains" or _keys(overrides) & set(SUBDOMAIN_KEYS):
            raise
        px, py = exc.value
    fit = (nearest_divisor(nx, px), nearest_divisor(ny, py))
    case = load(list(overrides) + grid
                + [("solver.deflation.subdomains", list(fit), "bench: subdomains for the grid")])
    return case, (f"deflation subdomains {fit[0]} x {fit[1]} (the case's {px} x {py} do not "
                  f"divide {nx} x {ny}: the nearest divisors)")


def build_configs(labels, sizes, overrides, on_device):
    """Every configuration, validated (CaseError on the first that cannot be run).

    ``sizes``: ``[(nx, ny or None, token), ...]`` or None for the defaults
    (the named case's sizes for the device, a case file's own grid).
    """
    configs = []
    fixed = _keys(overrides) & set(GRID_KEYS)
    if fixed and sizes:
        raise CaseError("bubbleflow bench", "--set",
                        f"got {sorted(fixed)[0]} together with --sizes",
                        "one of the two (--sizes sets grid.nx and grid.ny)")
    for label in labels:
        load = _loader(label)
        base = load(list(overrides))
        if base.mode != "flow":
            raise CaseError("bubbleflow bench", "--cases", f"got {label!r}, a case of mode "
                            f"{base.mode!r}", "a mode: flow case (or hysing, column)")
        these = sizes
        if these is None:
            named = NAMED_CASES.get(label)
            if named is None or fixed:
                these = [(base.grid.nx, base.grid.ny, "(the case's)")]
            else:
                these = [(n, None, str(n)) for n in (named.gpu_sizes if on_device
                                                    else named.cpu_sizes)]
        for nx, ny, token in these:
            if ny is None:
                ny = max(4, round(nx * base.grid.ny / base.grid.nx))
            if (nx, ny) == (base.grid.nx, base.grid.ny):
                configs.append(FlowConfig(label, base, _note(base, overrides)))
            else:
                configs.append(FlowConfig(label, *_at_size(load, label, overrides, nx, ny,
                                                           token)))
    return configs
