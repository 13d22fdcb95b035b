"""Swept parameters and their values: ``--values`` lists, ranges and the cartesian product."""
from __future__ import annotations

import itertools
import math
import numbers
import re

from ...case.yaml_reader import MAX_OPTION_CHARS, YamlError, load_yaml, shorten
from ..tables import format_cell

__all__ = ["Parameter", "parse_range", "parse_values", "expand", "intify", "show", "one_line",
           "RANGE_HINT", "MAX_RUNS", "MAX_RANGE_COUNT"]

#: Most runs in one study: every point's case is built and validated before
#: anything runs, and each run writes its own file and summary row.
MAX_RUNS = 10_000
#: Most values of one range: a longer range alone makes a study over MAX_RUNS.
MAX_RANGE_COUNT = MAX_RUNS

class Parameter:
    """One swept key: ``key``, its ``values`` (a list) and ``origin`` (for errors)."""

    def __init__(self, key, values, origin):
        self.key, self.values, self.origin = key, list(values), origin

    def __repr__(self):
        return f"Parameter({self.key!r}, {self.values!r})"


_NUM = r"[+-]?(?:\d+\.?\d*|\.\d+)(?:[eE][+-]?\d+)?"
_RANGE = re.compile(rf"\s*({_NUM})\s*:\s*({_NUM})\s*:\s*([^:\s]*)\s*(?::\s*([^:\s]*)\s*)?\Z")
RANGE_HINT = "a range START:STOP:COUNT[:log], e.g. 1:1e6:7:log or 0.1:0.5:5"


def _integral(v):
    return isinstance(v, numbers.Real) and not isinstance(v, bool) and math.isfinite(v) \
        and float(v) == int(v)


def intify(values, current):
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
    shown = shorten(repr(text), 40)     # (the --values option, named first, shows it all)
    # (Compared as text first: int() refuses thousands of digits.)
    if not count.isdigit() or len(count) > len(str(MAX_RANGE_COUNT)) \
            or not 1 <= int(count) <= MAX_RANGE_COUNT:
        raise ValueError(f"range {shown}: COUNT {shorten(repr(count), 20)} is not an integer "
                         f"from 1 to {MAX_RANGE_COUNT} (the most runs of a study)")
    n = int(count)
    if mode not in ("lin", "linear", "log"):
        raise ValueError(f"range {shown}: unknown spacing {shorten(repr(m.group(4)))} "
                         "(lin or log)")
    if n == 1:
        values = [start]
    elif mode == "log":
        if start <= 0 or stop <= 0:
            raise ValueError(f"range {shown}: a log range needs START and STOP > 0")
        a, b = math.log10(start), math.log10(stop)
        values = [10.0 ** (a + (b - a) * i / (n - 1)) for i in range(n)]
        values[0], values[-1] = start, stop
    else:
        values = [start + (stop - start) * i / (n - 1) for i in range(n)]
        values[-1] = stop
    values = [float(f"{v:.12g}") for v in values]
    return intify(values, current)


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
    """One ``--values`` item: int, float (``1e3`` too), else YAML (:func:`load_yaml`)."""
    for conv in (int, float):
        try:
            return conv(text)
        except ValueError:
            pass
    return load_yaml(text, "--values", limit=MAX_OPTION_CHARS)


def parse_values(text, current=None):
    """The values of one ``--values`` option.

    Comma-separated items, each a number, a range (:func:`parse_range`) or a
    YAML value.

    Raises
    ------
    ValueError
        Over :data:`~bubbleflow.case.yaml_reader.MAX_OPTION_CHARS` characters,
        an empty item, a malformed range or an unreadable YAML item.

    >>> parse_values("1,1e3,1e6")
    [1, 1000.0, 1000000.0]
    >>> parse_values("jacobi, block_ic")
    ['jacobi', 'block_ic']
    >>> parse_values("[8,8],[16,16]")
    [[8, 8], [16, 16]]
    >>> parse_values("32,1e2", current=64)
    [32, 100]
    """
    text = str(text)
    if len(text) > MAX_OPTION_CHARS:
        raise ValueError(f"{len(text)} characters long (at most {MAX_OPTION_CHARS}; a longer "
                         "list belongs in a study file's sweep: block)")
    values = []
    for item in _split_top(text):
        if not item:
            raise ValueError(f"empty item in {shorten(repr(text))}")
        rng = parse_range(item, current)
        if rng is not None:
            values.extend(rng)
            continue
        try:
            values.append(_scalar(item))
        except YamlError as exc:
            raise ValueError(f"cannot read {shorten(repr(item), 40)} ({exc.problem})") from None
    return intify(values, current)


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




def show(v):
    """A value as a short text for messages and progress lines (floats by ``%g``)."""
    if v is None:
        return "null"
    if isinstance(v, float):
        return f"{v:g}"
    return format_cell(v)


def one_line(text):
    """``text`` with its line breaks (and the blanks around them) made single spaces."""
    return re.sub(r"\s*[\r\n]+\s*", " ", str(text)).strip()
