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

The YAML is read by :mod:`.yaml_reader`, the one reader of every YAML
text that enters (its limits: size, alias expansion, nesting).

The schema lives in the dataclasses below: each field carries its checker
(``metadata["spec"]``) next to its default, so adding a key or an enum value
(``MODES`` will gain ``"flow"``) is a one-line change.  The validation is
hand-written on purpose (no schema library): the messages are the product.
"""
from __future__ import annotations

import copy
import dataclasses
import difflib
import math
import numbers
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Optional, Tuple

import yaml

from ..linalg import registry as _registry
from ..mesh.grid import Grid as _Grid
from .yaml_reader import MAX_FILE_BYTES, MAX_OPTION_CHARS, YamlError, load_yaml, read_text, shorten

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
#: ``solver.deflation.type`` when the case does not give one.
DEFAULT_CELLS_PER_SUBDOMAIN = _registry.DEFAULT_CELLS_PER_SUBDOMAIN
DEFAULT_DEFLATION = {m.name: m.default_deflation for m in _registry.METHODS.values()}
# What a case must say instead when it breaks a method's rule
# (:func:`bubbleflow.linalg.registry.method_violations`).
_RULE_EXPECTED = {
    ("preconditioner", "forbidden"): "method pcg or dpcg, or preconditioner none",
    ("preconditioner", "required"): "a preconditioner, or method cg",
    ("deflation", "forbidden"): "method dpcg, or deflation none",
    ("deflation", "required"): "a deflation type, or method pcg",
}

# Circles may touch the wall; this relative slack keeps e.g. 0.7 + 0.3 <= 1.0
# from failing on rounding.
_WALL_SLACK = 1e-12

# Hard bounds on what the numerics can represent or finish; see
# _check_limits for the reasons.  Spelled out (not imported) like the enums.
#: Most cells: the 5-point matrix is stored in CSR with int32 indices
#: (operator.py, deflation.py), so its 5 * cells entries must stay below 2**31.
MAX_CELLS = (2 ** 31 - 1) // 5
#: Largest density ratio (either way) between the fluids.  Measured on the
#: bubbly column at 64 x 64 (dpcg, adef2, incomplete_poisson_scaled,
#: levelset_subdomains, float64): the attainable true relative residual is
#: about 1e-16 * contrast * 400 (1e5: converges to 1e-8; 1e6: stagnates at
#: 4e-8, converges at rtol 1e-6; 1e8: 4e-6; 1e10: 0.1; 1e12 and beyond: the
#: coarse matrix is no longer positive definite, LinAlgError).
MAX_CONTRAST = 1e6
#: Densities and viscosities, lengths and the other physical magnitudes must
#: lie in this window: it covers SI and non-dimensional cases with many
#: decades to spare, and keeps 1/rho, rho g L and h**3 far from the float64
#: overflow (1e308) and underflow (1e-308) limits.
MAGNITUDE = (1e-12, 1e12)
LENGTH = (1e-9, 1e9)
#: Most circles (bubbles, lattice, random, droplets): the level set is built
#: circle by circle over the whole grid, and random ones placed in O(n**2).
MAX_CIRCLES = 10_000
#: Random bubbles are placed by rejection; random sequential packing jams
#: near 55 % of the area, so ask for at most half of it.
MAX_RANDOM_FILL = 0.5
#: Flow runs: at most this many snapshots (time.end / output.interval), ...
MAX_SNAPSHOTS = 10_000
#: ... an output interval no smaller than this fraction of the stable step at
#: t = 0 (smaller intervals force tiny steps, each one written out) ...
MIN_INTERVAL_FRACTION = 0.01
#: ... and at most this many steps at the stable step at t = 0 (the flow
#: only makes it smaller).
MAX_STEPS = 10 ** 7
#: Largest case file read, in bytes (the reader's limit for files).
MAX_CASE_BYTES = MAX_FILE_BYTES

# Upper bounds of the counts a case sets; each `_Int` field names its bound
# and why, and the error states it.
#: Cells along one axis: the others have at least 4, and MAX_CELLS bounds them all.
MAX_AXIS_CELLS = MAX_CELLS // 4
#: Chebyshev smoothing steps per multigrid visit: each is a matrix product, so
#: a few dozen already cost more than the rest of the cycle, and the GPU
#: kernels' tiles carry a halo as wide as the degree.
MAX_DEGREE = 32
#: Cells of the coarsest multigrid level: it is solved through a dense
#: inverse of cells**2 entries (512 MiB of float64 at this size).
MAX_COARSEST_CELLS = 8192
#: ``min_side`` only holds back levels of at most this many cells
#: (multigrid.MIN_SIDE_CELLS), so no wider side can matter.
MAX_MIN_SIDE = 1024
#: Multigrid levels that run a W-cycle: a grid of MAX_CELLS halves to one
#: cell in fewer levels than this.
MAX_W_LEVELS = 32
#: Iterations of one solve (and between convergence checks): the solvers
#: record the residual history in an array of maxiter entries.
MAX_ITERATIONS = 10 ** 6
#: Level-set reinitialisation sweeps: each moves the corrected distance about
#: a cell from the interface, and the flow reads it a few cells out; every
#: sweep costs a pass over the grid at each reinitialisation.
MAX_REINIT_ITERATIONS = 1000
#: Random-bubble seeds: numpy takes any, a study's summary.h5 stores a swept
#: seed as a signed 64-bit integer.
MAX_SEED = 2 ** 63 - 1

#: Longest path shown in an error: a path is what identifies the file (its
#: end kept when longer); real paths stay well below, a crafted one does not.
MAX_PATH_CHARS = 300
#: Longest error message, whatever the input: the file is cut to
#: MAX_PATH_CHARS, the other user text it quotes (override, key, value) to
#: 80 characters each, and the longest messages the checks write reach some
#: 300 with short names.
MAX_MESSAGE_CHARS = MAX_PATH_CHARS + 400

_NOVALUE = object()


# --------------------------------------------------------------------------
# The error
# --------------------------------------------------------------------------

class CaseError(Exception):
    """A case file (or override) that cannot be run; ``str()`` is one line.

    The message reads ``"<file>[:<line>[:<col>]]: <key.path>: <what is
    wrong>; expected <what is expected>"``.  A value that came from an
    override names it instead of a line: ``"<file> (--set grid.nz=3): ..."``.
    The file, override and key are cut to what identifies them
    (:func:`~.yaml_reader.shorten`), control characters escaped, and the
    whole message to :data:`MAX_MESSAGE_CHARS`.

    Parameters
    ----------
    file : str
        The case file (or ``"<dict>"``).
    key : str or None
        Dotted key path such as ``"geometry.bubbles[2].radius"``; None for
        errors about the file as a whole.
    problem : str
        What is wrong, e.g. ``"got -5"``.
    expected : str or None
        What would be accepted.
    value : object, optional
        The offending value (None when there is none).
    line, column : int, optional
        1-based position in the file.
    origin : str, optional
        The command-line override the value came from (``"--set grid.nz=3"``).
    text : str, optional
        Replaces ``"<problem>; expected <expected>"`` in the message, for the
        few messages that read better in another shape (unknown keys).

    Attributes
    ----------
    file, key, value, expected, problem, line, column, origin
        As given.
    """

    def __init__(self, file, key=None, problem="", expected=None, *, value=_NOVALUE, line=None,
                 column=None, origin=None, text=None):
        self.file = str(file) if file is not None else "<case>"
        self.key = key
        self.problem = problem
        self.expected = expected
        self.value = None if value is _NOVALUE else value
        self.line = line
        self.column = column
        self.origin = origin
        if text is None:
            text = problem + (f"; expected {expected}" if expected else "")
        # The file, the override and the key are the user's text: shown cut
        # to what identifies them (a path's end), control characters escaped.
        loc = shorten(self.file, MAX_PATH_CHARS, keep="end")
        if origin:
            loc += f" ({shorten(origin)})"
        elif line is not None:
            loc += f":{line}" + (f":{column}" if column is not None else "")
        msg = f"{loc}: {shorten(key)}: {text}" if key else f"{loc}: {text}"
        # One line, always: file names, YAML problems or shown values may
        # carry newlines, and callers print this as a single `error:` line.
        msg = re.sub(r"\s*[\r\n]+\s*", " ", msg)
        # Values quoted in the problem are cut where they are shown; this
        # bounds what any message can grow to, whatever it quotes (control
        # characters escaped too).
        length = len(msg)
        msg = shorten(msg[:MAX_MESSAGE_CHARS], None)
        if max(length, len(msg)) > MAX_MESSAGE_CHARS:
            tail = f"... ({length} characters)"
            msg = msg[:MAX_MESSAGE_CHARS - len(tail)] + tail
        self.message = msg
        super().__init__(self.message)

    def __str__(self):
        return self.message

    def __reduce__(self):
        # Keyword-only arguments defeat Exception's default pickling, and
        # studies may send errors back from worker processes.
        return _restore_case_error, (dict(self.__dict__),)

    @classmethod
    def from_runtime(cls, case, key, problem, expected=None, value=_NOVALUE):
        """An error found after validation (e.g. while building the geometry).

        Points at ``key``'s line in the case file, or at the override that
        set it, when the case knows them.

        Parameters
        ----------
        case : Case
        key : str
            Dotted key path (``"geometry"``, ``"backend"``, ...).
        problem, expected : str
            As for :class:`CaseError`.
        """
        where = getattr(case, "_where", None)
        line = origin = None
        if where is not None:
            line, origin = where.locate(_split_dotted(key))
        return cls(getattr(case, "source", "<case>"), key, problem, expected, value=value,
                   line=line, origin=origin)


def _restore_case_error(state):
    err = CaseError.__new__(CaseError)
    Exception.__init__(err, state["message"])
    err.__dict__.update(state)
    return err


# --------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------

def _dotted(path):
    """``("geometry", "bubbles", 2, "radius")`` -> ``"geometry.bubbles[2].radius"``."""
    out = ""
    for seg in path:
        if isinstance(seg, int):
            out += f"[{seg}]"
        else:
            out += ("." if out else "") + str(seg)
    return out


_SEGMENT = re.compile(r"([A-Za-z_][A-Za-z0-9_\-]*)((?:\[\d+\])*)\Z")


def _split_dotted(key):
    """Inverse of :func:`_dotted`; None if ``key`` is not a well-formed path."""
    if not isinstance(key, str) or not key:
        return None
    path = []
    for part in key.split("."):
        m = _SEGMENT.match(part)
        if not m:
            return None
        path.append(m.group(1))
        # An index of thousands of digits is no list's (int() refuses it).
        indexes = re.findall(r"\[(\d{1,18})\]", m.group(2))
        if "".join(f"[{i}]" for i in indexes) != m.group(2):
            return None
        path.extend(int(i) for i in indexes)
    return tuple(path)


def _show(value, limit=80):
    """A value as the user wrote it (YAML spelling), cut to ``limit`` characters."""
    if value is None:
        s = "null"
    elif isinstance(value, bool):
        s = "true" if value else "false"
    elif isinstance(value, str):
        s = repr(value)
    elif isinstance(value, (list, tuple)):
        s = "[" + ", ".join(_show(v, limit) for v in value) + "]"
    elif isinstance(value, Mapping):
        s = "{" + ", ".join(f"{k}: {_show(v, limit)}" for k, v in value.items()) + "}"
    else:
        s = str(value)
    return shorten(s, limit)


def _num(x):
    """A number for messages: ``1.0`` -> ``1``, ``0.08`` -> ``0.08``."""
    return f"{x:g}"


def _kind(value):
    """``"a list"``, ``"a mapping"``... for wrong-container messages."""
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return _show(value)


# --------------------------------------------------------------------------
# Where values came from: file lines and command-line overrides
# --------------------------------------------------------------------------

class _Where:
    """Maps key paths to their file line or to the override that set them."""

    def __init__(self, lines=None, origins=None):
        self.lines = dict(lines or {})       # path tuple -> 1-based line
        self.origins = dict(origins or {})   # path tuple -> "--set a.b=c"

    def locate(self, path, missing=False):
        """``(line, origin)`` for ``path``; at most one of them is not None.

        An override owns everything below the path it set (it may have
        replaced a whole section), so the longest overridden prefix wins.
        A missing key has no line of its own: point at its parent's.
        """
        if path is None:
            return None, None
        for n in range(len(path), 0, -1):
            if path[:n] in self.origins:
                return None, self.origins[path[:n]]
        if path in self.lines:
            return self.lines[path], None
        if missing:
            for n in range(len(path) - 1, 0, -1):
                if path[:n] in self.lines:
                    return self.lines[path[:n]], None
        return None, None


class _Ctx:
    """Validation state: the source, where values came from, explicit keys."""

    def __init__(self, file, where):
        self.file = file
        self.where = where
        self.explicit = set()    # key paths present in the file or set by an override

    def fail(self, path, problem, expected=None, value=_NOVALUE, text=None, missing=False):
        line, origin = self.where.locate(path, missing=missing)
        raise CaseError(self.file, _dotted(path) or None, problem, expected, value=value,
                        line=line, origin=origin, text=text)

    def bad(self, path, value, expected):
        """The common case: ``<key>: got <value>; expected <expected>``."""
        self.fail(path, f"got {_show(value)}", expected, value=value)


# --------------------------------------------------------------------------
# Field checkers
# --------------------------------------------------------------------------

class _Spec:
    """Checks and converts one value; ``expected(path)`` describes what is accepted."""

    def expected(self, path):
        raise NotImplementedError

    def convert(self, ctx, path, value):
        raise NotImplementedError


class _Int(_Spec):
    """An integer from ``min`` to ``max``, or one of the words ``also``.

    ``why`` says where ``max`` comes from; the error above it states both.
    """

    def __init__(self, min=None, max=None, why="", also=()):
        self.min, self.max, self.why = min, max, why
        self.also = tuple(also)

    def expected(self, path):
        text = "an integer" + (f" >= {self.min}" if self.min is not None else "")
        return text + "".join(f" or {word!r}" for word in self.also)

    def convert(self, ctx, path, value):
        if isinstance(value, str) and value in self.also:
            return value
        # bool is an int in Python, and 256.0 is not what an integer field
        # means: both are rejected rather than silently converted.
        if isinstance(value, bool) or not isinstance(value, numbers.Integral):
            ctx.bad(path, value, self.expected(path))
        if self.min is not None and value < self.min:
            ctx.bad(path, value, self.expected(path))
        if self.max is not None and value > self.max:
            ctx.bad(path, value, f"an integer <= {self.max}"
                    + "".join(f" or {word!r}" for word in self.also)
                    + (f" ({self.why})" if self.why else ""))
        return int(value)


# PyYAML follows YAML 1.1, where ``1e-8`` (no dot) is a string, not a float;
# numeric strings of this shape are accepted by float fields.
_FLOAT_STRING = re.compile(r"[+-]?(\d+\.?\d*|\.\d+)([eE][+-]?\d+)?\Z")


class _Float(_Spec):
    def __init__(self, gt=None, ge=None, lt=None, le=None):
        self.gt, self.ge, self.lt, self.le = gt, ge, lt, le

    def expected(self, path):
        lower = (("<", ">", self.gt) if self.gt is not None else
                 ("<=", ">=", self.ge) if self.ge is not None else None)
        upper = (("<", self.lt) if self.lt is not None else
                 ("<=", self.le) if self.le is not None else None)
        if lower and upper:
            name = path[-1] if path and isinstance(path[-1], str) else "x"
            return f"a number with {_num(lower[2])} {lower[0]} {name} {upper[0]} {_num(upper[1])}"
        if lower:
            return f"a number {lower[1]} {_num(lower[2])}"
        if upper:
            return f"a number {upper[0]} {_num(upper[1])}"
        return "a number"

    def convert(self, ctx, path, value):
        try:
            if isinstance(value, str) and _FLOAT_STRING.match(value.strip()):
                x = float(value)
            elif isinstance(value, numbers.Real) and not isinstance(value, bool):
                x = float(value)
            else:
                x = None
        except OverflowError:               # an integer such as 10**400
            x = math.inf
        if x is None:
            ctx.bad(path, value, self.expected(path))
        if not math.isfinite(x):
            ctx.bad(path, value, "a finite " + self.expected(path)[2:])
        if ((self.gt is not None and not x > self.gt) or (self.ge is not None and not x >= self.ge)
                or (self.lt is not None and not x < self.lt)
                or (self.le is not None and not x <= self.le)):
            ctx.bad(path, value, self.expected(path))
        return x


class _Str(_Spec):
    def __init__(self, what="a non-empty string", forbid=""):
        self.what = what
        self.forbid = forbid

    def expected(self, path):
        return self.what

    def convert(self, ctx, path, value):
        # YAML turns `name: 2024` into an int; saying so beats a surprise
        # conversion, and quoting fixes it.
        if not isinstance(value, str):
            ctx.bad(path, value, self.what + " (quote it in YAML if it looks like a number)")
        if not value.strip() or any(c in value for c in self.forbid) or value in (".", ".."):
            ctx.bad(path, value, self.what)
        return value


class _Enum(_Spec):
    def __init__(self, choices):
        self.choices = tuple(choices)

    def expected(self, path):
        return "one of: " + ", ".join(self.choices)

    def convert(self, ctx, path, value):
        if isinstance(value, str) and value in self.choices:
            return value
        expected = self.expected(path)
        if isinstance(value, str):
            near = difflib.get_close_matches(value.lower(), self.choices, n=1, cutoff=0.6)
            if near:
                expected += f" (did you mean {near[0]!r}?)"
        ctx.bad(path, value, expected)


class _Precision(_Enum):
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


class _Optional(_Spec):
    """``null`` or the inner value."""

    def __init__(self, inner):
        self.inner = inner

    def expected(self, path):
        return "null or " + self.inner.expected(path)

    def convert(self, ctx, path, value):
        return None if value is None else self.inner.convert(ctx, path, value)


class _Tuple(_Spec):
    """A list of exactly ``n`` items, stored as a tuple."""

    def __init__(self, item, n, what):
        # ``n``: the length, or a tuple of the lengths allowed (2-D or 3-D).
        self.item, self.n, self.what = item, n if isinstance(n, tuple) else (n,), what

    def expected(self, path):
        return self.what

    def convert(self, ctx, path, value):
        if not isinstance(value, (list, tuple)) or len(value) not in self.n:
            ctx.bad(path, value, self.what)
        # Item errors name the whole list: "[0.5, -1]" reads better than "[1]".
        out = []
        for i, v in enumerate(value):
            try:
                out.append(self.item.convert(ctx, path + (i,), v))
            except CaseError:
                out = None
                break
        if out is None:     # raised outside the handler: no chained traceback
            ctx.bad(path, value, self.what)
        return tuple(out)


class _List(_Spec):
    """A list of any length (``null`` = empty), stored as a tuple."""

    def __init__(self, item, what):
        self.item, self.what = item, what

    def expected(self, path):
        return self.what

    def convert(self, ctx, path, value):
        if value is None:
            return ()
        if not isinstance(value, (list, tuple)):
            ctx.fail(path, f"got {_kind(value)}", self.what, value=value)
        return tuple(self.item.convert(ctx, path + (i,), v) for i, v in enumerate(value))


class _Section(_Spec):
    """A mapping checked field by field against the dataclass ``cls``.

    Keys are the dataclass fields that carry a ``spec``; ``defaults``
    replaces some dataclass defaults (the gas has other defaults than the
    liquid).  ``null`` or an absent section means "all defaults".
    """

    def __init__(self, cls, defaults=None):
        self.cls = cls
        self.defaults = dict(defaults or {})

    def fields(self):
        return [f for f in dataclasses.fields(self.cls) if "spec" in f.metadata]

    def keys(self):
        return [f.name for f in self.fields()]

    def expected(self, path):
        return "a mapping with keys " + ", ".join(self.keys())

    def convert(self, ctx, path, value):
        if value is None:
            value = {}
        if not isinstance(value, Mapping):
            expected = self.expected(path)
            # `preconditioner: none` is a natural slip for `{type: none}`.
            type_field = next((f for f in self.fields() if f.name == "type"), None)
            if (type_field is not None and isinstance(value, str)
                    and value in type_field.metadata["spec"].choices):
                expected = f"a mapping, e.g. {{type: {value}}}"
            ctx.fail(path, f"got {_kind(value)}", expected, value=value)
        keys = self.keys()
        # Unknown keys first: a misspelt key usually also makes a required
        # one "missing", and the typo is the useful message.
        for k in value:
            if not isinstance(k, str) or k not in keys:
                # Short keys (nx, ly) differ by one letter at ratio 0.5.
                near = difflib.get_close_matches(str(k), keys, n=1,
                                                 cutoff=0.5 if len(str(k)) <= 3 else 0.6)
                allowed = ", ".join(keys)
                text = (f"unknown key; did you mean {near[0]!r}? (expected one of: {allowed})"
                        if near else f"unknown key; expected one of: {allowed}")
                ctx.fail(path + (str(k),), "unknown key", f"one of: {allowed}",
                         value=value[k], text=text)
        kwargs = {}
        for f in self.fields():
            p = path + (f.name,)
            spec = f.metadata["spec"]
            if f.name in value:
                ctx.explicit.add(p)
                kwargs[f.name] = spec.convert(ctx, p, value[f.name])
            elif f.name in self.defaults:
                kwargs[f.name] = self.defaults[f.name]
            elif isinstance(spec, _Section):
                kwargs[f.name] = spec.convert(ctx, p, None)
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                ctx.fail(p, "missing required key", spec.expected(p), missing=True)
        return self.cls(**kwargs)


def _f(spec, default=dataclasses.MISSING, factory=dataclasses.MISSING, doc=""):
    """A dataclass field that carries its checker."""
    return field(default=default, default_factory=factory, metadata={"spec": spec, "doc": doc})


_POINT = _Tuple(_Float(), (2, 3), "two numbers [x, y] (three, [x, y, z], in 3-D)")
# Cells per axis: no bound of their own, MAX_CELLS bounds their product (_check_limits).
_AXIS = _Int(min=4)
# Lattice sides and random bubbles: MAX_CIRCLES in all (checked with the grid).
_CIRCLES = _Int(min=1, max=MAX_CIRCLES, why="bubbles and droplets in all")
# Counts that must divide a grid axis (checked with the grid).
_AXIS_PART = dict(max=MAX_AXIS_CELLS, why="a part of one grid axis")


# --------------------------------------------------------------------------
# The schema
# --------------------------------------------------------------------------

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

    nx: int = _f(_AXIS, 128)
    ny: int = _f(_AXIS, 128)
    lx: float = _f(_Float(gt=0), 1.0)
    ly: float = _f(_Float(gt=0), 1.0)
    nz: Optional[int] = _f(_Optional(_AXIS), None,
                           doc="cells in z: a 3-D grid (z vertical); null: 2-D (y vertical)")
    lz: Optional[float] = _f(_Optional(_Float(gt=0)), None, doc="domain height in 3-D (null: 1.0)")

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

    density: float = _f(_Float(gt=0), 1000.0)
    viscosity: float = _f(_Float(gt=0), 1.0e-3)


_GAS = {"density": 1.0, "viscosity": 1.8e-5}


@dataclass(frozen=True)
class FluidsConfig(_Node):
    """``fluids``: the liquid (water by default) and the gas (air)."""

    liquid: FluidConfig = _f(_Section(FluidConfig), factory=FluidConfig)
    gas: FluidConfig = _f(_Section(FluidConfig, _GAS), factory=lambda: FluidConfig(**_GAS))


@dataclass(frozen=True)
class PhysicsConfig(_Node):
    """``physics``: gravity (m/s^2), acting along -y."""

    gravity: float = _f(_Float(ge=0), 9.81)
    surface_tension: float = _f(_Float(ge=0), 0.0, doc="N/m, between liquid and gas (flow)")


@dataclass(frozen=True)
class CircleConfig(_Node):
    """A bubble (gas) or droplet (liquid): centre ``(x, y)`` (``(x, y, z)``
    in 3-D) and radius (m)."""

    center: Tuple[float, ...] = _f(_POINT)
    radius: float = _f(_Float(gt=0))


@dataclass(frozen=True)
class LatticeConfig(_Node):
    """``geometry.bubble_lattice``: ``columns x rows`` equal bubbles
    (``columns x rows x layers`` spheres in 3-D).

    Centres are spread evenly over ``x_range`` and ``y_range`` (and
    ``z_range``; ends included); see :func:`lattice_centres`.
    """

    columns: int = _f(_CIRCLES)
    rows: int = _f(_CIRCLES)
    radius: float = _f(_Float(gt=0))
    x_range: Tuple[float, float] = _f(_Tuple(_Float(), 2, "two numbers [x0, x1] with x0 <= x1"))
    y_range: Tuple[float, float] = _f(_Tuple(_Float(), 2, "two numbers [y0, y1] with y0 <= y1"))
    layers: Optional[int] = _f(_Optional(_CIRCLES), None, doc="3-D: spheres along z")
    z_range: Optional[Tuple[float, float]] = _f(
        _Optional(_Tuple(_Float(), 2, "two numbers [z0, z1] with z0 <= z1")), None,
        doc="3-D: the heights the layers spread over")


@dataclass(frozen=True)
class RandomBubblesConfig(_Node):
    """``geometry.random_bubbles``: ``count`` non-overlapping bubbles, reproducible
    from ``seed``, in ``region = [x0, x1, y0, y1]`` (``[x0, x1, y0, y1, z0,
    z1]`` in 3-D; None: the whole domain)."""

    count: int = _f(_CIRCLES)
    radius: float = _f(_Float(gt=0))
    seed: int = _f(_Int(min=0, max=MAX_SEED, why="a signed 64-bit integer"), 0)
    min_gap: float = _f(_Float(ge=0), 0.0)
    region: Optional[Tuple[float, ...]] = _f(
        _Optional(_Tuple(_Float(), (4, 6), "null or four numbers [x0, x1, y0, y1] (six in 3-D, "
                                           "[x0, x1, y0, y1, z0, z1])")), None)


@dataclass(frozen=True)
class GeometryConfig(_Node):
    """``geometry``: where the liquid and the gas are at the start."""

    free_surface: Optional[float] = _f(_Optional(_Float()), None,
                                       doc="liquid below this height; None: liquid everywhere")
    bubbles: Tuple[CircleConfig, ...] = _f(
        _List(_Section(CircleConfig), "a list of {center: [x, y], radius: r}"), ())
    droplets: Tuple[CircleConfig, ...] = _f(
        _List(_Section(CircleConfig), "a list of {center: [x, y], radius: r}"), ())
    bubble_lattice: Optional[LatticeConfig] = _f(_Optional(_Section(LatticeConfig)), None)
    random_bubbles: Optional[RandomBubblesConfig] = _f(_Optional(_Section(RandomBubblesConfig)), None)


@dataclass(frozen=True)
class OperatorConfig(_Node):
    """``operator``: face-density rule and how the 5-point operator is stored."""

    face_density: str = _f(_Enum(FACE_DENSITIES), "arithmetic")
    storage: str = _f(_Enum(STORAGES), "diagonals")


@dataclass(frozen=True)
class PreconditionerConfig(_Node):
    """``solver.preconditioner``.  ``type``'s default depends on the method."""

    type: str = _f(_Enum(PRECONDITIONERS), DEFAULT_PRECONDITIONER["pcg"])
    block_lines: int = _f(_Int(min=2, **_AXIS_PART), 2, doc="block_ic: grid lines per IC block")
    degree: int = _f(_Int(min=1, max=MAX_DEGREE,
                          why="smoothing steps per visit; more cost more than they gain"), 2,
                     doc="multigrid: Chebyshev smoothing steps per visit")
    ratio: float = _f(_Float(gt=1), 4.0,
                      doc="multigrid: the smoother targets D^-1 A's eigenvalues in [2/ratio, 2]")
    scale: float = _f(_Float(gt=0, lt=2), 1.8,
                      doc="multigrid: over-correction of the coarse-grid correction")
    coarsest: int = _f(_Int(min=1, max=MAX_COARSEST_CELLS,
                            why="the coarsest level is solved through a dense inverse"), 512,
                       doc="multigrid: cells of the coarsest level at most (solved directly)")
    min_side: int = _f(_Int(min=1, max=MAX_MIN_SIDE,
                            why="it holds back levels of at most that many cells only"), 16,
                       doc="multigrid: no level narrower than this (levels of up to 1024 cells)")
    cycle_precision: str = _f(_Enum(("float64", "float32")), "float32",
                              doc="multigrid: the cycle's arithmetic (float32 halves its bytes)")
    w_levels: object = _f(_Int(min=0, max=MAX_W_LEVELS, also=("auto",),
                              why="more levels than any grid has"), "auto",
                          doc="multigrid: top levels that visit their coarse level twice (W); "
                              "0: a V-cycle; auto: those whose coarse level has at least "
                              "2^18 cells")

    def options(self):
        """Every preconditioner option of the section (the solver passes on
        those its preconditioner's registry entry lists)."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self) if f.name != "type"}


@dataclass(frozen=True)
class DeflationConfig(_Node):
    """``solver.deflation``.  ``type``'s default depends on the method."""

    type: str = _f(_Enum(DEFLATIONS), DEFAULT_DEFLATION["pcg"])
    subdomains: Optional[Tuple[int, int]] = _f(
        _Optional(_Tuple(_Int(min=1, **_AXIS_PART), (2, 3),
                         "two integers [px, py] >= 1 (three in 3-D)")), None,
        doc="subdomain counts [px, py] ([px, py, pz] in 3-D); null: from cells_per_subdomain")
    cells_per_subdomain: Optional[int] = _f(
        _Optional(_Int(min=1, **_AXIS_PART)), None,
        doc=f"subdomain width in cells (null: {DEFAULT_CELLS_PER_SUBDOMAIN}, 8 in 3-D, wider past "
            f"{_registry.DEFAULT_MAX_SUBDOMAINS} subdomains); the default way, so refining "
            "the grid refines the deflation")
    stripes: int = _f(_Int(min=1, **_AXIS_PART), 16)

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


