"""CSV tables of the apps (a study's summary, the benchmark's rows): one cell format.

A cell is written so that :func:`parse_cell` reads back the value: ``""``
for None, ``true``/``false``, floats by ``repr`` (no digits lost), lists and
mappings as JSON.

>>> [format_cell(v) for v in (None, True, 0.1, 3, [8, 8], "jacobi")]
['', 'true', '0.1', '3', '[8, 8]', 'jacobi']
>>> [parse_cell(c) for c in ('', 'true', '0.1', '3', '[8, 8]', 'jacobi')]
[None, True, 0.1, 3, [8, 8], 'jacobi']
"""
from __future__ import annotations

import contextlib
import csv
import io
import json
import re
from collections.abc import Mapping

__all__ = ["plain", "format_cell", "parse_cell", "csv_text", "read_csv"]

_INT = re.compile(r"[+-]?\d+\Z")


def plain(v):
    """``v`` with tuples as lists and mapping keys as strings (for YAML and JSON)."""
    if isinstance(v, (list, tuple)):
        return [plain(x) for x in v]
    if isinstance(v, Mapping):
        return {str(k): plain(x) for k, x in v.items()}
    return v


def format_cell(v):
    """One CSV cell (see the module docstring)."""
    if v is None:
        return ""
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, (list, tuple, Mapping)):
        return json.dumps(plain(v))
    return str(v)


def parse_cell(s):
    """The value of a cell written by :func:`format_cell`."""
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


def csv_text(columns, rows):
    """The CSV text of ``rows`` (dicts) under a header of ``columns`` (``\\n`` line ends)."""
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(columns)
    for row in rows:
        w.writerow([format_cell(row.get(c)) for c in columns])
    return buf.getvalue()


def read_csv(path):
    """Rows of a CSV written by :func:`csv_text`, with typed values; ``[]`` if absent."""
    try:
        with open(path, newline="", encoding="utf-8") as fh:
            return [{k: parse_cell(v) for k, v in row.items()} for row in csv.DictReader(fh)]
    except FileNotFoundError:
        return []
