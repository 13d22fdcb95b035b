"""The field checkers of the case schema: each checks and converts one
value, and says what it accepts.

A schema field carries its checker in ``metadata["spec"]``
(:func:`checked_field`); :class:`SectionSpec` checks a mapping field by
field against its dataclass.  The checkers report to a context with
``fail`` and ``bad`` (:class:`~.provenance.CheckContext`), which raises the
:class:`~.errors.CaseError` located at the value.
"""
from __future__ import annotations

import dataclasses
import difflib
import math
import numbers
import re
from collections.abc import Mapping
from dataclasses import field

from .errors import CaseError, show_kind, show_number

class Spec:
    """Checks and converts one value; ``expected(path)`` describes what is accepted."""

    def expected(self, path):
        raise NotImplementedError

    def convert(self, ctx, path, value):
        raise NotImplementedError


class IntSpec(Spec):
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


class FloatSpec(Spec):
    def __init__(self, gt=None, ge=None, lt=None, le=None):
        self.gt, self.ge, self.lt, self.le = gt, ge, lt, le

    def expected(self, path):
        lower = (("<", ">", self.gt) if self.gt is not None else
                 ("<=", ">=", self.ge) if self.ge is not None else None)
        upper = (("<", self.lt) if self.lt is not None else
                 ("<=", self.le) if self.le is not None else None)
        if lower and upper:
            name = path[-1] if path and isinstance(path[-1], str) else "x"
            return (f"a number with {show_number(lower[2])} {lower[0]} {name} {upper[0]} "
                    f"{show_number(upper[1])}")
        if lower:
            return f"a number {lower[1]} {show_number(lower[2])}"
        if upper:
            return f"a number {upper[0]} {show_number(upper[1])}"
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


class StrSpec(Spec):
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


class EnumSpec(Spec):
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


class OptionalSpec(Spec):
    """``null`` or the inner value."""

    def __init__(self, inner):
        self.inner = inner

    def expected(self, path):
        return "null or " + self.inner.expected(path)

    def convert(self, ctx, path, value):
        return None if value is None else self.inner.convert(ctx, path, value)


class TupleSpec(Spec):
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


class ListSpec(Spec):
    """A list of any length (``null`` = empty), stored as a tuple."""

    def __init__(self, item, what):
        self.item, self.what = item, what

    def expected(self, path):
        return self.what

    def convert(self, ctx, path, value):
        if value is None:
            return ()
        if not isinstance(value, (list, tuple)):
            ctx.fail(path, f"got {show_kind(value)}", self.what, value=value)
        return tuple(self.item.convert(ctx, path + (i,), v) for i, v in enumerate(value))


class SectionSpec(Spec):
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
            ctx.fail(path, f"got {show_kind(value)}", expected, value=value)
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
            elif isinstance(spec, SectionSpec):
                kwargs[f.name] = spec.convert(ctx, p, None)
            elif f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING:
                ctx.fail(p, "missing required key", spec.expected(p), missing=True)
        return self.cls(**kwargs)


def checked_field(spec, default=dataclasses.MISSING, factory=dataclasses.MISSING, doc="",
                  default_text=""):
    """A dataclass field that carries its checker and its documentation.

    Parameters
    ----------
    spec : Spec
        Checks and converts the key's value (``metadata["spec"]``).
    default, factory
        As for :func:`dataclasses.field`; neither: a required key.
    doc : str
        What the key means, for the key reference
        (:mod:`~.key_reference`, docs/reference/case_keys.md): one line, units
        included, without the allowed values or the default (both are
        generated).
    default_text : str
        The default in words, where the dataclass default is a placeholder
        that the loader resolves from other values (the name from the file,
        the preconditioner from the method); empty: the default itself.
    """
    return field(default=default, default_factory=factory,
                 metadata={"spec": spec, "doc": doc, "default_text": default_text})