_ITERATIONS = _Int(min=1, max=MAX_ITERATIONS, why="the residual history is an array of maxiter")


@dataclass(frozen=True)
class SolverConfig(_Node):
    """``solver``: Krylov method, preconditioner, deflation, stopping."""

    method: str = _f(_Enum(METHODS), "pcg")
    variant: str = _f(_Enum(VARIANTS), "adef2", doc="deflation variant (dpcg only)")
    preconditioner: PreconditionerConfig = _f(_Section(PreconditionerConfig),
                                              factory=PreconditionerConfig)
    deflation: DeflationConfig = _f(_Section(DeflationConfig), factory=DeflationConfig)
    rtol: float = _f(_Float(gt=0, lt=1), 1.0e-8)
    atol: float = _f(_Float(ge=0), 0.0)
    maxiter: int = _f(_ITERATIONS, 10000)
    check_every: int = _f(_ITERATIONS, 10, doc="iterations between host-side convergence checks")


@dataclass(frozen=True)
class OutputConfig(_Node):
    """``output``: where results are written.

    ``interval``: simulated time (s) between field snapshots in ``mode: flow``
    (each snapshot is also a restart checkpoint); null: start and end only.
    """

    directory: str = _f(_Str("a non-empty directory path"), "outputs")
    interval: Optional[float] = _f(_Optional(_Float(gt=0)), None)


