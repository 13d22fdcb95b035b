"""Where a flow step's time goes: now ``bubbleflow bench --flow`` (see ``bubbleflow bench --help``).

    python3 scripts/flow_phases.py CASE.yaml [ARGS]   is   bubbleflow bench --flow --cases CASE.yaml [ARGS]
"""
import os
import sys

if __package__ in (None, ""):
    # Run from a source checkout without installing: find the package beside us.
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from bubbleflow.apps.cli import main  # noqa: E402

if __name__ == "__main__":
    args = sys.argv[1:]
    if args and not args[0].startswith("-"):
        args = ["--cases", args[0], *args[1:]]
    sys.exit(main(["bench", "--flow", *args]))
