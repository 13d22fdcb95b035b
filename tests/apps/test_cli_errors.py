"""`bubbleflow run` on broken cases: exit code 2 and one `error:` line, no traceback.

Every error here is found before the case runs, so none of these tests
needs the solver (``bubbleflow.apps.run``).
"""
import os
import subprocess
import sys
import textwrap

import pytest

from bubbleflow.compute.backend import BackendUnavailable, get_backend

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def bubbleflow(*args, cwd=None):
    """Run ``python -m bubbleflow.apps.cli`` on the source tree; returns the CompletedProcess."""
    env = dict(os.environ)
    env["PYTHONPATH"] = ROOT + os.pathsep + env.get("PYTHONPATH", "")
    env.pop("PYTHONWARNINGS", None)
    return subprocess.run([sys.executable, "-m", "bubbleflow.apps.cli", *args], cwd=cwd or ROOT,
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
    assert_case_error(bubbleflow("run", path, "--set", "grid.nw=3"),
                      "(--set grid.nw=3): grid.nw: unknown key")
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
    from bubbleflow.apps.cli import main

    path = write(tmp_path, "grid: {nx: -5}\n")
    assert main(["run", path]) == 2
    err = capsys.readouterr().err
    assert err == f"error: {path}:1: grid.nx: got -5; expected an integer >= 4\n"


# Hostile or impossible input: one line, exit 2, before any work.
HOSTILE = {
    "control_char": (b"name: ok\ngrid: {nx: 6\x074}\n", [":2:13: character '\\x07' (U+0007)"]),
    "not_utf8": (b"name: caf\xe9\n", [":1:10: not UTF-8 text"]),
    "empty": (b"", ["empty case file"]),
    "scalar": (b"3.5\n", ["top level is 3.5"]),
    "alias_bomb": ("\n".join(["a0: &a0 [x, x, x, x, x, x, x, x, x]"] + [
        f"a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 9) + "]" for n in range(1, 9)])
        .encode() + b"\n", ["values once aliases (*name) are expanded"]),
    "contrast": (b"geometry: {free_surface: 0.8}\nfluids:\n  gas: {density: 1.0e-15}\n",
                 [":3: fluids.gas.density: got 1e-15"]),
    "overlap": (b"geometry:\n  bubbles:\n    - {center: [0.3, 0.3], radius: 0.1}\n"
                b"    - {center: [0.35, 0.3], radius: 0.1}\n",
                [":4: geometry.bubbles[1]: got centre (0.35, 0.3) with radius 0.1, overlapping"]),
    "huge_grid": (b"grid: {nx: 100000, ny: 100000}\n", [":1: grid: got 100000 x 100000"]),
}


@pytest.mark.parametrize("kind", sorted(HOSTILE))
def test_hostile_case_file(tmp_path, kind, capsys):
    from bubbleflow.apps.cli import main

    raw, fragments = HOSTILE[kind]
    path = tmp_path / "case.yaml"
    path.write_bytes(raw)
    assert main(["run", str(path), "--backend", "numpy", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith(f"error: {path}"), err
    for fragment in fragments:
        assert fragment in err, (fragment, err)
    assert not (tmp_path / "out").exists()


@pytest.mark.parametrize("override, fragments", [
    ("time.dt=10", ["time.dt: got 10.0; expected a step <= time.end = 3"]),
    ("time.dt=0.5", ["time.dt: got 0.5, above the capillary stability limit"]),
    ("output.interval=1e-9", ["output.interval: got 1e-09", "at most 10000 snapshots"]),
    ("fluids.gas.density=.nan", ["fluids.gas.density: got nan; expected a finite number"]),
    ("grid.nx=99999999999999999999999", ["grid: got 99999999999999999999999 x 80"]),
    ("grid.lx=true", ["grid.lx: got true; expected a number > 0"]),
    ("geometry.bubbles[0].center=[[1], 2]", ["geometry.bubbles[0].center: got [[1], 2]"]),
    ("geometry.free_surface=0.6", ["geometry.bubbles[0]: got centre (0.5, 0.5) with radius "
                                   "0.25, crossing the free surface at 0.6"]),
])
def test_hostile_overrides_of_a_shipped_flow_case(tmp_path, override, fragments, capsys):
    from bubbleflow.apps.cli import main

    case = os.path.join(ROOT, "cases", "two_phase.yaml")
    assert main(["run", case, "--backend", "numpy", "-o", str(tmp_path), "--set", override]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and err.startswith("error: "), err
    assert f"(--set {override})" in err or "two_phase.yaml:" in err, err
    for fragment in fragments:
        assert fragment in err, (fragment, err)


def test_memory_refusal_through_the_cli(tmp_path, capsys, monkeypatch):
    from bubbleflow.apps.cli import main
    from bubbleflow.compute import backend as backend_mod

    monkeypatch.setattr(backend_mod, "host_available_memory", lambda: 2 ** 30)
    path = write(tmp_path, "grid: {nx: 8192, ny: 8192}\n")
    assert main(["run", path, "--backend", "numpy", "-o", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"error: {path}:1: grid: 8192 x 8192 needs about ")
    assert "GiB on the host, more than the 0.8 GiB a run may take (80 % of the 1 GiB free)" \
        in err and err.count("\n") == 1