@dataclass(frozen=True)
class TimeConfig(_Node):
    """``time`` (mode flow): end time (s) and time-step control.

    The step is the smallest of the convective (``cfl``), viscous, capillary
    and gravity limits and ``dt_max``; ``dt`` fixes it instead.
    """

    end: float = _f(_Float(gt=0), 1.0)
    cfl: float = _f(_Float(gt=0, le=1), 0.25)
    dt: Optional[float] = _f(_Optional(_Float(gt=0)), None, doc="fixed time step (s)")
    dt_max: Optional[float] = _f(_Optional(_Float(gt=0)), None)


@dataclass(frozen=True)
class BoundariesConfig(_Node):
    """``boundaries`` (mode flow): wall condition of each side (x: left,
    right; y: bottom, top in 2-D, front, back in 3-D; z: bottom, top)."""

    left: str = _f(_Enum(WALL_CONDITIONS), "no_slip")
    right: str = _f(_Enum(WALL_CONDITIONS), "no_slip")
    bottom: str = _f(_Enum(WALL_CONDITIONS), "no_slip")
    top: str = _f(_Enum(WALL_CONDITIONS), "no_slip")
    front: str = _f(_Enum(WALL_CONDITIONS), "no_slip", doc="3-D: the wall at y = 0")
    back: str = _f(_Enum(WALL_CONDITIONS), "no_slip", doc="3-D: the wall at y = ly")


