"""`bubbleflow bench` checks every option's value before any work: one line
naming the option, the value and what is expected (sizes and counts with
their upper bound), exit 2, nothing run."""
import pytest

from bubbleflow.apps import bench as bench_mod
from bubbleflow.apps.bench import flow as flow_mod, options as options_mod, runner as runner_mod
from bubbleflow.apps.cli import main
from bubbleflow.case.bounds import max_csr_cells
from helpers.bench import one_error_line


@pytest.fixture(autouse=True)
def no_work(monkeypatch):
    """Any measurement or run fails the test: the checks come first."""
    def ran(*a, **k):
        pytest.fail("work started")

    for module, name in ((bench_mod, "run_bench"), (bench_mod, "run_flow_bench"),
                         (runner_mod, "copy_bandwidth"), (flow_mod, "copy_bandwidth"),
                         (options_mod, "check_configs_3d")):
        monkeypatch.setattr(module, name, ran)


def _refused(args, capsys):
    assert main(["bench", "--backend", "numpy", *args]) == 2
    out, err = capsys.readouterr()
    assert out == ""
    return one_error_line(err)


@pytest.mark.parametrize("args, fragment", [
    (["--copy-mib", "100000"], "--copy-mib: got '100000'; expected an integer >= 1 and <= 8192 "
                               "(two buffers of it are allocated"),
    (["--copy-mib", "0"], "--copy-mib: got '0'; expected an integer >= 1 and <= 8192"),
    (["--copy-mib", "1.5"], "--copy-mib: got '1.5'"),
    (["--repeat", "1001"], "--repeat: got '1001'; expected an integer >= 1 and <= 1000"),
    (["--peer-repeat", "5000"], "--peer-repeat: got '5000'; expected an integer >= 1 and <= 1000"),
    (["--maxiter", "1e12"], "--maxiter: got '1e12'; expected an integer >= 1 and <= 10000000"),
    (["--peer-maxiter", "0"], "--peer-maxiter: got '0'; expected an integer >= 1 and <= 10000000"),
    (["--check-every", "nan"], "--check-every: got 'nan'; expected an integer >= 1"),
    (["--peer-max-size", "99999"], "--peer-max-size: got '99999'; expected an integer >= 1 and "
                                   "<= 20724 (n^2 cells at most the int32 index limit"),
    (["--sizes", "16", "--cells-per-subdomain", "17"],
     "--cells-per-subdomain: got '17'; expected an integer >= 1 and <= 16 (the largest --sizes"),
    (["--seed", "-1"], "--seed: got '-1'; expected an integer >= 0"),
    (["--configs", "jacobi:none@30000"], "--configs: got '30000'; expected an integer >= 1 and "
                                         "<= 20724"),
    (["--configs", "multigrid(degree=0):none"],
     "--configs: got 'multigrid(degree=0):none'; expected options the solver takes "
     "(preconditioner 'multigrid': degree=0: expected an integer >= 1)"),
    (["--configs", "multigrid(cycle_precision=float16):none"],
     "cycle_precision='float16': expected one of: float64, float32"),
    (["--configs", "block_ic(block_lines=1):none"], "block_lines=1: expected an integer >= 2"),
    (["--dim", "3", "--configs", "multigrid(scale=3):none"], "scale=3: expected a number with "
                                                             "0 < scale < 2"),
])
def test_a_bad_value_is_one_line_before_any_work(args, fragment, capsys):
    assert fragment in _refused(args, capsys)


@pytest.mark.parametrize("args, fragment", [
    (["--flow", "--copy-mib", "9000"], "--copy-mib: got '9000'; expected an integer >= 1 and "
                                       "<= 8192"),
    (["--flow", "--steps", "100001"], "--steps: got '100001'; expected an integer >= 1 and "
                                      "<= 100000"),
    (["--flow", "--skip", "1e6"], "--skip: got '1e6'; expected an integer >= 0 and <= 100000"),
    (["--scaling", "2000"], "--scaling: got '2000'; expected an integer >= 1 and <= 1024"),
    (["--scaling", "x"], "--scaling: got 'x'; expected an integer >= 1"),
])
def test_flow_and_scaling_values_are_one_line(args, fragment, capsys):
    assert fragment in _refused(args, capsys)


def test_a_copy_that_does_not_fit_in_memory_is_refused(monkeypatch, capsys):
    import bubbleflow.compute.backend as backend_mod

    monkeypatch.setattr(backend_mod, "host_available_memory", lambda: 2 ** 30)
    line = _refused(["--sizes", "16", "--copy-mib", "4096"], capsys)
    assert "--copy-mib: got 4096; expected a copy whose two buffers fit in the host" in line
    assert "8 GiB needed, 1 GiB free" in line


def test_the_side_bound_is_the_csr_cell_limit():
    for dim in (2, 3):
        most = max_csr_cells(dim)
        assert options_mod.max_side(dim) ** dim <= most < (options_mod.max_side(dim) + 1) ** dim
    assert options_mod.max_side(3) == 674


def test_good_values_pass(monkeypatch):
    """The bounds are inclusive, and the 3-D probe sees the checked options."""
    seen = []
    monkeypatch.setattr(options_mod, "check_configs_3d", lambda configs, cps: seen.extend(configs))
    monkeypatch.setattr(bench_mod, "run_bench", lambda bench: ([], 0))
    assert main(["bench", "--backend", "numpy", "--sizes", "16", "--copy-mib", "1",
                 "--repeat", "1000", "--maxiter", "10000000", "--cells-per-subdomain", "16",
                 "--no-peer", "--configs", "multigrid(degree=3,ratio=5):none@16"]) == 0
    assert main(["bench", "--backend", "numpy", "--dim", "3", "--sizes", "16", "--no-peer",
                 "--configs", "multigrid(w_levels=0):none"]) == 0
    assert [c.options for c in seen] == [(("w_levels", 0),)]
