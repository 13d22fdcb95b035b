"""The command line as the flow tests run it: ``run_cli(*args)`` runs
``python -m bubbleflow.apps.cli ARGS`` in the repository root, with this
checkout first on the path, and returns the completed process."""
import os
import subprocess
import sys

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def run_cli(*args):
    env = dict(os.environ, PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    return subprocess.run([sys.executable, "-m", "bubbleflow.apps.cli", *args], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=900)