#: How the interface is carried (mode flow): the level set alone, or coupled
#: with a conservative volume of fluid (CLSVOF: the gas volume kept to
#: round-off; :mod:`bubbleflow.flow.vof`).
INTERFACE_METHODS = ("levelset", "clsvof")


@dataclass(frozen=True)
class LevelSetConfig(_Node):
    """``levelset`` (mode flow): the interface method and the reinitialisation schedule."""

    method: str = _f(_Enum(INTERFACE_METHODS), "levelset",
                     doc="levelset, or clsvof: a volume fraction advected beside the level set "
                         "conserves the gas volume, the level set is rebuilt from it every step")
    reinit_every: int = _f(_Int(min=0, max=MAX_STEPS, why="the most steps of a flow"), 5,
                           doc="steps between reinitialisations; 0: never "
                               "(levelset; clsvof rebuilds every step)")
    reinit_iterations: int = _f(_Int(min=1, max=MAX_REINIT_ITERATIONS,
                                    why="each is a pass over the grid; the flow reads the "
                                        "distance a few cells out"), 4)


#: How gravity enters the momentum equation (mode flow).
GRAVITY_FORMS = ("reduced", "volumetric")
#: How the viscous stress is advanced (mode flow); ``auto`` resolves per case
#: (:func:`viscosity_scheme`).
VISCOSITY_SCHEMES = ("auto", "implicit", "explicit")


@dataclass(frozen=True)
class MomentumConfig(_Node):
    """``momentum`` (mode flow): how gravity and viscosity enter the step.

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
    limit is smaller anyway (:func:`viscosity_scheme`).
    """

    gravity: str = _f(_Enum(GRAVITY_FORMS), "reduced")
    viscosity: str = _f(_Enum(VISCOSITY_SCHEMES), "auto")
    viscous_rtol: float = _f(_Float(gt=0, lt=1), 1.0e-10,
                             doc="relative tolerance of the implicit viscous solves")


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
    name: str = _f(_Str("a non-empty name without '/' or '\\' (it names the output file)",
                        forbid="/\\\0"), "")
    mode: str = _f(_Enum(MODES), "pressure")
    backend: str = _f(_Enum(BACKENDS), "auto")
    precision: str = _f(_Precision(PRECISIONS), "float64")
    grid: GridConfig = _f(_Section(GridConfig), factory=GridConfig)
    fluids: FluidsConfig = _f(_Section(FluidsConfig), factory=FluidsConfig)
    physics: PhysicsConfig = _f(_Section(PhysicsConfig), factory=PhysicsConfig)
    geometry: GeometryConfig = _f(_Section(GeometryConfig), factory=GeometryConfig)
    operator: OperatorConfig = _f(_Section(OperatorConfig), factory=OperatorConfig)
    solver: SolverConfig = _f(_Section(SolverConfig), factory=SolverConfig)
    output: OutputConfig = _f(_Section(OutputConfig), factory=OutputConfig)
    time: TimeConfig = _f(_Section(TimeConfig), factory=TimeConfig)
    boundaries: BoundariesConfig = _f(_Section(BoundariesConfig), factory=BoundariesConfig)
    levelset: LevelSetConfig = _f(_Section(LevelSetConfig), factory=LevelSetConfig)
    momentum: MomentumConfig = _f(_Section(MomentumConfig), factory=MomentumConfig)
    source: str = "<dict>"
    # Lines and overrides, for errors found later (CaseError.from_runtime).
    _where: Optional[_Where] = field(default=None, repr=False, compare=False)

    def to_yaml(self):
        """The resolved case as YAML text (loads back to an equal case)."""
        return yaml.safe_dump(self.to_dict(), sort_keys=False, default_flow_style=None)


# --------------------------------------------------------------------------
# Geometry helper shared with bubbleflow.mesh.levelset
# --------------------------------------------------------------------------

def first_difference(a, b, skip=(), _path=()):
    """First place where two nested case dicts differ.

    Returns ``(dotted key path, value in a, value in b)``, or None when they
    agree outside the key paths (tuples) in ``skip``.
    """
    if _path in skip:
        return None
    if isinstance(a, Mapping) and isinstance(b, Mapping):
        for k in list(a) + [k for k in b if k not in a]:
            d = first_difference(a.get(k), b.get(k), skip, _path + (k,))
            if d:
                return d
        return None
    return None if a == b else (".".join(map(str, _path)), a, b)


def lattice_centres(lattice):
    """Centres of a bubble lattice, bottom row first, left to right (in 3-D
    bottom layer first, then row by row).

    ``x = linspace(x0, x1, columns)`` (the midpoint when ``columns == 1``),
    likewise ``y`` over ``y_range`` and ``rows`` and, with ``layers``, ``z``
    over ``z_range``.

    Parameters
    ----------
    lattice : LatticeConfig or mapping
        With ``columns``, ``rows``, ``x_range`` and ``y_range`` (and
        ``layers``, ``z_range`` in 3-D).

    Returns
    -------
    list of (float, float) or (float, float, float)
    """
    import numpy as np

    get = lattice.get if isinstance(lattice, Mapping) else lambda k: getattr(lattice, k, None)

    def spread(rng, n):
        lo, hi = (float(v) for v in rng)
        n = int(n)
        return [0.5 * (lo + hi)] if n == 1 else [float(v) for v in np.linspace(lo, hi, n)]

    xs = spread(get("x_range"), get("columns"))
    ys = spread(get("y_range"), get("rows"))
    if get("layers") is None:
        return [(x, y) for y in ys for x in xs]
    zs = spread(get("z_range"), get("layers"))
    return [(x, y, z) for z in zs for y in ys for x in xs]


# --------------------------------------------------------------------------
# Reading, overriding, checking
# --------------------------------------------------------------------------

def _case_error(exc, key=None, origin=None):
    """A :class:`~.yaml_reader.YamlError` as the :class:`CaseError` it is to the user."""
    if exc.path is not None:
        key = _dotted(exc.path)
    return CaseError(exc.source, key, exc.problem, exc.expected, line=exc.line,
                     column=exc.column, origin=origin)


def read_yaml_file(path):
    """``(data, lines)`` of a YAML case or study file, read through the hardened reader.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    data : object
        The document (None when empty).
    lines : dict
        Key paths (``("grid", "nx")``) to 1-based lines.

    Raises
    ------
    CaseError
        The file cannot be read (missing, over :data:`MAX_CASE_BYTES`, not
        UTF-8) or is not usable YAML (see :func:`~.yaml_reader.load_yaml`).
    """
    file = os.fspath(path)
    try:
        text = read_text(file, limit=MAX_CASE_BYTES, what="YAML case file",
                         hint="case files are a few KiB; use random_bubbles or bubble_lattice "
                              "for many bubbles")
        return load_yaml(text, file, lines=True)
    except YamlError as exc:
        raise _case_error(exc) from None


