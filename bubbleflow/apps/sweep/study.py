"""A study read and validated: the ``sweep:`` block, ``--param`` options, every point's case."""
from __future__ import annotations

import contextlib
import datetime as _dt
import math
import numbers
import os
import re
from collections.abc import Mapping

import yaml

from ...case.config import CaseError, case_from_dict, load_case, read_yaml_file
from ...case.relevance import warn_ineffective
from ...case.yaml_reader import shorten
from ..tables import plain
from .summary import summary_columns
from .values import (MAX_RUNS, RANGE_HINT, Parameter, expand, intify, parse_range, parse_values,
                     show)

__all__ = ["Study", "prepare_study", "dump_record", "CONTRAST", "STUDY_FILE"]

#: The virtual parameter: liquid density / gas density.
CONTRAST = "contrast"

#: The study's record in its folder.
STUDY_FILE = "study.yaml"

# Keys the study sets itself for every run.
_RESERVED = ("name", "output", "output.directory")


class Study:
    """A validated study: every point's case built, nothing run yet.

    Attributes
    ----------
    name, source, directory : str
    base : Case
        The base case (file, ``--set``, ``-o``, ``--backend`` applied).
    parameters : list of Parameter
    overrides : list of str
        The ``--set`` items.
    points : list of dict
        What :func:`run_point` takes, one per run.
    columns : list of str
        The summary's columns.
    """

    def __init__(self, **kw):
        self.__dict__.update(kw)

    def record(self):
        """The content of ``study.yaml`` (a dict)."""
        return {
            "study": self.name,
            "case_file": self.source,
            "created": _dt.datetime.now(_dt.timezone.utc).isoformat(timespec="seconds"),
            "runs": len(self.points),
            "set": list(self.overrides),
            "parameters": {p.key: plain(p.values) for p in self.parameters},
            "columns": list(self.columns),
            "case": _Literal(self.base.to_yaml()),
        }


class _Literal(str):
    """A string dumped as a YAML literal block."""


class _Dumper(yaml.SafeDumper):
    """SafeDumper that writes :class:`_Literal` strings as ``|`` blocks."""


_Dumper.add_representer(
    _Literal, lambda dumper, data: dumper.represent_scalar("tag:yaml.org,2002:str", str(data),
                                                           style="|"))


def dump_record(data):
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=100)


def _get(tree, key):
    """The value at dotted ``key`` in a nested dict (``a.b[2].c``); None if absent."""
    node = tree
    for part in key.split("."):
        # (No index of thousands of digits: int() refuses them, and no list is that long.)
        m = re.fullmatch(r"([^\[\]]+)((?:\[\d{1,18}\])*)", part)
        if not m or not isinstance(node, Mapping):
            return None
        node = node.get(m.group(1))
        for idx in re.findall(r"\[(\d+)\]", m.group(2)):
            if not isinstance(node, list) or int(idx) >= len(node):
                return None
            node = node[int(idx)]
    return node


def _current(base, key):
    if key == CONTRAST:
        return base.fluids.liquid.density / base.fluids.gas.density
    return _get(base.to_dict(), key)


def _check_name(name, file, key, origin=None, line=None):
    if (not isinstance(name, str) or not name.strip() or name in (".", "..")
            or any(c in name for c in "/\\\0")):
        raise CaseError(file, key, f"got {shorten(repr(name))}",
                        "a non-empty name without '/' or '\\' (it names the study folder)",
                        value=name, origin=origin, line=line)
    return name


