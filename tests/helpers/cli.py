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


def run_interrupted(case, tmp_path, common, split, end):
    """The restart check's three runs of ``case``: uninterrupted to ``end``
    (``full/``), stopped at ``split`` (``part/``) and restarted from that file
    to ``end`` (``cont/``), each asserted to succeed.  Returns the three
    result files ``(full, part, cont)``."""
    name = os.path.splitext(os.path.basename(case))[0] + ".h5"
    out = {k: tmp_path / k for k in ("full", "part", "cont")}
    for key, t in (("full", end), ("part", split)):
        res = run_cli("run", case, "-o", str(out[key]), *common, "--set", f"time.end={t}")
        assert res.returncode == 0, res.stderr
    res = run_cli("run", case, "-o", str(out["cont"]), *common, "--set", f"time.end={end}",
                  "--restart", str(out["part"] / name))
    assert res.returncode == 0, res.stderr
    return out["full"] / name, out["part"] / name, out["cont"] / name