def option_value(text, option):
    """A command-line value read as YAML, through the hardened reader.

    Parameters
    ----------
    text : str
        The value (``3`` of ``--configs multigrid(degree=3):none``).
    option : str
        The option, named in the error (``"--configs"``).

    Returns
    -------
    object

    Raises
    ------
    CaseError
        Longer than :data:`~.yaml_reader.MAX_OPTION_CHARS` or unusable YAML
        (see :func:`~.yaml_reader.load_yaml`); one line naming the option.
    """
    try:
        return load_yaml(text, option, limit=MAX_OPTION_CHARS)
    except YamlError as exc:
        raise CaseError(option, None, f"cannot parse value {_show(text, 40)} ({exc.problem})",
                        "a YAML value, e.g. 256, 1e-8, [8, 8], null") from None


def _apply_overrides(data, overrides, file):
    """Apply ``key.path=value`` overrides to a copy of ``data``.

    Returns ``(data, origins)`` where ``origins`` maps each path an override
    set (or created on the way) to the override's text.  Unknown keys are
    not rejected here: the validation does it, with the same message as for
    the file.

    Each override is a string ``"key.path=value"`` (value parsed as YAML) or
    a tuple ``(key_path, value[, label])`` (value used as is: the CLI's
    ``-o DIR`` must not turn a directory called ``2024`` into an int).
    """
    data = copy.deepcopy(data)
    origins = {}
    if isinstance(overrides, str):      # one override passed bare, not in a list
        overrides = [overrides]
    for item in overrides or ():
        if isinstance(item, str):
            label = f"--set {item.strip()}"
            key, sep, raw = item.partition("=")
            key = key.strip()
            if not sep or not key:
                raise CaseError(file, None, f"malformed override {shorten(repr(item))}",
                                "key.path=value, e.g. --set grid.nx=256", origin=label)
            if len(item) > MAX_OPTION_CHARS:
                raise CaseError(file, None, f"--set item of {len(item)} characters",
                                f"at most {MAX_OPTION_CHARS} (longer values belong in the "
                                "case file)", origin=label)
            try:
                value = load_yaml(raw, label, limit=MAX_OPTION_CHARS)
            except YamlError as exc:
                problem = exc.problem.replace("YAML syntax error: ", "")
                # (The override, named first, shows the value already.)
                raise CaseError(file, key, f"cannot parse value {_show(raw, 40)} ({problem})",
                                "a YAML value, e.g. 256, 1e-8, [8, 8], null",
                                origin=label) from None
        else:
            key, value, *rest = item
            label = rest[0] if rest else f"--set {key}={_show(value)}"
        path = _split_dotted(key)
        if path is None or isinstance(path[0], int):
            raise CaseError(file, None, f"malformed key path {shorten(repr(key))}",
                            "key.path=value, e.g. --set grid.nx=256 or "
                            "--set geometry.bubbles[0].radius=0.1", origin=label)

        def refuse(n, child):
            raise CaseError(file, _dotted(path), f"{_dotted(path[:n])} is {_kind(child)}",
                            "an existing list to index" if isinstance(path[n], int)
                            else "a section (mapping) to set a key in", origin=label)

        node = data
        for n, seg in enumerate(path[:-1]):
            if isinstance(seg, int):
                if seg >= len(node):
                    raise CaseError(file, _dotted(path), f"{_dotted(path[:n])} has no item {seg}",
                                    f"an index below {len(node)}", origin=label)
                child = node[seg]
            else:
                child = node.get(seg)
                if child is None and not isinstance(path[n + 1], int):
                    # `--set` may create sections absent from the file.
                    child = node[seg] = {}
                    origins[path[: n + 1]] = label
            if isinstance(path[n + 1], int) != isinstance(child, list) or not isinstance(
                    child, (list, dict)):
                refuse(n + 1, child)
            node = child
        last = path[-1]
        if isinstance(last, int):
            if last >= len(node):
                raise CaseError(file, _dotted(path), f"{_dotted(path[:-1])} has no item {last}",
                                f"an index below {len(node)}", origin=label)
        node[last] = value
        # This override replaces whatever earlier ones set below it.
        for p in [p for p in origins if p[: len(path)] == path]:
            del origins[p]
        origins[path] = label
    return data, origins


def _check_case(case, ctx):
    """Cross-field checks and method-dependent defaults; returns the final case."""
    rep = dataclasses.replace
    g, geo, s = case.grid, case.geometry, case.solver
    P = ("solver", "preconditioner", "type")
    D = ("solver", "deflation", "type")

    # A method the user did not write follows from what they did write: a
    # deflation (or its options) means dpcg, no preconditioner cg, else pcg.  (Studies
    # sweep solver.deflation.type over none, subdomains, ... this way.)
    M = ("solver", "method")
    if M not in ctx.explicit:
        method, _, _ = _registry.method_defaults(
            None, s.preconditioner.type if P in ctx.explicit else None,
            s.deflation.type if D in ctx.explicit else None,
            deflation_options=any(p[:2] == D[:2] for p in ctx.explicit))
        s = rep(s, method=method)
    # Method-dependent defaults: only keys the user did not write are filled.
    pc = s.preconditioner.type if P in ctx.explicit else DEFAULT_PRECONDITIONER[s.method]
    df = s.deflation.type if D in ctx.explicit else DEFAULT_DEFLATION[s.method]
    m = s.method
    for what, rule in _registry.method_violations(m, pc, df):
        path, value = (P, pc) if what == "preconditioner" else (D, df)
        ctx.fail(path, f"got {value!r} with method {m!r}", _RULE_EXPECTED[what, rule], value=value)
    s = rep(s, preconditioner=rep(s.preconditioner, type=pc), deflation=rep(s.deflation, type=df))

    _check_limits(case, ctx)
    if g.nz is not None:
        # 3-D stores the operator's face couplings unless the case asks for
        # the seven diagonals (three arrays against seven, the same apply).
        operator = case.operator
        if ("operator", "storage") not in ctx.explicit:
            operator = rep(operator, storage="matrix_free")
        return rep(case, solver=_check_3d(case, s, pc, df, ctx), operator=operator)
    _check_2d_only(case, ctx)
    lx, ly = g.lx, g.ly
    domain = f"[0, {_num(lx)}] x [0, {_num(ly)}]"
    slack = _WALL_SLACK * max(lx, ly)

    if geo.free_surface is not None and not 0 < geo.free_surface <= ly:
        ctx.bad(("geometry", "free_surface"), geo.free_surface,
                f"a height with 0 < h <= ly = {_num(ly)}, or null (liquid everywhere)")

    # In a flow the interface must not touch a wall (the wall conditions and
    # the level set would fight); keep at least one cell of liquid between.
    gap = max(lx / g.nx, ly / g.ny) if case.mode == "flow" else -slack

    def inside(path, x, y, r, what=""):
        if x - r < gap or x + r > lx - gap or y - r < gap or y + r > ly - gap:
            clear = " clear of the walls by at least one cell" if case.mode == "flow" else ""
            ctx.fail(path, f"got{what} centre ({_num(x)}, {_num(y)}) with radius {_num(r)}",
                     f"a circle inside the domain {domain}{clear}")

    for kind in ("bubbles", "droplets"):
        for i, c in enumerate(getattr(geo, kind)):
            inside(("geometry", kind, i), c.center[0], c.center[1], c.radius)

    lat = geo.bubble_lattice
    if lat is not None:
        for axis in ("x", "y"):
            lo, hi = getattr(lat, f"{axis}_range")
            if lo > hi:
                ctx.bad(("geometry", "bubble_lattice", f"{axis}_range"), [lo, hi],
                        f"two numbers [{axis}0, {axis}1] with {axis}0 <= {axis}1")
        for k, (x, y) in enumerate(lattice_centres(lat)):
            row, col = divmod(k, lat.columns)
            inside(("geometry", "bubble_lattice"), x, y, lat.radius,
                   f" (column {col + 1}, row {row + 1})")

    rb = geo.random_bubbles
    if rb is not None:
        if rb.region is None:
            if 2 * rb.radius > min(lx, ly):
                ctx.bad(("geometry", "random_bubbles", "radius"), rb.radius,
                        f"a radius that fits the domain {domain}")
        else:
            x0, x1, y0, y1 = rb.region
            path = ("geometry", "random_bubbles", "region")
            if not (x0 < x1 and y0 < y1):
                ctx.bad(path, list(rb.region), "[x0, x1, y0, y1] with x0 < x1 and y0 < y1")
            if x0 < -slack or x1 > lx + slack or y0 < -slack or y1 > ly + slack:
                ctx.bad(path, list(rb.region), f"a region inside the domain {domain}")
            if x1 - x0 < 2 * rb.radius or y1 - y0 < 2 * rb.radius:
                ctx.bad(path, list(rb.region),
                        f"a region at least 2 * radius = {_num(2 * rb.radius)} wide and tall")

    _check_overlaps(case, ctx, gap)
    if case.mode == "flow":
        _check_time(case, ctx)

    grid = f"a {g.nx} x {g.ny} grid"
    s = rep(s, deflation=_one_subdomain_form(s.deflation, ctx))
    if s.deflation.subdomains is not None:          # checked where written, used or not
        px, py = s.deflation.subdomains
        if s.deflation.cells_per_subdomain is not None:
            ctx.fail(("solver", "deflation", "subdomains"),
                     f"got [{px}, {py}] and cells_per_subdomain "
                     f"{s.deflation.cells_per_subdomain}",
                     "one of the two: subdomain counts, or their width in cells",
                     value=[px, py])
        if g.nx % px or g.ny % py:
            ctx.fail(("solver", "deflation", "subdomains"), f"got [{px}, {py}] for {grid}",
                     "divisors of nx and ny", value=[px, py])
    if df == "stripes" and g.ny % s.deflation.stripes:
        ctx.fail(("solver", "deflation", "stripes"), f"got {s.deflation.stripes} for {grid}",
                 f"a divisor of ny = {g.ny}", value=s.deflation.stripes)
    if pc == "block_ic":
        m_ = s.preconditioner.block_lines
        if g.ny % m_ or m_ >= g.ny:
            ctx.fail(("solver", "preconditioner", "block_lines"), f"got {m_} for {grid}",
                     f"a divisor of ny = {g.ny} smaller than ny (at least two blocks)", value=m_)
    return rep(case, solver=s)