def _block_parameters(block, file, lines):
    """``(name, [Parameter])`` of a ``sweep:`` block."""
    def where(*path):
        return lines.get(("sweep",) + path) or lines.get(("sweep",))

    if block is None:
        return None, []
    if not isinstance(block, Mapping):
        raise CaseError(file, "sweep", f"got {show(block)}",
                        "a mapping {name: ..., parameters: {KEY: [values] or 'START:STOP:COUNT'}}",
                        line=where())
    for k in block:
        if k not in ("name", "parameters"):
            raise CaseError(file, f"sweep.{k}", "unknown key", "one of: name, parameters",
                            line=where(k))
    name = block.get("name")
    if name is not None:
        _check_name(name, file, "sweep.name", line=where("name"))
    params = block.get("parameters") or {}
    if not isinstance(params, Mapping):
        raise CaseError(file, "sweep.parameters", f"got {show(params)}",
                        "a mapping KEY: [values] or KEY: 'START:STOP:COUNT[:log]'",
                        line=where("parameters"))
    out = []
    for key, raw in params.items():
        k = f"sweep.parameters.{key}"
        line = where("parameters", str(key))
        if isinstance(raw, str) and ":" in raw:
            try:
                values = parse_range(raw)
            except ValueError as exc:
                raise CaseError(file, k, str(exc), RANGE_HINT, value=raw, line=line) from None
            if values is None:
                raise CaseError(file, k, f"got {shorten(repr(raw))}",
                                RANGE_HINT + ", or a list of values",
                                value=raw, line=line)
            raw = values
        elif not isinstance(raw, list):
            raw = [raw]
        if not raw:
            raise CaseError(file, k, "got an empty list", "at least one value", line=line)
        out.append(Parameter(str(key), raw, k))
    return name, out


def prepare_study(case_path, params=(), values=(), overrides=(), output=None, name=None,
                  backend=None):
    """Read and validate a study; build every point's case.

    Parameters
    ----------
    case_path : str
        A case file, or a study file (a case file with a top-level ``sweep:``).
    params, values : sequence of str
        The ``--param`` keys and their ``--values`` strings, paired in order.
    overrides : sequence of str
        ``--set key.path=value`` items, applied to every run.
    output : str, optional
        ``-o``: the folder that receives the study folder.
    name : str, optional
        ``--name``: the study's name (default: the block's, else ``<case>_study``).
    backend : str, optional
        ``--backend``.

    Returns
    -------
    Study

    Raises
    ------
    CaseError
        Anything wrong with the file, a key, a value or a point's case.
    """
    file = os.fspath(case_path)
    # Read as the case files are (size, aliases, depth, duplicate keys), with its lines.
    data, lines = read_yaml_file(file)
    block = None
    has_block = isinstance(data, Mapping) and "sweep" in data
    if has_block:
        data = dict(data)
        block = data.pop("sweep")
    fixed = list(overrides or [])
    base_overrides = list(fixed)
    if output is not None:
        base_overrides.append(("output.directory", output, f"-o {output}"))
    if backend is not None:
        base_overrides.append(("backend", backend, f"--backend {backend}"))
    if not has_block:
        base = load_case(file, base_overrides, warn=False)    # with line numbers in its errors
    else:
        base = case_from_dict(data, source=file, overrides=base_overrides, warn=False)

    block_name, parameters = _block_parameters(block, file, lines)
    _add_command_line_parameters(parameters, params, values, base, file)
    _check_parameters(parameters, file)
    _check_runs(parameters, file)

    if name is not None:
        study_name = _check_name(name, file, None, origin=f"--name {name}")
    else:
        study_name = block_name or f"{base.name}_study"
    directory = os.path.join(base.output.directory, study_name)
    points = _points(file, data, base_overrides, parameters, study_name, directory)
    return Study(name=study_name, source=file, base=base, parameters=parameters,
                 overrides=[o if isinstance(o, str) else f"{o[0]}={o[1]}" for o in fixed],
                 directory=directory, points=points,
                 columns=summary_columns(parameters, {p["mode"] for p in points}))


