"""Parameter studies: ``bubbleflow sweep``.

::

    bubbleflow sweep CASE.yaml --param KEY --values V1,V2,... [--param KEY2 --values ...]
                     [--set key.path=value ...] [-o OUTDIR] [--name STUDY] [--resume]
                     [--executor local|dask] [--scheduler ADDRESS] [--workers N]
                     [--backend auto|numpy|cupy] [--no-progress] [-q]

A study runs one case per point of the cartesian product of the parameter
values (the first parameter varies slowest).  ``--values`` takes a comma
separated list (each item read as YAML: ``1,1e3,1e6``, ``jacobi,block_ic``,
``[8,8],[16,16]``) or a range: ``START:STOP:COUNT`` (COUNT linear values,
ends included) or ``START:STOP:COUNT:log`` (log-spaced).  The same study can
be written into the case file as a top-level ``sweep:`` block::

    sweep:
      name: contrast_study
      parameters:
        contrast: [1, 1000, 1000000]          # or "1:1e6:7:log"
        solver.preconditioner.type: [jacobi, incomplete_poisson_scaled]

``--param`` options add to (or, for the same key, replace) the block's
parameters.  Keys are case key paths (``grid.nx``, ``solver.rtol``, ...),
plus the virtual key ``contrast``, which sets ``fluids.gas.density =
fluids.liquid.density / contrast``.

Every point is validated before anything runs.  Output, in
``OUTDIR/<study name>/`` (OUTDIR: ``-o``, else the case's
``output.directory``)::

    study.yaml     the study: base case (resolved YAML), parameters, --set items
    run_0000.h5    one HDF5 file per run (the layout of ``bubbleflow run``)
    summary.csv    one row per finished run, in run order (rewritten atomically
    summary.h5     after every run); summary.h5: /summary/<column> datasets

The summary columns are ``run``, one column per parameter, then
``status`` (``ok``, ``not_converged``: the run wrote its file but a solve
failed, ``failed``: an exception, no file), and for ``mode: pressure``
``iterations``, ``residual`` (final true relative residual), ``converged``,
``reason``, ``setup_seconds``, ``solve_seconds``; for ``mode: flow``
``iterations_mean``, ``iterations_max``, ``pressure_solves``, ``steps``,
``residual`` (the worst), ``converged`` (all), ``reason``, setup and solve
totals and the Hysing benchmark quantities of
:func:`bubbleflow.apps.validation.benchmark_quantities`; then ``wall_seconds``,
``backend``, ``device``, ``gpu`` (PCI bus id of a CuPy run's GPU), ``host``,
``file`` and ``error``.

``--resume`` continues an interrupted study: runs with a row in
``summary.csv`` are skipped, the others run.  A folder that holds another
study (a different ``study.yaml``) is refused.

Execution (:func:`run_point` is the unit of work):

* ``--executor local`` (default): one worker per visible GPU when the backend
  resolves to CuPy (each pinned to its GPU through ``CUDA_VISIBLE_DEVICES``),
  else one; ``--workers N`` sets the number (CPU runs in N processes).  One
  worker runs in this process; more run in a ``ProcessPoolExecutor``.
* ``--executor dask``: the runs are mapped over a Dask distributed cluster,
  ``--scheduler ADDRESS`` (workers must be able to import bubbleflow and
  should run one thread each; pin GPUs on the cluster side, e.g. with
  dask-cuda), or, without it, a ``LocalCluster`` of ``--workers`` processes
  of one thread.  Needs ``pip install bubbleflow[dask]``.

Exit codes: 0 when every run is ``ok``, 1 when a run failed or did not
converge (the others still run), 2 for bad input (one ``error:`` line,
nothing run).
"""
from __future__ import annotations

import contextlib
import csv
import datetime as _dt
import io
import itertools
import json
import math
import numbers
import os
import re
import socket
import sys
import tempfile
import time
from collections.abc import Mapping

import yaml

from ..case.config import BACKENDS, CaseError, case_from_dict, first_difference, load_case

__all__ = [
    "add_subparser", "cmd_sweep", "run_point", "parse_values", "parse_range", "expand",
    "prepare_study", "run_study", "read_summary", "Study", "Parameter", "STATUSES",
]

#: Values of the ``status`` column.
STATUSES = ("ok", "not_converged", "failed")

#: The virtual parameter: liquid density / gas density.
CONTRAST = "contrast"

STUDY_FILE = "study.yaml"
SUMMARY_CSV = "summary.csv"
SUMMARY_H5 = "summary.h5"

_PRESSURE_RESULTS = ("iterations", "residual", "converged", "reason", "setup_seconds",
                     "solve_seconds")
_FLOW_RESULTS = ("iterations_mean", "iterations_max", "pressure_solves", "steps", "residual",
                 "converged", "reason", "setup_seconds", "solve_seconds")
_BENCHMARK = ("max_rise_velocity", "max_rise_velocity_time", "min_circularity",
              "min_circularity_time", "centroid_y_end", "area_change", "final_time")
_TRAILER = ("wall_seconds", "backend", "device", "gpu", "host", "file", "error")

# Keys the study sets itself for every run.
_RESERVED = ("name", "output", "output.directory")


