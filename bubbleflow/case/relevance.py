"""Which case keys change the run given the rest of the case, and the
one-line warnings for ``--set`` overrides that change nothing.

Every key of a case is legal whatever the others say: a study sweeps
``solver.preconditioner.type`` over a fixed set of options, a case file
keeps its ``block_lines`` while its preconditioner is tried as multigrid.
But a ``--set`` of a key the run will not read (a subdomain count without
deflation, ``time.dt_max`` beside a fixed ``time.dt``) is almost always a
typing mistake or a misunderstanding, and the run it starts costs as much as
one that would have answered the question.  So such an override is said in
one line before any work (``warning: FILE: --set KEY=VALUE changes nothing:
WHY``) and the run goes on.

:data:`APPLIES_ONLY_WHEN` is the one table of these rules.  Which
preconditioner and deflation options belong to which choice is read from
the solver's registry (:mod:`bubbleflow.linalg.registry`, each entry's
``options``), so a new preconditioner's options join the rules with it.
"""
from __future__ import annotations

import dataclasses
import sys
from dataclasses import dataclass
from typing import Callable, Tuple

from ..linalg import registry as _registry
from .errors import show_value
from .geometry_checks import has_gas
from .key_paths import dotted, split_dotted
from .schema import DeflationConfig, PreconditionerConfig
from .time_step import viscosity_scheme

__all__ = ["AppliesWhen", "APPLIES_ONLY_WHEN", "Ineffective", "ineffective_settings",
           "ineffective_in_all", "warn_ineffective"]

#: Labels of the overrides the warnings are about (the CLI's ``--set``;
#: ``-o``, ``--backend`` and a study's swept values are not).
SET_LABEL = "--set "


@dataclass(frozen=True)
class AppliesWhen:
    """Keys that change the run only when ``holds(case)`` is true.

    Attributes
    ----------
    keys : tuple of tuple of str
        Key paths (``("time", "dt_max")``); a section's path covers every
        key in it.
    holds : callable
        ``holds(case) -> bool`` on the validated case.
    unless : callable
        ``unless(case) -> str``: why the keys change nothing when ``holds``
        is false, as a phrase (``"solver.deflation.type is 'none'"``).
    """

    keys: Tuple[Tuple[str, ...], ...]
    holds: Callable
    unless: Callable

    def covers(self, path):
        """Whether the key path ``path`` (a tuple) is one of :attr:`keys` or inside one."""
        return any(tuple(path[:len(k)]) == k for k in self.keys)


def _readers(table, option):
    """The names of the registry ``table``'s entries that take ``option``."""
    return tuple(name for name, entry in table.items() if option in entry.options)


def _only(names):
    """``"only block_ic reads it"``, ``"only subdomains and stripes read it"``."""
    if not names:
        return "no choice reads it"
    if len(names) == 1:
        return f"only {names[0]} reads it"
    return f"only {', '.join(names[:-1])} and {names[-1]} read it"


def _option_rules(section, config, table):
    """One rule per option of ``solver.<section>``: it applies when the
    section's ``type`` is one of the registry entries listing it."""
    rules = []
    for f in dataclasses.fields(config):
        if f.name == "type" or "spec" not in f.metadata:
            continue
        readers = _readers(table, f.name)
        rules.append(AppliesWhen(
            (("solver", section, f.name),),
            holds=lambda case, r=readers: getattr(case.solver, section).type in r,
            unless=lambda case, r=readers: (f"solver.{section}.type is "
                                            f"{getattr(case.solver, section).type!r}; "
                                            f"{_only(r)}")))
    return rules


def _viscosity_unless(case):
    given = case.momentum.viscosity
    how = ("momentum.viscosity is 'explicit'" if given == "explicit" else
           f"momentum.viscosity {given!r} makes the viscous stress explicit for this case")
    return f"{how}; only the implicit viscous solves read it"


#: The "applies only when" rules, checked in order: the first that does not
#: hold for a key says why it changes nothing.
APPLIES_ONLY_WHEN = (
    AppliesWhen((("time",), ("boundaries",), ("levelset",), ("momentum", "viscosity"),
                 ("momentum", "viscosity_mean"), ("momentum", "viscous_rtol"),
                 ("output", "interval"), ("physics", "surface_tension"),
                 ("solver", "preconditioner", "coarse_refresh")),
                holds=lambda case: case.mode == "flow",
                unless=lambda case: f"mode is {case.mode!r}; only mode 'flow' reads it"),
    AppliesWhen((("fluids", "gas"), ("physics", "surface_tension")),
                holds=lambda case: has_gas(case.geometry),
                unless=lambda case: "the geometry puts no gas in the domain (no bubbles, "
                                    "droplets, lattice, random bubbles or free surface)"),
    *_option_rules("preconditioner", PreconditionerConfig, _registry.PRECONDITIONERS),
    *_option_rules("deflation", DeflationConfig, _registry.DEFLATIONS),
    AppliesWhen((("solver", "variant"),),
                holds=lambda case: case.solver.deflation.type != "none",
                unless=lambda case: f"solver.method is {case.solver.method!r} without "
                                    "deflation; only deflated CG (dpcg) reads it"),
    # A fixed step skips the limits (FlowSolver.stable_dt); where dt_max would
    # still turn momentum.viscosity auto explicit, the fixed step is refused.
    AppliesWhen((("time", "dt_max"), ("time", "cfl")),
                holds=lambda case: case.time.dt is None,
                unless=lambda case: f"time.dt = {case.time.dt:g} fixes the step"),
    # CLSVOF redistances from the volume fraction instead (FlowSolver.move_interface).
    AppliesWhen((("levelset", "reinit_every"), ("levelset", "reinit_iterations")),
                holds=lambda case: case.levelset.method == "levelset",
                unless=lambda case: "levelset.method is 'clsvof', which rebuilds the level set "
                                    "from the volume fraction every step"),
    AppliesWhen((("levelset", "reinit_iterations"),),
                holds=lambda case: case.levelset.reinit_every > 0,
                unless=lambda case: "levelset.reinit_every is 0 (never reinitialised)"),
    AppliesWhen((("output", "compression_level"),),
                holds=lambda case: case.output.compression != "none",
                unless=lambda case: "output.compression 'none' stores the fields "
                                    "uncompressed; only gzip (set, or chosen by 'auto') reads it"),
    AppliesWhen((("momentum", "viscous_rtol"),),
                holds=lambda case: viscosity_scheme(case) == "implicit",
                unless=_viscosity_unless),
    AppliesWhen((("boundaries", "front"), ("boundaries", "back")),
                holds=lambda case: case.grid.nz is not None,
                unless=lambda case: "the grid is 2-D (no grid.nz): it has no front or back wall"),
)