def _check_2d_only(case, ctx):
    """A 2-D case: points of two coordinates, no 3-D wall names, no ``lz``."""
    geo = case.geometry
    for kind in ("bubbles", "droplets"):
        for i, c in enumerate(getattr(geo, kind)):
            if len(c.center) != 2:
                ctx.bad(("geometry", kind, i, "center"), list(c.center),
                        "two numbers [x, y] on a 2-D grid (grid.nz makes it 3-D)")
    d = case.solver.deflation
    if d.subdomains is not None and len(d.subdomains) != 2:
        ctx.bad(("solver", "deflation", "subdomains"), list(d.subdomains),
                "two integers [px, py] on a 2-D grid")
    for key in ("front", "back"):
        if getattr(case.boundaries, key) != "no_slip":      # (the default: a resolved case has it)
            ctx.fail(("boundaries", key), "a 3-D wall on a 2-D grid",
                     "no front or back wall in 2-D (grid.nz makes the grid 3-D)",
                     value=getattr(case.boundaries, key))
    if case.grid.lz is not None:
        ctx.bad(("grid", "lz"), case.grid.lz, "no lz without grid.nz (a 2-D grid)")
    lat = geo.bubble_lattice
    if lat is not None and (lat.layers is not None or lat.z_range is not None):
        ctx.fail(("geometry", "bubble_lattice", "layers" if lat.layers is not None else "z_range"),
                 "a 3-D lattice key on a 2-D grid", "columns, rows, x_range and y_range only "
                 "(grid.nz makes the grid 3-D)", value=lat.layers or lat.z_range)
    rb = geo.random_bubbles
    if rb is not None and rb.region is not None and len(rb.region) != 4:
        ctx.bad(("geometry", "random_bubbles", "region"), list(rb.region),
                "null or four numbers [x0, x1, y0, y1] on a 2-D grid")


def _check_3d(case, s, pc, df, ctx):
    """The checks of a 3-D case (``grid.nz`` given); returns the solver section."""
    g, geo = case.grid, case.geometry
    lengths = g.lengths
    if geo.free_surface is not None and not 0 < geo.free_surface <= lengths[2]:
        ctx.bad(("geometry", "free_surface"), geo.free_surface,
                f"a height with 0 < h <= lz = {_num(lengths[2])}, or null (liquid everywhere)")
    gap = max(lengths[a] / g.cells[a] for a in range(3)) if case.mode == "flow" else 0.0
    _check_spheres(case, ctx, gap)
    _check_lattice_3d(case, ctx, gap)
    _check_random_3d(case, ctx, gap)
    if case.mode == "flow":
        _check_time(case, ctx)
    d = s.deflation
    m = s.preconditioner.block_lines
    if pc == "block_ic" and g.ny % m:
        ctx.fail(("solver", "preconditioner", "block_lines"), f"got {m} for ny = {g.ny}",
                 f"a divisor of ny = {g.ny} (3-D blocks: that many x-lines of a z-plane; "
                 "ny: whole planes)", value=m)
    if df == "stripes" and g.nz % d.stripes:
        ctx.fail(("solver", "deflation", "stripes"), f"got {d.stripes} for nz = {g.nz}",
                 f"a divisor of nz = {g.nz} (3-D stripes are layers along z)", value=d.stripes)
    s = dataclasses.replace(s, deflation=_one_subdomain_form(d, ctx))
    counts = s.deflation.subdomains
    if counts is not None:
        if len(counts) != 3 or any(n % p for n, p in zip(g.cells, counts)):
            ctx.fail(("solver", "deflation", "subdomains"),
                     f"got {list(counts)} for a {' x '.join(map(str, g.cells))} grid",
                     "three integers [px, py, pz] dividing nx, ny and nz", value=list(counts))
        if s.deflation.cells_per_subdomain is not None:
            ctx.fail(("solver", "deflation", "subdomains"),
                     f"got {list(counts)} and cells_per_subdomain {s.deflation.cells_per_subdomain}",
                     "one of the two: subdomain counts, or their width in cells", value=list(counts))
    return s


def _inside_box(centre, r, lengths, gap):
    return all(gap <= x - r and x + r <= v - gap for x, v in zip(centre, lengths))


def _check_spheres(case, ctx, gap):
    """3-D ``bubbles`` and ``droplets``: three coordinates, inside the box,
    apart from each other, bubbles under the free surface, droplets in gas."""
    geo, lengths = case.geometry, case.grid.lengths
    fs = geo.free_surface
    domain = " x ".join(f"[0, {_num(v)}]" for v in lengths)
    clear = " clear of the walls by at least one cell" if case.mode == "flow" else ""
    spheres = []
    for kind in ("bubbles", "droplets"):
        for i, c in enumerate(getattr(geo, kind)):
            path = ("geometry", kind, i)
            if len(c.center) != 3:
                ctx.bad(path + ("center",), list(c.center), "three numbers [x, y, z] on a 3-D grid")
            if not _inside_box(c.center, c.radius, lengths, gap):
                ctx.fail(path, f"got centre {list(c.center)} with radius {_num(c.radius)}",
                         f"a sphere inside the domain {domain}{clear}")
            if kind == "bubbles" and fs is not None and c.center[2] + c.radius > fs - gap:
                ctx.fail(path, f"got centre {list(c.center)} with radius {_num(c.radius)}, "
                         f"reaching the free surface at z = {_num(fs)}",
                         f"a bubble below the free surface (z + radius <= {_num(fs - gap)})")
            spheres.append((path, kind, c))
    for i, (path, kind, a) in enumerate(spheres):
        for _, other, b in spheres[:i]:
            if kind == other and math.dist(a.center, b.center) < a.radius + b.radius + gap:
                ctx.fail(path, f"got centre {list(a.center)} with radius {_num(a.radius)}, "
                         f"overlapping the sphere at {list(b.center)}",
                         "spheres apart from each other" + (" by at least one cell" if gap else ""))
    for path, kind, d in spheres:
        in_layer = fs is not None and d.center[2] - d.radius >= fs + gap
        in_bubble = any(math.dist(d.center, b.center) <= b.radius - d.radius - gap
                        for _, k, b in spheres if k == "bubbles")
        if kind == "droplets" and not (in_layer or in_bubble):
            ctx.fail(path, f"got centre {list(d.center)} with radius {_num(d.radius)}, not in gas",
                     "a droplet in the gas above the free surface or inside a bubble")


def _check_lattice_3d(case, ctx, gap):
    """A 3-D ``bubble_lattice``: layers and z_range given, spheres inside the
    box, apart, under the free surface and apart from the explicit bubbles."""
    lat, geo, lengths = case.geometry.bubble_lattice, case.geometry, case.grid.lengths
    if lat is None:
        return
    path = ("geometry", "bubble_lattice")
    for key in ("layers", "z_range"):
        if getattr(lat, key) is None:
            ctx.fail(path + (key,), "missing on a 3-D grid",
                     "layers (spheres along z) and z_range [z0, z1] in 3-D")
    counts = (lat.columns, lat.rows, lat.layers)
    for axis, rng, n in zip("xyz", (lat.x_range, lat.y_range, lat.z_range), counts):
        if rng[0] > rng[1]:
            ctx.bad(path + (f"{axis}_range",), list(rng),
                    f"two numbers [{axis}0, {axis}1] with {axis}0 <= {axis}1")
        if n > 1 and (rng[1] - rng[0]) / (n - 1) < 2 * lat.radius + gap:
            ctx.fail(path + (f"{axis}_range",), f"got {list(rng)} for {n} spheres of radius "
                     f"{_num(lat.radius)}", "spheres apart from each other"
                     + (" by at least one cell" if gap else ""), value=list(rng))
    corners = [(lat.x_range[i], lat.y_range[j], lat.z_range[k])
               for i in (0, 1) for j in (0, 1) for k in (0, 1)]
    if not all(_inside_box(c, lat.radius, lengths, gap) for c in corners):
        ctx.fail(path, f"got spheres of radius {_num(lat.radius)} over x {list(lat.x_range)}, "
                 f"y {list(lat.y_range)}, z {list(lat.z_range)}",
                 "spheres inside the domain" + (" clear of the walls by at least one cell"
                                                if gap else ""))
    fs = geo.free_surface
    if fs is not None and max(lat.z_range) + lat.radius > fs - gap:
        ctx.fail(path + ("z_range",), f"got a top layer at z = {_num(max(lat.z_range))} with "
                 f"radius {_num(lat.radius)}, reaching the free surface at {_num(fs)}",
                 f"spheres below the free surface (z1 + radius <= {_num(fs - gap)})",
                 value=list(lat.z_range))
    centres = lattice_centres(lat)
    for i, b in enumerate(geo.bubbles):
        if any(math.dist(b.center, c) < b.radius + lat.radius + gap for c in centres):
            ctx.fail(("geometry", "bubbles", i), f"got centre {list(b.center)}, overlapping the "
                     "bubble lattice", "bubbles apart from the lattice's")