# --------------------------------------------------------------------------
# Parameter values
# --------------------------------------------------------------------------

class Parameter:
    """One swept key: ``key``, its ``values`` (a list) and ``origin`` (for errors)."""

    def __init__(self, key, values, origin):
        self.key, self.values, self.origin = key, list(values), origin

    def __repr__(self):
        return f"Parameter({self.key!r}, {self.values!r})"


_NUM = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
_RANGE = re.compile(rf"\s*({_NUM})\s*:\s*({_NUM})\s*:\s*([^:\s]*)\s*(?::\s*([^:\s]*)\s*)?\Z")
_RANGE_HINT = "a range START:STOP:COUNT[:log], e.g. 1:1e6:7:log or 0.1:0.5:5"


def _integral(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) \
        and float(v) == int(v)


def _intify(values, current):
    """Integral floats become ints when the key currently holds an int."""
    if (isinstance(current, numbers.Integral) and not isinstance(current, bool)
            and values and all(_integral(v) for v in values)):
        return [int(v) for v in values]
    return values


def parse_range(text, current=None):
    """Expand a range string; None if ``text`` is not one.

    ``"START:STOP:COUNT"``: COUNT evenly spaced values, both ends included;
    ``"START:STOP:COUNT:log"``: log-spaced.  Values are rounded to 12
    significant digits (``1e3``, not ``999.9999999999998``); they are ints
    when all are integral and ``current`` (the key's value in the case) is an
    int.

    Raises
    ------
    ValueError
        ``text`` has the shape of a range but is not a valid one.

    >>> parse_range("1:1e6:7:log")
    [1.0, 10.0, 100.0, 1000.0, 10000.0, 100000.0, 1000000.0]
    >>> parse_range("0.1:0.5:5")
    [0.1, 0.2, 0.3, 0.4, 0.5]
    >>> parse_range("32:128:4", current=64)
    [32, 64, 96, 128]
    >>> parse_range("jacobi") is None
    True
    """
    if not isinstance(text, str):
        return None
    m = _RANGE.match(text)
    if not m:
        return None
    start, stop = float(m.group(1)), float(m.group(2))
    count, mode = m.group(3), (m.group(4) or "lin").lower()
    if not count.isdigit() or int(count) < 1:
        raise ValueError(f"range {text!r}: COUNT {count!r} is not an integer >= 1")
    n = int(count)
    if mode not in ("lin", "linear", "log"):
        raise ValueError(f"range {text!r}: unknown spacing {m.group(4)!r} (lin or log)")
    if n == 1:
        values = [start]
    elif mode == "log":
        if start <= 0 or stop <= 0:
            raise ValueError(f"range {text!r}: a log range needs START and STOP > 0")
        a, b = math.log10(start), math.log10(stop)
        values = [10.0 ** (a + (b - a) * i / (n - 1)) for i in range(n)]
        values[0], values[-1] = start, stop
    else:
        values = [start + (stop - start) * i / (n - 1) for i in range(n)]
        values[-1] = stop
    values = [float(f"{v:.12g}") for v in values]
    return _intify(values, current)


def _split_top(text):
    """Split at commas outside brackets and quotes: ``"[8,8],[4,4]"`` -> two items."""
    items, depth, quote, cur = [], 0, None, ""
    for ch in text:
        if quote:
            quote = None if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch in "[{":
            depth += 1
        elif ch in "]}":
            depth -= 1
        elif ch == "," and depth == 0:
            items.append(cur)
            cur = ""
            continue
        cur += ch
    items.append(cur)
    return [s.strip() for s in items]


def _scalar(text):
    """One ``--values`` item: int, float (``1e3`` too), else YAML."""
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return yaml.safe_load(text)


def parse_values(text, current=None):
    """The values of one ``--values`` option.

    Comma-separated items, each a number, a range (:func:`parse_range`) or a
    YAML value.

    Raises
    ------
    ValueError
        An empty item, a malformed range or an unreadable YAML item.

    >>> parse_values("1,1e3,1e6")
    [1, 1000.0, 1000000.0]
    >>> parse_values("jacobi, block_ic")
    ['jacobi', 'block_ic']
    >>> parse_values("[8,8],[16,16]")
    [[8, 8], [16, 16]]
    >>> parse_values("32,1e2", current=64)
    [32, 100]
    """
    values = []
    for item in _split_top(str(text)):
        if not item:
            raise ValueError(f"empty item in {text!r}")
        rng = parse_range(item, current)
        if rng is not None:
            values.extend(rng)
            continue
        try:
            values.append(_scalar(item))
        except yaml.YAMLError as exc:
            problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
            raise ValueError(f"cannot read {item!r} ({problem})") from None
    return _intify(values, current)


def expand(parameters):
    """The cartesian product: a list of ``[(Parameter, value), ...]``, last varying fastest.

    >>> pts = expand([Parameter("a", [1, 2], ""), Parameter("b", ["x", "y"], "")])
    >>> [[v for _, v in p] for p in pts]
    [[1, 'x'], [1, 'y'], [2, 'x'], [2, 'y']]
    """
    if not parameters:
        return []
    combos = itertools.product(*[p.values for p in parameters])
    return [list(zip(parameters, combo)) for combo in combos]