@dataclass(frozen=True)
class Ineffective:
    """A key an override set that changes nothing in the case.

    Attributes
    ----------
    key : str
        Dotted key path.
    value : object
        Its value in the case.
    label : str
        The override that set it (``"--set time.dt_max=0.01"``).
    reason : str
        Why it changes nothing.
    """

    key: str
    value: object
    label: str
    reason: str

    def line(self, source):
        """The one-line warning, naming the case file ``source``."""
        what = self.label
        if self.label.partition("=")[0].strip() != f"{SET_LABEL}{self.key}":   # inside a section
            what += f": {self.key} = {show_value(self.value, 40)}"
        return f"warning: {source}: {what} changes nothing: {self.reason}"


def _value(case, path):
    node = case
    for seg in path:
        node = node[seg] if isinstance(seg, int) else getattr(node, seg, None)
        if node is None:
            return None
    return node


def ineffective_settings(case):
    """The keys ``--set`` overrides gave ``case`` that change nothing in it.

    A key counts when an :data:`APPLIES_ONLY_WHEN` rule covering it does
    not hold; keys inside a section already reported are not repeated, and
    a key set to null (a default restored) is not reported.

    Parameters
    ----------
    case : Case
        As :func:`~.loading.load_case` or :func:`~.loading.case_from_dict`
        return it (a case built otherwise has no overrides: ``[]``).

    Returns
    -------
    list of Ineffective
        In the order of the overrides.
    """
    where = getattr(case, "_where", None)
    if where is None:
        return []
    found, reported = [], []
    order = {label: n for n, label in enumerate(dict.fromkeys(where.origins.values()))}
    located = [(path, where.locate(path)[1]) for path in where.explicit]
    located = sorted(((p, label) for p, label in located if label in order),
                     key=lambda pl: (order[pl[1]], len(pl[0]), dotted(pl[0])))
    for path, label in located:
        if not label.startswith(SET_LABEL):
            continue
        # The override's own key and what is inside it, not the sections it created.
        own = split_dotted(label[len(SET_LABEL):].partition("=")[0].strip())
        if own is None or path[:len(own)] != own:
            continue
        if any(path[:len(r)] == r for r in reported):
            continue
        value = _value(case, path)
        if value is None:
            continue
        for rule in APPLIES_ONLY_WHEN:
            if rule.covers(path) and not rule.holds(case):
                found.append(Ineffective(dotted(path), value, label, rule.unless(case)))
                reported.append(path)
                break
    return found


def ineffective_in_all(cases):
    """The settings of ``cases[0]`` that change nothing in every one of
    ``cases`` (a study's points: an override that matters in one point
    matters), by key and label."""
    cases = list(cases)
    if not cases:
        return []
    first = ineffective_settings(cases[0])
    keep = {(s.key, s.label) for s in first}
    for case in cases[1:]:
        keep &= {(s.key, s.label) for s in ineffective_settings(case)}
        if not keep:
            return []
    return [s for s in first if (s.key, s.label) in keep]


# Lines already said in this process: a benchmark or a study loads one case
# with the same overrides many times.
_said = set()


def warn_ineffective(cases, file=None):
    """Say, on stderr, each ``--set`` override that changes nothing in every
    one of ``cases``; once per process and line, and only on the launcher's
    rank 0 (under ``mpiexec`` every rank loads the case).

    Parameters
    ----------
    cases : Case or sequence of Case
    file : file-like, optional
        Where to write (default ``sys.stderr``).

    Returns
    -------
    list of str
        The warning lines (also those said before, which are not repeated).
    """
    if not isinstance(cases, (list, tuple)):
        cases = [cases]
    if not cases:
        return []
    lines = [s.line(cases[0].source) for s in ineffective_in_all(cases)]
    new = [ln for ln in lines if ln not in _said]
    if new:
        from ..compute.comm import launcher_rank

        if launcher_rank() == 0:
            for ln in new:
                print(ln, file=file or sys.stderr, flush=True)
        _said.update(new)
    return lines
