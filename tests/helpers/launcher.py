"""An MPI launcher as the tests use it: where ``mpiexec`` is, the environment
of a child (this checkout first on its path), and what the program said on
stderr less the launcher's own notices."""
import os
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def mpiexec():
    """The ``mpiexec`` beside this Python (the test extras' MPICH), else on PATH; None."""
    beside = Path(sys.executable).parent / "mpiexec"
    return str(beside) if beside.exists() else shutil.which("mpiexec")


def is_open_mpi():
    """Whether :func:`mpiexec` is Open MPI's (its exit codes and notices differ from MPICH's)."""
    try:
        out = subprocess.run([mpiexec(), "--version"], capture_output=True, text=True, timeout=60)
    except (OSError, subprocess.SubprocessError, TypeError):
        return False
    return "Open MPI" in out.stdout + out.stderr or "OpenRTE" in out.stdout + out.stderr


def child_env():
    """The environment of a child process: this checkout first on its path."""
    return dict(os.environ, PYTHONPATH=os.pathsep.join(
        [str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p]))


def said(stderr):
    """The non-blank lines of ``stderr`` less an MPI launcher's own notices
    (Open MPI frames each between lines of dashes)."""
    lines, framed = [], False
    for line in stderr.splitlines():
        text = line.strip()
        if text and set(text) == {"-"}:
            framed = not framed
        elif text and not framed:
            lines.append(line)
    return lines
