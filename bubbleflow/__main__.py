"""``python -m bubbleflow``: the command line (:mod:`bubbleflow.apps.cli`)."""
import sys

from .apps.cli import main

sys.exit(main())