def _add_command_line_parameters(parameters, params, values, base, file):
    """``--param`` / ``--values``, paired in order, added to (or replacing) the block's."""
    params, values = list(params or []), list(values or [])
    if len(params) != len(values):
        raise CaseError(file, None, f"got {len(params)} --param and {len(values)} --values",
                        "one --values V1,V2,... after each --param KEY")
    for key, text_values in zip(params, values):
        origin = f"--param {key}"
        if not isinstance(key, str) or not key.strip():
            raise CaseError(file, None, "got an empty key", "--param KEY, e.g. grid.nx",
                            origin=origin)
        key = key.strip()
        try:
            vals = parse_values(text_values, _current(base, key))
        except ValueError as exc:
            raise CaseError(file, key, str(exc),
                            "comma-separated values (1,1e3,1e6) or " + RANGE_HINT,
                            origin=f"{origin} --values {text_values}") from None
        for i, p in enumerate(parameters):
            if p.key == key and not p.origin.startswith("--param"):
                parameters[i] = Parameter(key, vals, origin)     # replaces the block's values
                break
        else:
            parameters.append(Parameter(key, vals, origin))
    # Block values: ints stay ints for int keys (a range gives floats).
    for p in parameters:
        p.values = intify(p.values, _current(base, p.key))


def _check_parameters(parameters, file):
    """At least one parameter, each key once, none the study sets, not contrast and gas density."""
    if not parameters:
        raise CaseError(file, None, "no parameters to sweep",
                        "--param KEY --values V1,V2,... or a sweep: block with parameters")
    seen = {}
    for p in parameters:
        if p.key in seen:
            raise CaseError(file, p.key, f"swept twice ({shorten(seen[p.key])} and "
                            f"{shorten(p.origin)})",
                            "each key once", origin=p.origin)
        seen[p.key] = p.origin
        if p.key in _RESERVED or p.key.startswith("output.directory"):
            raise CaseError(file, p.key, "is set by the study for each run",
                            "another key (runs are named run_0000, ... in OUTDIR/<study>/)",
                            origin=p.origin)
    if CONTRAST in seen and "fluids.gas.density" in seen:
        raise CaseError(file, "fluids.gas.density", "swept together with contrast",
                        "either contrast or fluids.gas.density", origin=seen["fluids.gas.density"])


def _check_runs(parameters, file):
    """At most :data:`~.values.MAX_RUNS` points, counted before any is made."""
    runs = math.prod(len(p.values) for p in parameters)
    if runs > MAX_RUNS:
        sizes = " x ".join(str(len(p.values)) for p in parameters[:8])
        sizes += " x ..." if len(parameters) > 8 else ""
        raise CaseError(file, None, f"{runs} runs ({sizes} values)",
                        f"at most {MAX_RUNS} runs in one study (fewer values, or several "
                        "studies)")


def _points(file, data, base_overrides, parameters, study_name, directory):
    """One validated point (what :func:`run_point` takes) per combination of values."""
    points, cases = [], []
    assignments = expand(parameters)
    width = max(4, len(str(len(assignments) - 1)))
    for i, assignment in enumerate(assignments):
        run = f"run_{i:0{width}d}"
        case = _point_case(file, data, base_overrides, assignment, run, directory)
        cases.append(case)
        points.append({
            "index": i,
            "run": run,
            "study": study_name,
            "params": {p.key: v for p, v in assignment},
            "case": case.to_dict(),
            "path": os.path.join(directory, f"{run}.h5"),
            "mode": case.mode,
        })
    warn_ineffective(cases)      # a --set that changes nothing in any point
    return points


def _point_case(file, data, base_overrides, assignment, run, directory):
    """The validated case of one point (its errors name the --param or block key)."""
    overrides = list(base_overrides)
    contrast = None
    for p, v in assignment:
        if p.key == CONTRAST:
            contrast = (p, v)
        else:
            overrides.append((p.key, v, p.origin))
    overrides += [("name", run, "--name"), ("output.directory", directory, "-o")]
    case = case_from_dict(data, source=file, overrides=overrides, warn=False)
    if contrast is not None:
        p, v = contrast
        x = None
        if isinstance(v, numbers.Real) and not isinstance(v, bool):
            x = float(v)
        elif isinstance(v, str):
            with contextlib.suppress(ValueError):
                x = float(v)
        if x is None or not math.isfinite(x) or x <= 0:
            raise CaseError(file, CONTRAST, f"got {show(v)}",
                            "a number > 0 (liquid density / gas density)", value=v,
                            origin=p.origin)
        overrides.append(("fluids.gas.density", case.fluids.liquid.density / x, p.origin))
        case = case_from_dict(data, source=file, overrides=overrides, warn=False)
    return case
