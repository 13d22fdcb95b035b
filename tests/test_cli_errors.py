"""`bubbleflow run` on broken cases: exit code 2 and one `error:` line, no traceback.

Every error here is found before the case runs, so none of these tests
needs the solver (``bubbleflow.app``).
"""
import os
import subprocess
import sys
import textwrap

import pytest

from bubbleflow.backend import BackendUnavailable, get_backend

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def bubbleflow(*args, cwd=None):
    """Run ``python -m bubbleflow.cli`` on the source tree; returns the CompletedProcess."""
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PYTHONWARNINGS", None)
    return subprocess.run([sys.executable, "-m", "bubbleflow.cli", *args], cwd=cwd or ROOT,
                          env=env, capture_output=True, text=True, timeout=120)


def write(tmp_path, text, name="case.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return str(path)


def assert_case_error(proc, *fragments):
    """Exit code 2, nothing on stdout, one `error:` line on stderr with ``fragments``."""
    assert proc.returncode == 2, (proc.returncode, proc.stdout, proc.stderr)
    assert "Traceback" not in proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("error: "), proc.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    assert proc.stdout == ""
    return lines[0]


BAD_CASES = {
    "syntax": ("grid:\n  nx: 64\n  ny 3\n  lx: 1.0\n", [":3:", "YAML syntax error"]),
    "unknown_key": ("solver:\n  preconditoner: {type: jacobi}\n",
                    [":2: solver.preconditoner: unknown key; did you mean 'preconditioner'?"]),
    "wrong_type": ("grid: {nx: sixty-four}\n", [":1: grid.nx: got 'sixty-four'; expected an integer"]),
    "negative": ("fluids:\n  gas: {density: -1.0}\n",
                 [":2: fluids.gas.density: got -1.0; expected a number > 0"]),
    "outside": ("geometry:\n  bubbles:\n    - {center: [0.95, 0.5], radius: 0.1}\n",
                [":3: geometry.bubbles[0]:", "a circle inside the domain"]),
    "subdomains": ("solver:\n  deflation: {subdomains: [5, 16]}\n",
                   ["solver.deflation.subdomains: got [5, 16] for a 128 x 128 grid"]),
    "contradiction": ("solver: {method: cg, preconditioner: {type: jacobi}}\n",
                      ["solver.preconditioner.type: got 'jacobi' with method 'cg'"]),
    "top_level_list": ("- grid\n- solver\n", ["top level is a list"]),
}


@pytest.mark.parametrize("kind", sorted(BAD_CASES))
def test_bad_case_file(tmp_path, kind):
    text, fragments = BAD_CASES[kind]
    path = write(tmp_path, text)
    line = assert_case_error(bubbleflow("run", path), *fragments)
    assert line.startswith(f"error: {path}")


def test_missing_file(tmp_path):
    path = str(tmp_path / "nope.yaml")
    line = assert_case_error(bubbleflow("run", path))
    assert line == f"error: {path}: file not found; expected a readable YAML case file"


def test_bad_set_override(tmp_path):
    path = write(tmp_path, "name: ok\n")
    assert_case_error(bubbleflow("run", path, "--set", "grid.nz=3"),
                      "(--set grid.nz=3): grid.nz: unknown key")
    assert_case_error(bubbleflow("run", path, "--set", "gridnx"), "malformed override")
    assert_case_error(bubbleflow("run", path, "--set", "grid.nx=2"),
                      "grid.nx: got 2; expected an integer >= 4")


def _cupy_usable():
    try:
        get_backend("cupy")
        return True
    except BackendUnavailable:
        return False


@pytest.mark.skipif(_cupy_usable(), reason="cupy is usable here, so --backend cupy is no error")
def test_backend_cupy_unavailable(tmp_path):
    path = write(tmp_path, "name: ok\n")
    line = assert_case_error(bubbleflow("run", path, "--backend", "cupy"))
    assert "backend: got 'cupy'; expected 'auto' or 'numpy' on this machine (cupy unavailable: " \
        in line
    # The same from the file, which then points at the line.
    path = write(tmp_path, "name: ok\nbackend: cupy\n", name="gpu.yaml")
    line = assert_case_error(bubbleflow("run", path))
    assert line.startswith(f"error: {path}:2: backend: got 'cupy'")


def test_version():
    proc = bubbleflow("--version")
    assert proc.returncode == 0
    assert proc.stdout.startswith("bubbleflow ")


def test_main_returns_2_in_process(tmp_path, capsys):
    from bubbleflow.cli import main

    path = write(tmp_path, "grid: {nx: -5}\n")
    assert main(["run", path]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {path}:1: grid.nx: got -5; expected an integer >= 4\n"
