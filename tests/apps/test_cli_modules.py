"""A run starts without the other commands' modules; every command stays
reachable from the full parser."""
import subprocess
import sys

from bubbleflow.apps.cli import _command, build_parser
from helpers.cli import ROOT
from helpers.launcher import child_env


def test_the_command_is_the_first_word_unless_an_option_comes_first():
    assert _command(["run", "case.yaml", "--set", "a=1"]) == "run"
    assert _command(["bench", "--flow"]) == "bench"
    assert _command(["--help"]) is None and _command([]) is None


def test_the_run_parser_alone_parses_a_run_as_the_full_parser_does():
    words = ["run", "cases/two_phase.yaml", "--set", "grid.nx=20", "-o", "out", "--no-progress"]
    alone, full = build_parser("run").parse_args(words), build_parser().parse_args(words)
    assert vars(alone) == vars(full)
    assert {"sweep", "plot", "bench", "compile"} <= set(
        build_parser()._subparsers._group_actions[0].choices)


def test_a_run_imports_none_of_the_other_commands_modules(tmp_path):
    code = ("import sys\nfrom bubbleflow.apps.cli import main\n"
            f"rc = main(['run', 'cases/two_phase.yaml', '--backend', 'numpy', '-q', "
            f"'--set', 'grid.nx=8', '--set', 'grid.ny=16', '--set', 'time.end=0.002', "
            f"'-o', {str(tmp_path)!r}])\n"
            "print(rc, sorted(m for m in sys.modules if m.split('.')[:3] in "
            "(['bubbleflow', 'apps', 'bench'], ['bubbleflow', 'apps', 'sweep'], "
            "['bubbleflow', 'apps', 'plots'], ['bubbleflow', 'apps', 'compile_ahead'])))\n")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=child_env(),
                         capture_output=True, text=True, timeout=300)
    assert out.stdout.strip().splitlines()[-1] == "0 []", out.stdout + out.stderr
