"""The pressure solver's arguments, checked before any set-up: the names
(method, preconditioner, deflation, variant) and the method's rules by the
registry, the option values as the case file's ``solver`` section checks
them (:mod:`bubbleflow.case.schema`), so that an API call and a case file
accept the same values and refuse the others in the same words.
"""
from __future__ import annotations

from . import registry
from .krylov.system import check_variant

__all__ = ["OWNER", "METHODS", "check_names", "check_preconditioner_options", "schema_value",
           "deflation_options"]

#: The class the messages name.
OWNER = "PressureSolver"
METHODS = tuple(registry.METHODS)

# The solver's words for a method's broken rule (``pcg`` without a
# preconditioner is accepted here: it is plain CG).
_RULE_ERRORS = {
    ("preconditioner", "forbidden"): "method {m!r} takes no preconditioner; use 'pcg'",
    ("deflation", "forbidden"): "method {m!r} takes no deflation; use 'dpcg'",
    ("deflation", "required"): "method {m!r} needs a deflation space",
}


def check_names(method, preconditioner, deflation, variant):
    """The method, preconditioner, deflation and variant names, and the
    method's rules, checked (ValueError naming the name and the accepted ones)."""
    if method not in METHODS:
        raise ValueError(f"method {method!r}; expected one of {METHODS}")
    registry.preconditioner(preconditioner)          # an unknown name: the registry's error
    registry.deflation(deflation)
    check_variant(variant)
    for rule in registry.method_violations(method, preconditioner, deflation):
        if rule in _RULE_ERRORS:
            raise ValueError(_RULE_ERRORS[rule].format(m=method))


class _SchemaRefusal:
    """The context the case schema's field checkers report to
    (:mod:`bubbleflow.case.config`: ``fail`` and ``bad``): each refusal is
    raised as the schema's error, which :func:`schema_value` turns into
    the API's ValueError."""

    def fail(self, path, problem, expected=None, value=None, text=None, missing=False):
        from ..case.config import CaseError

        raise CaseError(OWNER, None, problem, expected, value=value)

    def bad(self, path, value, expected):
        self.fail(path, "", expected, value)


def _schema_specs(section):
    """``{key: checker}`` of a section of the case schema (by class name)."""
    import dataclasses

    from ..case import config

    cls = getattr(config, section)
    return {f.name: f.metadata["spec"] for f in dataclasses.fields(cls) if "spec" in f.metadata}


def schema_value(section, key, value, owner=OWNER):
    """``value`` of ``key`` as the case schema's ``section`` checks and
    converts it; ValueError naming ``owner``, the key, the value and what
    the case file accepts."""
    from ..case.config import CaseError

    try:
        return _schema_specs(section)[key].convert(_SchemaRefusal(), (key,), value)
    except CaseError as exc:
        raise ValueError(f"{owner}: {key}={value!r}: expected {exc.expected}") from None


def check_preconditioner_options(preconditioner, options):
    """The options of preconditioner ``preconditioner``, checked before any set-up.

    Names must be among those its registry entry lists
    (:data:`bubbleflow.linalg.registry.PRECONDITIONERS`); values are checked
    as the case file's ``solver.preconditioner`` section checks them
    (:class:`bubbleflow.case.config.PreconditionerConfig`) where it has the
    key, and passed on unchecked where it has not (an option of a
    preconditioner that case files do not configure).

    Parameters
    ----------
    preconditioner : str
        A name of :data:`bubbleflow.linalg.registry.PRECONDITIONERS`.
    options : mapping
        Option name -> value.

    Returns
    -------
    dict
        The options, values converted as the case file converts them.

    Raises
    ------
    ValueError
        An unknown preconditioner; a name it does not take (the error names
        it, the preconditioner and the names it takes); a value out of range.

    Examples
    --------
    >>> check_preconditioner_options("multigrid", {"degree": 3})
    {'degree': 3}
    >>> check_preconditioner_options("multigrid", {"degre": 3})
    Traceback (most recent call last):
    ...
    ValueError: preconditioner 'multigrid' takes no option 'degre' (did you mean 'degree'?); \
its options: degree, ratio, scale, coarsest, min_side, cycle_precision, w_levels, \
coarse_refresh
    """
    import difflib
    from collections.abc import Mapping

    entry = registry.preconditioner(preconditioner)
    if not isinstance(options, Mapping):
        raise ValueError(f"{OWNER}: preconditioner_options={options!r}: expected a mapping "
                         f"of option names to values (dict)")
    accepted = ", ".join(entry.options) or "none"
    for name in options:
        if name not in entry.options:
            near = difflib.get_close_matches(str(name), entry.options, n=1, cutoff=0.6)
            hint = f" (did you mean {near[0]!r}?)" if near else ""
            raise ValueError(f"preconditioner {preconditioner!r} takes no option {name!r}"
                             f"{hint}; its options: {accepted}")
    specs = _schema_specs("PreconditionerConfig")
    owner = f"preconditioner {preconditioner!r}"
    return {name: schema_value("PreconditionerConfig", name, value, owner) if name in specs
            else value for name, value in options.items()}


def deflation_options(subdomains, stripes, cells_per_subdomain):
    """The deflation keywords, checked as the case file's ``solver.deflation``
    section checks them (:class:`bubbleflow.case.config.DeflationConfig`).
    A list of block counts of another length than 2 or 3 is left to the
    deflation space, whose error names the grid's dimension."""
    if not (isinstance(subdomains, (list, tuple)) and len(subdomains) not in (2, 3)):
        subdomains = schema_value("DeflationConfig", "subdomains", subdomains)
    return dict(subdomains=subdomains,
                stripes=schema_value("DeflationConfig", "stripes", stripes),
                cells_per_subdomain=schema_value("DeflationConfig", "cells_per_subdomain",
                                                  cells_per_subdomain))