def _check_random_3d(case, ctx, gap):
    """3-D ``random_bubbles``: a region of six numbers inside the box and
    under the free surface, filled at most to :data:`MAX_RANDOM_FILL`."""
    rb, lengths = case.geometry.random_bubbles, case.grid.lengths
    if rb is None:
        return
    path = ("geometry", "random_bubbles", "region")
    if rb.region is not None and len(rb.region) != 6:
        ctx.bad(path, list(rb.region), "null or six numbers [x0, x1, y0, y1, z0, z1] in 3-D")
    region = rb.region or (0.0, lengths[0], 0.0, lengths[1], 0.0, lengths[2])
    spans = [(region[2 * a], region[2 * a + 1]) for a in range(3)]
    if any(hi - lo < 2 * rb.radius for lo, hi in spans) or any(
            lo < -1e-12 or hi > v + 1e-12 for (lo, hi), v in zip(spans, lengths)):
        ctx.bad(path, list(region), f"a region inside the domain, at least 2 * radius = "
                f"{_num(2 * rb.radius)} across along every axis")
    fs = case.geometry.free_surface
    if fs is not None and spans[2][1] > fs - gap:
        ctx.fail(path, f"got {_show(list(region))}, reaching z = {_num(spans[2][1])} above the "
                 f"free surface at {_num(fs)}", f"a region with z1 <= {_num(fs - gap)}",
                 value=rb.region)
    volume = math.prod(hi - lo for lo, hi in spans)
    need = rb.count * 4.0 / 3.0 * math.pi * (rb.radius + 0.5 * rb.min_gap) ** 3
    if need > MAX_RANDOM_FILL * volume:
        ctx.fail(("geometry", "random_bubbles", "count"),
                 f"got {rb.count} spheres of radius {_num(rb.radius)} filling {need / volume:.0%} "
                 "of their region", f"at most {MAX_RANDOM_FILL:.0%} of it (random placement "
                 "jams beyond)", value=rb.count)


def _one_subdomain_form(d, ctx):
    """An override of ``subdomains`` or ``cells_per_subdomain`` replaces the
    other form written in the file (``--set solver.deflation.subdomains=[4,4]``
    on a case with ``cells_per_subdomain``); both in one place stay an error."""
    if d.subdomains is None or d.cells_per_subdomain is None:
        return d
    S = ("solver", "deflation", "subdomains")
    C = ("solver", "deflation", "cells_per_subdomain")
    by_override = {p: ctx.where.locate(p)[1] is not None for p in (S, C)}
    if by_override[S] and not by_override[C]:
        return dataclasses.replace(d, cells_per_subdomain=None)
    if by_override[C] and not by_override[S]:
        return dataclasses.replace(d, subdomains=None)
    return d


def _has_gas(geo):
    """Whether the geometry puts any gas in the domain (else liquid only)."""
    return bool(geo.free_surface is not None or geo.bubbles or geo.droplets
                or geo.bubble_lattice is not None or geo.random_bubbles is not None)


def _check_limits(case, ctx):
    """Sizes and physical magnitudes the numerics can represent (see MAX_CELLS...)."""
    g, fl, ph, geo = case.grid, case.fluids, case.physics, case.geometry
    cells = math.prod(g.cells)
    if cells > MAX_CELLS:
        ctx.fail(("grid",), f"got {' x '.join(map(str, g.cells))} = {cells:.3g} cells",
                 f"at most {MAX_CELLS} cells (the 5-point matrix has int32 CSR indices)",
                 value=cells)
    lo, hi = LENGTH
    for key in ("lx", "ly", "lz"):
        v = getattr(g, key)
        if v is not None and not lo <= v <= hi:
            ctx.bad(("grid", key), v, f"a length between {_num(lo)} and {_num(hi)} m")
    lo, hi = MAGNITUDE
    for fluid in ("liquid", "gas"):
        for key, unit in (("density", "kg/m^3"), ("viscosity", "Pa s")):
            v = getattr(getattr(fl, fluid), key)
            if not lo <= v <= hi:
                ctx.bad(("fluids", fluid, key), v, f"a {key} between {_num(lo)} and "
                        f"{_num(hi)} {unit} (beyond, float64 over- or underflows)")
    for key in ("gravity", "surface_tension"):
        v = getattr(ph, key)
        if v > hi:
            ctx.bad(("physics", key), v, f"a number between 0 and {_num(hi)}")
    lat = geo.bubble_lattice
    n_circles = (len(geo.bubbles) + len(geo.droplets)
                 + (lat.columns * lat.rows * (lat.layers or 1 if g.nz is not None else 1)
                    if lat is not None else 0)
                 + (geo.random_bubbles.count if geo.random_bubbles is not None else 0))
    if n_circles > MAX_CIRCLES:
        ctx.fail(("geometry",), f"got {n_circles} bubbles and droplets",
                 f"at most {MAX_CIRCLES} (the level set is built circle by circle)",
                 value=n_circles)
    rho_l, rho_g = fl.liquid.density, fl.gas.density
    contrast = max(rho_l, rho_g) / min(rho_l, rho_g)
    # Only where both fluids are present: a liquid-only case has one density.
    if contrast > MAX_CONTRAST and _has_gas(geo):
        # Blame the density further (in decades) from its default.
        off_l, off_g = abs(math.log10(rho_l / 1000.0)), abs(math.log10(rho_g / 1.0))
        fluid, v = ("gas", rho_g) if off_g >= off_l else ("liquid", rho_l)
        ctx.fail(("fluids", fluid, "density"),
                 f"got {_show(v)}, a density contrast of {contrast:.3g} "
                 f"(liquid {_num(rho_l)}, gas {_num(rho_g)})",
                 f"a contrast of at most {_num(MAX_CONTRAST)}: beyond it the float64 pressure "
                 "solve cannot converge", value=v)


def _circle_text(x, y, r):
    return f"centre ({_num(x)}, {_num(y)}) with radius {_num(r)}"


def _check_apart(ctx, circles, key, gap, apart):
    """``geometry.<key>`` (bubbles or droplets): no two of them overlap."""
    pair = _first_overlap([c.center[0] for c in circles], [c.center[1] for c in circles],
                          [c.radius for c in circles], gap)
    if pair is not None:
        i, j = pair
        a, b = circles[i], circles[j]
        ctx.fail(("geometry", key, j),
                 f"got {_circle_text(*b.center, b.radius)}, overlapping geometry.{key}"
                 f"[{i}] ({_circle_text(*a.center, a.radius)})",
                 f"{key} apart from each other{apart}")


def _first_overlap(xs, ys, rs, gap):
    """``(i, j)``, ``i < j``, of the overlapping pair with the smallest ``j``, or None.

    Two circles overlap when their centres are closer than ``r_i + r_j +
    gap``.  Sweeps along x: each circle is compared with those whose x is
    within reach, in NumPy.
    """
    import numpy as np

    xs, ys, rs = (np.asarray(a, dtype=float) for a in (xs, ys, rs))
    n = xs.size
    if n < 2:
        return None
    order = np.argsort(xs, kind="stable")
    sx, sy, sr = xs[order], ys[order], rs[order]
    reach = sr + sr.max() + gap
    hi = np.searchsorted(sx, sx + reach, side="right")
    best = None
    for a in range(n):
        b = np.arange(a + 1, hi[a])
        if b.size == 0:
            continue
        d = np.hypot(sx[b] - sx[a], sy[b] - sy[a])
        for k in b[d < sr[a] + sr[b] + gap]:
            i, j = sorted((int(order[a]), int(order[k])))
            if best is None or (j, i) < (best[1], best[0]):
                best = (i, j)
    return best


def _check_overlaps(case, ctx, gap):
    """Bubbles apart from each other and below the free surface; droplets in gas.

    ``gap`` is the clearance the walls need too (one cell in a flow, a
    rounding slack otherwise): two interfaces closer than that merge at once.
    """
    import numpy as np

    geo = case.geometry
    fs = geo.free_surface
    flow = case.mode == "flow"
    apart = " by at least one cell" if flow else ""

    # Explicit bubbles among themselves.
    B = geo.bubbles
    _check_apart(ctx, B, "bubbles", gap, apart)

    lat = geo.bubble_lattice
    if lat is not None:
        (x0, x1), (y0, y1), r = lat.x_range, lat.y_range, lat.radius
        for axis, n, lo, hi in (("x", lat.columns, x0, x1), ("y", lat.rows, y0, y1)):
            if n > 1 and (hi - lo) / (n - 1) < 2 * r + gap:
                ctx.fail(("geometry", "bubble_lattice"),
                         f"got {n} {'columns' if axis == 'x' else 'rows'} of radius {_num(r)}, "
                         f"{_num((hi - lo) / (n - 1))} apart in {axis} (overlapping)",
                         f"a spacing ({axis}1 - {axis}0) / (n - 1) >= 2 * radius"
                         f"{' + one cell' if flow else ''}")
        # The lattice bubble nearest to an explicit one is the nearest node
        # of the rectangular lattice: round each coordinate and clip.
        for i, b in enumerate(B):
            idx = []
            for c, lo, hi, n in ((b.center[0], x0, x1, lat.columns),
                                 (b.center[1], y0, y1, lat.rows)):
                step = (hi - lo) / (n - 1) if n > 1 else 0.0
                k = int(np.clip(np.rint((c - lo) / step), 0, n - 1)) if step > 0 else 0
                idx.append((k, lo + k * step if n > 1 else 0.5 * (lo + hi)))
            (col, cx), (row, cy) = idx
            if math.hypot(b.center[0] - cx, b.center[1] - cy) < b.radius + r + gap:
                ctx.fail(("geometry", "bubbles", i),
                         f"got {_circle_text(*b.center, b.radius)}, overlapping the "
                         f"bubble_lattice bubble at ({_num(cx)}, {_num(cy)}) (column {col + 1}, "
                         f"row {row + 1})", f"bubbles apart from each other{apart}")

    if fs is not None:
        below = f"a bubble in the liquid, below the free surface at {_num(fs)}{apart}"
        for i, b in enumerate(B):
            y, r = b.center[1], b.radius
            if y + r > fs - gap:
                where = ("lying in the gas above" if y - r >= fs else "crossing")
                ctx.fail(("geometry", "bubbles", i),
                         f"got {_circle_text(*b.center, r)}, {where} the free surface at "
                         f"{_num(fs)}", below + f" (y + radius <= {_num(fs - max(gap, 0))})")
        if lat is not None and max(lat.y_range) + lat.radius > fs - gap:
            y, r = max(lat.y_range), lat.radius
            where = ("lying in the gas above" if y - r >= fs else "crossing")
            ctx.fail(("geometry", "bubble_lattice"),
                     f"got a top row at y = {_num(y)} with radius {_num(r)}, {where} the free "
                     f"surface at {_num(fs)}",
                     f"bubbles below the free surface (y1 + radius <= {_num(fs - max(gap, 0))})")
        rb = geo.random_bubbles
        top = rb.region[3] if rb is not None and rb.region is not None else None
        if rb is not None and (top is None or top > fs - max(gap, 0)):
            ctx.fail(("geometry", "random_bubbles", "region"),
                     f"got {_show(list(rb.region)) if rb.region else 'null'} (bubbles anywhere "
                     f"up to y = {_num(top if top is not None else case.grid.ly)}), above the "
                     f"free surface at {_num(fs)}",
                     f"a region [x0, x1, y0, y1] with y1 <= {_num(fs - max(gap, 0))}",
                     value=rb.region)

    rb = geo.random_bubbles
    if rb is not None:
        x0, x1, y0, y1 = rb.region or (0.0, case.grid.lx, 0.0, case.grid.ly)
        need = rb.count * math.pi * (rb.radius + 0.5 * rb.min_gap) ** 2
        if need > MAX_RANDOM_FILL * (x1 - x0) * (y1 - y0):
            ctx.fail(("geometry", "random_bubbles", "count"),
                     f"got {rb.count} bubbles of radius {_num(rb.radius)} covering "
                     f"{need / ((x1 - x0) * (y1 - y0)):.0%} of their region",
                     f"at most {MAX_RANDOM_FILL:.0%} of it (random placement jams beyond)",
                     value=rb.count)

    # Droplets: liquid added to gas, so each must lie in gas, whole.
    D = geo.droplets
    _check_apart(ctx, D, "droplets", gap, apart)
    for i, d in enumerate(D):
        (x, y), r = d.center, d.radius
        if fs is not None and y - r >= fs + gap:
            continue                                   # in the gas layer
        # Else it must lie inside one explicit bubble (a droplet in a bubble).
        host = next((k for k, b in enumerate(B)
                     if math.hypot(x - b.center[0], y - b.center[1]) + r <= b.radius - gap), None)
        if host is not None:
            continue
        if fs is not None and y + r > fs and y - r < fs + gap:
            where = f"crossing the free surface at {_num(fs)}"
        elif fs is not None:
            where = f"lying in the liquid below the free surface at {_num(fs)} (it adds nothing)"
        else:
            where = "lying in the liquid (no free surface: liquid everywhere; it adds nothing)"
        ctx.fail(("geometry", "droplets", i), f"got {_circle_text(x, y, r)}, {where}",
                 "a droplet in the gas: above the free surface"
                 f"{' (y - radius >= ' + _num(fs + max(gap, 0)) + ')' if fs is not None else ''}"
                 f" or inside a bubble{apart}")