# --------------------------------------------------------------------------
# Reading a study
# --------------------------------------------------------------------------

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
            "parameters": {p.key: _plain(p.values) for p in self.parameters},
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


def _dump(data):
    return yaml.dump(data, Dumper=_Dumper, sort_keys=False, default_flow_style=None, width=100)


def _plain(v):
    if isinstance(v, (list, tuple)):
        return [_plain(x) for x in v]
    if isinstance(v, Mapping):
        return {str(k): _plain(x) for k, x in v.items()}
    return v


def _show(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return f"{v:g}"
    if isinstance(v, (list, tuple, Mapping)):
        return json.dumps(_plain(v))
    return str(v)


def _sweep_lines(text):
    """1-based lines of the ``sweep`` block's keys: ``("sweep", "parameters", key) -> line``."""
    lines = {}
    try:
        root = yaml.compose(text, Loader=yaml.SafeLoader)
    except yaml.YAMLError:
        return lines

    def walk(node, path):
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                if isinstance(k, yaml.ScalarNode):
                    p = path + (k.value,)
                    lines[p] = k.start_mark.line + 1
                    if len(p) < 3:
                        walk(v, p)

    if isinstance(root, yaml.MappingNode):
        for k, v in root.value:
            if isinstance(k, yaml.ScalarNode) and k.value == "sweep":
                lines[("sweep",)] = k.start_mark.line + 1
                walk(v, ("sweep",))
    return lines


def _get(tree, key):
    """The value at dotted ``key`` in a nested dict (``a.b[2].c``); None if absent."""
    node = tree
    for part in key.split("."):
        m = re.fullmatch(r"([^\[\]]+)((?:\[\d+\])*)", part)
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
        raise CaseError(file, key, f"got {name!r}",
                        "a non-empty name without '/' or '\\' (it names the study folder)",
                        value=name, origin=origin, line=line)
    return name


def _read_file(path):
    """``(data, text)``; any problem with the file is the config's one-line error."""
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
        data = yaml.safe_load(text)
    except (OSError, UnicodeDecodeError, yaml.YAMLError):
        load_case(path)     # raises the config's one-line message (missing file, syntax, ...)
        raise               # pragma: no cover - load_case should have raised
    return data, text


def _block_parameters(block, file, lines):
    """``(name, [Parameter])`` of a ``sweep:`` block."""
    def where(*path):
        return lines.get(("sweep",) + path) or lines.get(("sweep",))

    if block is None:
        return None, []
    if not isinstance(block, Mapping):
        raise CaseError(file, "sweep", f"got {_show(block)}",
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
        raise CaseError(file, "sweep.parameters", f"got {_show(params)}",
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
                raise CaseError(file, k, str(exc), _RANGE_HINT, value=raw, line=line) from None
            if values is None:
                raise CaseError(file, k, f"got {raw!r}", _RANGE_HINT + ", or a list of values",
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
    data, text = _read_file(file)
    lines = {}
    block = None
    has_block = isinstance(data, Mapping) and "sweep" in data
    if has_block:
        data = dict(data)
        block = data.pop("sweep")
        lines = _sweep_lines(text)
    fixed = list(overrides or [])
    base_overrides = list(fixed)
    if output is not None:
        base_overrides.append(("output.directory", output, f"-o {output}"))
    if backend is not None:
        base_overrides.append(("backend", backend, f"--backend {backend}"))
    if not has_block:
        base = load_case(file, base_overrides)        # with line numbers in its errors
    else:
        base = case_from_dict(data, source=file, overrides=base_overrides)

    block_name, parameters = _block_parameters(block, file, lines)

    # --param / --values, paired in order; they add to (or replace) the block's.
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
                            "comma-separated values (1,1e3,1e6) or " + _RANGE_HINT,
                            origin=f"{origin} --values {text_values}") from None
        for i, p in enumerate(parameters):
            if p.key == key and not p.origin.startswith("--param"):
                parameters[i] = Parameter(key, vals, origin)     # replaces the block's values
                break
        else:
            parameters.append(Parameter(key, vals, origin))
    # Block values: ints stay ints for int keys (a range gives floats).
    for p in parameters:
        p.values = _intify(p.values, _current(base, p.key))

    if not parameters:
        raise CaseError(file, None, "no parameters to sweep",
                        "--param KEY --values V1,V2,... or a sweep: block with parameters")
    seen = {}
    for p in parameters:
        if p.key in seen:
            raise CaseError(file, p.key, f"swept twice ({seen[p.key]} and {p.origin})",
                            "each key once", origin=p.origin)
        seen[p.key] = p.origin
        if p.key in _RESERVED or p.key.startswith("output.directory"):
            raise CaseError(file, p.key, "is set by the study for each run",
                            "another key (runs are named run_0000, ... in OUTDIR/<study>/)",
                            origin=p.origin)
    if CONTRAST in seen and "fluids.gas.density" in seen:
        raise CaseError(file, "fluids.gas.density", "swept together with contrast",
                        "either contrast or fluids.gas.density", origin=seen["fluids.gas.density"])

    if name is not None:
        study_name = _check_name(name, file, None, origin=f"--name {name}")
    else:
        study_name = block_name or f"{base.name}_study"
    directory = os.path.join(base.output.directory, study_name)

    points = []
    modes = set()
    assignments = expand(parameters)
    width = max(4, len(str(len(assignments) - 1)))
    for i, assignment in enumerate(assignments):
        run = f"run_{i:0{width}d}"
        case = _point_case(file, data, base_overrides, assignment, run, directory)
        modes.add(case.mode)
        points.append({
            "index": i,
            "run": run,
            "study": study_name,
            "params": {p.key: v for p, v in assignment},
            "case": case.to_dict(),
            "path": os.path.join(directory, f"{run}.h5"),
            "mode": case.mode,
        })
    columns = ["run"] + [p.key for p in parameters] + ["status"]
    results = []
    for mode, cols in (("pressure", _PRESSURE_RESULTS), ("flow", _FLOW_RESULTS + _BENCHMARK)):
        if mode in modes:
            results += [c for c in cols if c not in results]
    columns += results + list(_TRAILER)
    return Study(name=study_name, source=file, base=base, parameters=parameters,
                 overrides=[o if isinstance(o, str) else f"{o[0]}={o[1]}" for o in fixed],
                 directory=directory, points=points, columns=columns)


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
    case = case_from_dict(data, source=file, overrides=overrides)
    if contrast is not None:
        p, v = contrast
        x = None
        if isinstance(v, numbers.Real) and not isinstance(v, bool):
            x = float(v)
        elif isinstance(v, str):
            with contextlib.suppress(ValueError):
                x = float(v)
        if x is None or not math.isfinite(x) or x <= 0:
            raise CaseError(file, CONTRAST, f"got {_show(v)}",
                            "a number > 0 (liquid density / gas density)", value=v,
                            origin=p.origin)
        overrides.append(("fluids.gas.density", case.fluids.liquid.density / x, p.origin))
        case = case_from_dict(data, source=file, overrides=overrides)
    return case


# --------------------------------------------------------------------------
# One run
# --------------------------------------------------------------------------

def _one_line(text):
    return re.sub(r"\s*[\r\n]+\s*", " ", str(text)).strip()


def run_point(point):
    """Run one point of a study; return its summary row (never raises, bar Ctrl-C).

    Parameters
    ----------
    point : dict
        ``run``, ``params``, ``case`` (a resolved case dict), ``path`` (its
        HDF5 file), ``mode``; one of :attr:`Study.points`.

    Returns
    -------
    dict
        The row: ``run``, the parameter values, ``status`` and the results.
    """
    from .run import run_case
    from ..compute.backend import get_backend

    t0 = time.perf_counter()
    row = {"run": point["run"], **point.get("params", {}), "status": "failed",
           "host": socket.gethostname(), "file": os.path.basename(point["path"]), "error": ""}
    path = point["path"]
    with contextlib.suppress(FileNotFoundError):
        os.unlink(path)         # a stale file from an interrupted attempt is not this run's
    log = io.StringIO()
    try:
        case = case_from_dict(point["case"], source=point["run"])
        backend = get_backend(case.backend)
        row["backend"], row["device"] = backend.name, backend.device_name
        row["gpu"] = _gpu_id(backend)
        with contextlib.redirect_stdout(log), contextlib.redirect_stderr(log):
            rc = run_case(case, backend, quiet=True, progress=False)
        if rc in (128 + 2, 128 + 15):
            # A flow point stopped cleanly by Ctrl-C / SIGTERM: stop the sweep
            # too (its file is restartable; --resume runs the point again).
            raise KeyboardInterrupt
        if not os.path.isfile(path):
            raise RuntimeError(f"the run returned {rc} without writing {path}")
        row.update(_read_results(path, case.mode))
        row["status"] = "ok" if rc == 0 else "not_converged"
        if rc != 0:
            msgs = [ln for ln in log.getvalue().splitlines() if ln.strip()]
            err = next((ln for ln in msgs if ln.startswith("error:")), msgs[-1] if msgs else "")
            err = err.removeprefix("error:")
            err = re.sub(r";\s*wrote \S+\s*$", "", err.strip())    # the file is in `file`
            row["error"] = _one_line(err) or f"exit code {rc}"
    except Exception as exc:    # noqa: BLE001 - a failed run is a row, not a crash
        row["status"] = "failed"
        msg = str(exc) if isinstance(exc, CaseError) else f"{type(exc).__name__}: {exc}"
        row["error"] = _one_line(msg)
    row["wall_seconds"] = time.perf_counter() - t0
    return row


def _gpu_id(backend):
    """The PCI bus id of the GPU a CuPy run uses (which GPU, whatever the numbering); "" on the CPU."""
    if backend.name != "cupy":
        return ""
    try:
        return str(backend.xp.cuda.Device().pci_bus_id)
    except Exception:   # noqa: BLE001 - informative only
        return str(os.environ.get("CUDA_VISIBLE_DEVICES", ""))


def _read_results(path, mode):
    import h5py
    import numpy as np

    with h5py.File(path, "r") as fh:
        s = fh["solver"]
        its = np.asarray(s["iterations"][()]).ravel()
        res = np.asarray(s["residual"][()], dtype=np.float64).ravel()
        conv = np.asarray(s["converged"][()]).ravel().astype(bool)
        reasons = [r.decode() if isinstance(r, bytes) else str(r) for r in s["reason"][()]]
        setup = float(np.sum(s["setup_seconds"][()]))
        solve = float(np.sum(s["solve_seconds"][()]))
    bad = [r for r, c in zip(reasons, conv) if not c]
    out = {"residual": float(np.max(res)) if len(res) else math.nan,
           "converged": bool(np.all(conv)) if len(conv) else False,
           "reason": bad[0] if bad else (reasons[-1] if reasons else ""),
           "setup_seconds": setup, "solve_seconds": solve}
    if mode != "flow":
        out["iterations"] = int(its[0]) if len(its) else None
        return out
    from .validation import benchmark_quantities, read_run

    run = read_run(path)
    out.update(iterations_mean=float(np.mean(its)) if len(its) else math.nan,
               iterations_max=int(np.max(its)) if len(its) else 0,
               pressure_solves=len(its), steps=int(run["solver"]["steps"]))
    q = benchmark_quantities(**run["diagnostics"])
    out.update({k: float(q[k]) for k in _BENCHMARK if k in q})
    return out


# --------------------------------------------------------------------------
# Summary files
# --------------------------------------------------------------------------

def _cell(v):
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, tuple, Mapping)):
        return json.dumps(_plain(v))
    return str(v)


_INT = re.compile(r"[+-]?\d+\Z")


def _parse_cell(s):
    if s == "":
        return None
    if s in ("true", "false"):
        return s == "true"
    if _INT.match(s):
        return int(s)
    try:
        return float(s)
    except ValueError:
        pass
    if s[:1] in "[{":
        with contextlib.suppress(ValueError):
            return json.loads(s)
    return s


def read_summary(path):
    """Rows of a ``summary.csv`` with typed values (``""`` -> None); ``[]`` if absent."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            return [{k: _parse_cell(v) for k, v in row.items()} for row in csv.DictReader(fh)]
    except FileNotFoundError:
        return []


def _atomic_text(path, text):
    """Write ``text`` (UTF-8) to ``path`` atomically, with the umask's permissions."""
    from ..io.atomic import atomic_text

    atomic_text(path, text)


def _h5_column(values):
    import h5py
    import numpy as np

    present = [v for v in values if v is not None]
    numeric = all(isinstance(v, numbers.Real) for v in present)
    if present and numeric:
        if all(isinstance(v, bool) for v in present) and len(present) == len(values):
            return np.asarray(values, dtype=np.bool_)
        if (all(isinstance(v, numbers.Integral) and not isinstance(v, bool) for v in present)
                and len(present) == len(values)):
            return np.asarray(values, dtype=np.int64)
        return np.asarray([math.nan if v is None else float(v) for v in values], dtype=np.float64)
    return np.asarray([_cell(v) for v in values], dtype=h5py.string_dtype())


def write_summary(directory, columns, rows, study_text=""):
    """Write ``summary.csv`` and ``summary.h5`` (each atomically) in ``directory``."""
    from ..io.atomic import atomic_h5

    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for row in rows:
        w.writerow([_cell(row.get(c)) for c in columns])
    _atomic_text(os.path.join(directory, SUMMARY_CSV), buf.getvalue())
    with atomic_h5(os.path.join(directory, SUMMARY_H5)) as fh:
        fh.attrs["study"] = study_text
        fh.attrs["runs"] = len(rows)
        g = fh.create_group("summary")
        g.attrs["columns"] = list(columns)
        for c in columns:
            g.create_dataset(c, data=_h5_column([row.get(c) for row in rows]))


# --------------------------------------------------------------------------
# The study folder
# --------------------------------------------------------------------------

def _fingerprint(record):
    """What must agree for two study.yaml files to be the same study."""
    case = record.get("case")
    case = yaml.safe_load(case) if isinstance(case, str) else (case or {})
    case = dict(case) if isinstance(case, Mapping) else {}
    for k in ("name", "backend"):
        case.pop(k, None)
    if isinstance(case.get("output"), Mapping):
        case["output"] = {k: v for k, v in case["output"].items() if k != "directory"}
    params = record.get("parameters") or {}
    return {"parameters": [[k, v] for k, v in params.items()], "case": case}


def _check_folder(study, resume):
    """Refuse a folder holding another study; return the rows to keep (for --resume)."""
    d = study.directory
    record_path = os.path.join(d, STUDY_FILE)
    expected = "a new --name or an empty folder, or --resume with the same study"
    if os.path.exists(d) and not os.path.isdir(d):
        raise CaseError(d, None, "exists and is not a folder", "a new --name or another -o")
    if not os.path.isdir(d) or not os.listdir(d):
        return []
    if not os.path.isfile(record_path):
        raise CaseError(d, None, f"folder is not empty and holds no {STUDY_FILE} "
                        "(not a study folder)", expected)
    try:
        with open(record_path, encoding="utf-8") as fh:
            theirs = yaml.safe_load(fh)
        if not isinstance(theirs, Mapping):
            raise ValueError("not a mapping")
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise CaseError(record_path, None, f"unreadable study record ({_one_line(exc)})",
                        expected) from None
    ours = yaml.safe_load(_dump(study.record()))
    a, b = _fingerprint(theirs), _fingerprint(ours)
    if a["parameters"] != b["parameters"]:
        there = {k: v for k, v in a["parameters"]}
        here = {k: v for k, v in b["parameters"]}
        if list(there) != list(here):
            what = f"parameters {list(there)} there, {list(here)} here"
        else:
            k = next(k for k in here if there[k] != here[k])
            what = f"parameter {k}: {_show(there[k])} there, {_show(here[k])} here"
        raise CaseError(record_path, None, f"holds another study ({what})", expected)
    diff = first_difference(a["case"], b["case"])
    if diff:
        key, there, here = diff
        raise CaseError(record_path, None, f"holds another study (base case {key}: "
                        f"{_show(there)} there, {_show(here)} here)", expected)
    rows = read_summary(os.path.join(d, SUMMARY_CSV))
    runs = {p["run"] for p in study.points}
    keep = [r for r in rows if r.get("run") in runs and r.get("status") in STATUSES
            and (r.get("status") == "failed" or os.path.isfile(os.path.join(d, f"{r['run']}.h5")))]
    if keep and not resume:
        raise CaseError(record_path, None, f"holds this study already ({len(keep)} of "
                        f"{len(study.points)} runs finished)",
                        "--resume to continue it, or a new --name or an empty folder")
    return keep


# --------------------------------------------------------------------------
# Executors
# --------------------------------------------------------------------------

def _visible_gpus(backend_name, file):
    """GPU ids to pin workers to (``CUDA_VISIBLE_DEVICES`` entries); [] on the CPU."""
    from ..compute.backend import BackendUnavailable, get_backend

    if backend_name == "numpy":
        return []
    try:
        get_backend("cupy")
        import cupy

        n = int(cupy.cuda.runtime.getDeviceCount())
    except (BackendUnavailable, Exception) as exc:  # noqa: BLE001
        if backend_name == "cupy":
            raise CaseError(file, "backend", "got 'cupy'",
                            f"'auto' or 'numpy' on this machine (cupy unavailable: "
                            f"{_one_line(exc)})", value="cupy") from None
        return []
    env = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = [s.strip() for s in env.split(",") if s.strip()] if env else [str(i) for i in range(n)]
    return ids[:n]


def _init_worker(queue):
    """ProcessPoolExecutor initializer: pin this worker to its GPU, ignore Ctrl-C."""
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    gpu = queue.get()
    if gpu is not None:
        os.environ["CUDA_VISIBLE_DEVICES"] = str(gpu)


def _failed_row(point, exc):
    return {"run": point["run"], **point.get("params", {}), "status": "failed",
            "file": os.path.basename(point["path"]),
            "error": _one_line(f"{type(exc).__name__}: {exc}")}


def _run_inprocess(points, done):
    for p in points:
        done(p, run_point(p))


def _run_pool(points, done, workers, gpus):
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor, as_completed

    ctx = multiprocessing.get_context("spawn")
    queue = ctx.Queue()
    for i in range(workers):
        queue.put(gpus[i % len(gpus)] if gpus else None)
    pool = ProcessPoolExecutor(max_workers=workers, mp_context=ctx, initializer=_init_worker,
                               initargs=(queue,))
    try:
        futures = {pool.submit(run_point, p): p for p in points}
        for fut in as_completed(futures):
            p = futures[fut]
            try:
                row = fut.result()
            except Exception as exc:    # noqa: BLE001 - a dead worker fails its run
                row = _failed_row(p, exc)
            done(p, row)
    except BaseException:
        pool.shutdown(wait=False, cancel_futures=True)
        raise
    pool.shutdown(wait=True)


def _dask():
    try:
        import distributed
    except ImportError as exc:
        raise CaseError("--executor dask", None, f"dask.distributed is not installed ({exc})",
                        "pip install bubbleflow[dask]") from None
    return distributed


class _PinGpu:
    """Dask worker plugin: pin each LocalCluster worker to one GPU (by worker name)."""

    name = "bubbleflow-pin-gpu"

    def __init__(self, gpus):
        self.gpus = list(gpus)

    def setup(self, worker):
        try:
            idx = int(worker.name)
        except (TypeError, ValueError):
            idx = abs(hash(worker.name))
        os.environ["CUDA_VISIBLE_DEVICES"] = str(self.gpus[idx % len(self.gpus)])

    def teardown(self, worker):
        pass


def _dask_connect(scheduler, workers, gpus):
    """``(client, cluster)``: a client of ``scheduler``, or of a new LocalCluster."""
    import logging

    distributed = _dask()
    if scheduler:
        try:
            return distributed.Client(scheduler, timeout="20s"), None
        except (OSError, TimeoutError, ValueError) as exc:
            raise CaseError(f"--scheduler {scheduler}", None,
                            f"cannot connect ({_one_line(exc)})",
                            "the address of a running dask scheduler, e.g. tcp://host:8786") from None
    cluster = distributed.LocalCluster(n_workers=workers, processes=True, threads_per_worker=1,
                                       dashboard_address=None, silence_logs=logging.ERROR)
    client = distributed.Client(cluster)
    if gpus:
        from distributed.diagnostics.plugin import WorkerPlugin

        plugin = type("PinGpu", (_PinGpu, WorkerPlugin), {})(gpus)
        register = getattr(client, "register_plugin", None) or client.register_worker_plugin
        register(plugin)
    return client, cluster


def _run_dask(points, done, client):
    distributed = _dask()
    futures = client.map(run_point, points, pure=False)
    by_key = {f.key: p for f, p in zip(futures, points)}
    try:
        for fut in distributed.as_completed(futures):
            p = by_key[fut.key]
            try:
                row = fut.result()
            except Exception as exc:    # noqa: BLE001 - a lost worker fails its run
                row = _failed_row(p, exc)
            done(p, row)
    except BaseException:
        with contextlib.suppress(Exception):
            client.cancel(futures)
        raise


# --------------------------------------------------------------------------
# Running a study
# --------------------------------------------------------------------------

def _short_labels(keys):
    """Short unique labels for progress lines (``solver.preconditioner.type`` -> ``preconditioner``)."""
    parts = {k: k.split(".") for k in keys}
    for k, segs in parts.items():
        if len(segs) > 1 and segs[-1] == "type":
            parts[k] = segs[:-1]
    labels = {}
    for k, segs in parts.items():
        for n in range(1, len(segs) + 1):
            cand = ".".join(segs[-n:])
            if sum(".".join(o[-n:]) == cand for o in parts.values()) == 1:
                labels[k] = cand
                break
        else:
            labels[k] = k
    return labels


def _describe(row):
    st = row.get("status")
    bits = [st.replace("_", " ") if st else "?"]
    if row.get("iterations") is not None:
        bits.append(f"{row['iterations']} it")
    elif row.get("iterations_mean") is not None:
        bits.append(f"{row['iterations_mean']:.1f}/{row.get('iterations_max')} it")
    if isinstance(row.get("residual"), float):
        bits.append(f"residual {row['residual']:.1e}")
    if isinstance(row.get("wall_seconds"), float):
        bits.append(f"{row['wall_seconds']:.1f} s")
    if st != "ok" and row.get("error"):
        err = row["error"]
        bits.append(err if len(err) <= 160 else err[:157] + "...")
    return ", ".join(bits)


def run_study(study, executor="local", workers=None, scheduler=None, resume=False,
              progress=True, quiet=False):
    """Run (or resume) a prepared study; return the exit code (0 all ok, else 1).

    Raises
    ------
    CaseError
        The folder holds another study, the executor cannot be set up.
    """
    executor = executor or ("dask" if scheduler else "local")
    if executor not in ("local", "dask"):
        raise CaseError(study.source, None, f"--executor {executor!r}", "local or dask")
    if scheduler and executor != "dask":
        raise CaseError(study.source, None, f"got --scheduler with --executor {executor}",
                        "--executor dask --scheduler ADDRESS")
    if workers is not None and workers < 1:
        raise CaseError(study.source, None, f"--workers {workers}", "an integer >= 1")
    keep = _check_folder(study, resume)
    if executor == "dask":
        _dask()     # not installed: one line, before anything runs

    # One worker per visible GPU when runs go to CuPy (local machine or LocalCluster).
    gpus = []
    if not (executor == "dask" and scheduler):
        backends = {p["case"]["backend"] for p in study.points}
        for b in sorted(backends):
            gpus = _visible_gpus(b, study.source) or gpus
    if workers is None:
        workers = max(1, len(gpus))

    kept = {r["run"]: r for r in keep}
    todo = [p for p in study.points if p["run"] not in kept]
    client = cluster = None
    if executor == "dask" and todo:     # a scheduler that cannot be reached: nothing written
        client, cluster = _dask_connect(scheduler, workers, gpus)
    try:
        return _execute(study, kept, todo, executor, workers, gpus, scheduler, client,
                        progress, quiet)
    finally:
        for closable in (client, cluster):
            if closable is not None:
                with contextlib.suppress(Exception):
                    closable.close()


def _execute(study, kept, todo, executor, workers, gpus, scheduler, client, progress, quiet):
    """Write study.yaml, run ``todo``, keep the summary up to date; return the exit code."""
    rows = dict(kept)
    os.makedirs(study.directory, exist_ok=True)
    record = study.record()
    record_path = os.path.join(study.directory, STUDY_FILE)
    study_text = _dump(record)
    if not os.path.isfile(record_path) or not kept:
        _atomic_text(record_path, study_text)
    else:
        with open(record_path, encoding="utf-8") as fh:
            study_text = fh.read()

    total = len(study.points)
    where = ("in-process" if executor == "local" and workers == 1 else
             f"{workers} processes" if executor == "local" else
             f"dask scheduler {scheduler}" if scheduler else f"dask LocalCluster of {workers}")
    gpu_note = f", GPUs {','.join(gpus)}" if gpus and not scheduler else ""
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    say(f"study {study.name}: {total} runs ({len(kept)} finished, {len(todo)} to run) in "
        f"{study.directory}; executor {executor} ({where}{gpu_note})")

    labels = _short_labels([p.key for p in study.parameters])
    bar = None
    if progress and not quiet and sys.stderr.isatty() and todo:
        from tqdm import tqdm

        bar = tqdm(total=total, initial=len(kept), unit="run", file=sys.stderr,
                   dynamic_ncols=True, desc=study.name)
    counts = {s: sum(r.get("status") == s for r in kept.values()) for s in STATUSES}
    t0 = time.perf_counter()
    finished = [len(kept)]

    def done(point, row):
        rows[point["run"]] = row
        counts[row.get("status", "failed")] = counts.get(row.get("status", "failed"), 0) + 1
        finished[0] += 1
        ordered = [rows[p["run"]] for p in study.points if p["run"] in rows]
        write_summary(study.directory, study.columns, ordered, study_text)
        if bar is not None:
            bar.set_postfix_str(f"ok {counts['ok']}, not converged {counts['not_converged']}, "
                                f"failed {counts['failed']}")
            bar.update(1)
        else:
            params = " ".join(f"{labels[k]}={_show(v)}" for k, v in point["params"].items())
            say(f"[{finished[0]}/{total}] {point['run']} {params}: {_describe(row)}")

    try:
        if todo:
            if executor == "dask":
                _run_dask(todo, done, client)
            elif workers == 1:
                _run_inprocess(todo, done)
            else:
                _run_pool(todo, done, workers, gpus)
        elif not os.path.isfile(os.path.join(study.directory, SUMMARY_CSV)):
            write_summary(study.directory, study.columns, [], study_text)
    finally:
        if bar is not None:
            bar.close()
    say(f"study {study.name}: {counts['ok']} ok, {counts['not_converged']} not converged, "
        f"{counts['failed']} failed of {total} runs ({len(todo)} run now in "
        f"{time.perf_counter() - t0:.1f} s); wrote {os.path.join(study.directory, SUMMARY_CSV)}")
    return 0 if counts["ok"] == total else 1


# --------------------------------------------------------------------------
# Command line
# --------------------------------------------------------------------------

def cmd_sweep(args):
    """``bubbleflow sweep``: validate every point, then run the study.

    Returns
    -------
    int
        0 when every run is ok, 1 when any failed or did not converge.

    Raises
    ------
    CaseError
        Bad input (unknown key, invalid value, a folder holding another study,
        an unusable executor), before any run.
    """
    study = prepare_study(args.case, params=args.param, values=args.values,
                          overrides=args.set, output=args.output, name=args.name,
                          backend=args.backend)
    return run_study(study, executor=args.executor, workers=args.workers,
                     scheduler=args.scheduler, resume=args.resume,
                     progress=not args.no_progress, quiet=args.quiet)


def add_subparser(subparsers):
    """Register ``bubbleflow sweep`` on the CLI's subparsers."""
    p = subparsers.add_parser(
        "sweep", help="run a parameter study (one run per point of a cartesian product)",
        description="Run a case once per point of the cartesian product of the given "
                    "parameter values; one HDF5 file per run and a summary table "
                    "(summary.csv, summary.h5) in OUTDIR/<study>/.")
    p.add_argument("case", metavar="CASE.yaml",
                   help="a case file, or a study file (a case file with a top-level sweep: block)")
    p.add_argument("--param", action="append", metavar="KEY", default=[],
                   help="a case key path to sweep (grid.nx, solver.preconditioner.type, ...) or "
                        "'contrast' (gas density = liquid density / contrast); may be repeated")
    p.add_argument("--values", action="append", metavar="LIST", default=[],
                   help="values of the preceding --param: V1,V2,... (each read as YAML) or a "
                        "range START:STOP:COUNT[:log], e.g. 1:1e6:7:log")
    p.add_argument("--set", action="append", metavar="KEY.PATH=VALUE", default=[],
                   help="fixed override applied to every run (as in bubbleflow run); may be repeated")
    p.add_argument("-o", "--output", metavar="OUTDIR",
                   help="folder receiving the study folder (default the case's output.directory)")
    p.add_argument("--name", metavar="STUDY",
                   help="study name (default the sweep block's name, else <case name>_study)")
    p.add_argument("--resume", action="store_true",
                   help="continue an interrupted study: skip runs in summary.csv, run the others")
    p.add_argument("--executor", choices=("local", "dask"), default=None,
                   help="local: this machine (one worker per GPU); dask: a Dask distributed "
                        "cluster (default local, dask with --scheduler)")
    p.add_argument("--scheduler", metavar="ADDRESS",
                   help="dask scheduler address (tcp://host:8786); without it a LocalCluster")
    p.add_argument("--workers", type=int, metavar="N",
                   help="workers (local processes or LocalCluster size; default one per visible "
                        "GPU with the cupy backend, else 1 = in-process)")
    p.add_argument("--backend", choices=BACKENDS,
                   help="array backend of every run (overrides the case's backend)")
    p.add_argument("--no-progress", action="store_true",
                   help="no progress bar (it is also off when stderr is not a terminal)")
    p.add_argument("-q", "--quiet", action="store_true", help="print only errors")
    p.set_defaults(func=cmd_sweep)
    return p
