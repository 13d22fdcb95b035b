"""Pressure-solve benchmark: a thin wrapper around ``bubbleflow bench``.

The benchmark lives in the package (:mod:`bubbleflow.apps.bench`, installed with
it); this script passes its arguments on::

    python3 scripts/bench_solver.py --sizes 1024 2048 --contrasts 1e3 [--backend cupy] [--csv FILE]

is ``bubbleflow bench --sizes 1024 2048 --contrasts 1e3 ...``.  See
``bubbleflow bench --help`` and docs/performance_records.md.
"""
from __future__ import annotations

import os
import sys

if __package__ in (None, ""):
    # Run from a source checkout without installing: find the package beside us.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bubbleflow.apps.bench import copy_bandwidth, model_bytes_per_iteration  # noqa: E402,F401
from bubbleflow.apps.cli import main as _cli_main  # noqa: E402

# The old script's name for the byte model.
bytes_per_iteration = model_bytes_per_iteration


def main(argv=None):
    """``bubbleflow bench`` with ``argv`` (default ``sys.argv[1:]``); returns the exit code."""
    return _cli_main(["bench", *(sys.argv[1:] if argv is None else argv)])


if __name__ == "__main__":
    sys.exit(main())