def viscosity_scheme(case):
    """``"implicit"`` or ``"explicit"``: ``momentum.viscosity``, with ``auto``
    resolved, in 2-D and 3-D alike.  Implicit when the explicit viscous
    limit ``0.4 / ndim h^2 / nu`` (``0.2 h^2 / nu`` in 2-D) is below every
    other step limit at t = 0 (capillary, gravity, ``dt_max``, a fixed
    ``dt``): only then can it ever set the step, the convective
    limit only shrinking the step as the flow speeds up.  Otherwise the
    explicit stress costs less and the step is the same."""
    scheme = case.momentum.viscosity
    if scheme != "auto":
        return scheme
    limits = _dt_limits(case, viscous=True)
    viscous = limits.pop("viscous")[0]
    others = [dt for dt, _ in limits.values()] + [x for x in (case.time.dt, case.time.dt_max)
                                                  if x is not None]
    return "implicit" if others and viscous < min(others) else "explicit"


def initial_dt_limits(case):
    """The time-step limits of a flow at rest (t = 0), in seconds.

    The same formulas as :meth:`bubbleflow.flow.navier_stokes.FlowSolver.stable_dt`
    (kept in step by hand, so that reading a case needs no numerics); the
    convective CFL limit is left out, the fluid being at rest.

    Parameters
    ----------
    case : Case

    Returns
    -------
    dict
        ``{"viscous": (dt, formula), "capillary": ..., "gravity": ...}`` for
        the limits that apply; ``formula`` shows the numbers, for messages.
    """
    return _dt_limits(case, viscous=viscosity_scheme(case) == "explicit")


def _dt_limits(case, viscous):
    g, fl, ph = case.grid, case.fluids, case.physics
    h = min(v / n for v, n in zip(g.lengths, g.cells))
    fluids = [fl.liquid] + ([fl.gas] if _has_gas(case.geometry) else [])
    nu = max(f.viscosity / f.density for f in fluids)
    out = {}
    if viscous:
        c = 0.4 / g.ndim           # stable below h^2 / (2 ndim nu)
        out["viscous"] = (c * h * h / nu, f"{c:.3g} h^2 / nu with h = {_num(h)}, nu = {nu:.3g}")
    if ph.surface_tension > 0:
        rho_avg = 0.5 * (fl.liquid.density + fl.gas.density)
        out["capillary"] = (math.sqrt(rho_avg * h ** 3 / (2 * math.pi * ph.surface_tension)),
                            f"sqrt(rho_avg h^3 / (2 pi sigma)) with rho_avg = {_num(rho_avg)}, "
                            f"h = {_num(h)}, sigma = {_num(ph.surface_tension)}")
    if ph.gravity > 0:
        out["gravity"] = (math.sqrt(h / ph.gravity),
                          f"sqrt(h / g) with h = {_num(h)}, g = {_num(ph.gravity)}")
    return out


def _check_time(case, ctx):
    """A flow's time step and output interval against the limits at t = 0."""
    t, out = case.time, case.output
    limits = initial_dt_limits(case) or {"no": (math.inf, "no viscous, capillary or gravity limit")}
    name, (dt0, formula) = min(limits.items(), key=lambda kv: kv[1][0])
    if t.dt is not None:
        if t.dt > t.end:
            ctx.bad(("time", "dt"), t.dt, f"a step <= time.end = {_num(t.end)}")
        if t.dt > dt0:
            ctx.fail(("time", "dt"), f"got {_show(t.dt)}, above the {name} stability limit "
                     f"{dt0:.3g} s at t = 0 ({formula})",
                     f"a fixed step <= {dt0:.3g}, or no time.dt (adaptive steps)", value=t.dt)
    step = min(x for x in (dt0, t.dt, t.dt_max) if x is not None)
    if t.end / step > MAX_STEPS:
        ctx.fail(("time", "end"), f"got {_show(t.end)}, at least {t.end / step:.3g} steps of "
                 f"{step:.3g} s (the {name} limit at t = 0: {formula})",
                 f"at most {MAX_STEPS:.0e} steps: a shorter time.end or a coarser grid",
                 value=t.end)
    if out.interval is not None:
        iv = out.interval
        if t.end / iv > MAX_SNAPSHOTS:
            ctx.fail(("output", "interval"), f"got {_show(iv)}, {t.end / iv:.3g} snapshots "
                     f"to time.end = {_num(t.end)}",
                     f"at most {MAX_SNAPSHOTS} snapshots: an interval >= "
                     f"{t.end / MAX_SNAPSHOTS:.3g}", value=iv)
        if math.isfinite(step) and iv < MIN_INTERVAL_FRACTION * step:
            ctx.fail(("output", "interval"), f"got {_show(iv)}, which would force steps "
                     f"{step / iv:.3g} times shorter than the stable step {step:.3g} s at t = 0",
                     f"an interval >= {MIN_INTERVAL_FRACTION:g} * step = "
                     f"{MIN_INTERVAL_FRACTION * step:.3g}", value=iv)


def _build(data, file, lines, overrides):
    if data is None:
        raise CaseError(file, None, "empty case file",
                        "a mapping of case sections (name, grid, fluids, ...)")
    if not isinstance(data, Mapping):
        raise CaseError(file, None, f"top level is {_kind(data)}",
                        "a mapping of case sections (name, grid, fluids, ...)",
                        value=data, line=1 if lines is not None else None)
    if "sweep" in data:
        raise CaseError(file, "sweep", "this file describes a parameter study",
                        "`bubbleflow sweep` for it, or a case file without the sweep block",
                        line=(lines or {}).get(("sweep",)) if isinstance(lines, dict) else None)
    data, origins = _apply_overrides(dict(data), overrides, file)
    where = _Where(lines, origins)
    ctx = _Ctx(file, where)
    case = _Section(Case).convert(ctx, (), data)
    case = _check_case(case, ctx)
    name = case.name
    if ("name",) not in ctx.explicit:
        # Sources such as "<dict>" or "<study>" are not files: no stem.
        stem = os.path.splitext(os.path.basename(file))[0]
        name = "case" if file.startswith("<") or not stem else stem
    return dataclasses.replace(case, name=name, source=file, _where=where)


def load_case(path, overrides=()):
    """Read, override, validate and complete a YAML case file.

    Parameters
    ----------
    path : str or os.PathLike
        The case file.
    overrides : sequence of str
        ``"key.path=value"`` items (the CLI's ``--set``), applied in order;
        ``value`` is parsed as YAML (``256``, ``1e-8``, ``[8, 8]``, ``null``).
        Tuples ``(key_path, value[, label])`` set ``value`` unparsed.

    Returns
    -------
    Case

    Raises
    ------
    CaseError
        For anything wrong with the file, an override or a value; the
        message is one line.
    """
    file = os.fspath(path)
    data, lines = read_yaml_file(file)
    return _build(data, file, lines, overrides)


def case_from_dict(data, source="<dict>", overrides=()):
    """Validate and complete a case given as a (nested) dict.

    Same checks and messages as :func:`load_case`, without line numbers;
    ``Case.to_dict()`` round-trips through it.

    Parameters
    ----------
    data : mapping
    source : str
        Named in error messages and kept as ``case.source``.
    overrides : sequence of str
        As for :func:`load_case`.

    Returns
    -------
    Case
    """
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise CaseError(source, None, f"top level is {_kind(data)}",
                        "a mapping of case sections (name, grid, fluids, ...)", value=data)
    return _build(data, str(source), None, overrides)
