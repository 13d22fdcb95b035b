"""`PressureSolver`'s keyword options are checked before any set-up: an
unknown name is a ValueError naming it, the preconditioner and the names it
takes; a value is refused as the case file's schema refuses it."""
import pytest

from bubbleflow import PressureSolver, bubbly_column
from bubbleflow.case.config import CaseError, case_from_dict
from bubbleflow.linalg import registry, solver as solver_mod
from bubbleflow.linalg.solver import check_preconditioner_options


@pytest.fixture(scope="module")
def column():
    return bubbly_column(16, 1e3)


@pytest.fixture
def no_setup(monkeypatch):
    """Any set-up work fails the test: the checks come first."""
    monkeypatch.setattr(solver_mod.PressureSolver, "update",
                        lambda *a, **k: pytest.fail("the set-up started"))


@pytest.mark.parametrize("name, options, words", [
    ("multigrid", {"degre": 3}, ["'degre'", "'multigrid'", "did you mean 'degree'?",
                                 "degree, ratio, scale, coarsest, min_side, cycle_precision, "
                                 "w_levels"]),
    ("jacobi", {"block_lines": 4}, ["'block_lines'", "'jacobi'", "its options: check"]),
    ("block_ic", {"lines": 4}, ["'lines'", "'block_ic'", "its options: block_lines"]),
    ("none", {"degree": 2}, ["'degree'", "'none'", "its options: none"]),
])
def test_an_unknown_option_name_is_refused(column, no_setup, name, options, words):
    A, _, phi = column
    with pytest.raises(ValueError) as err:
        PressureSolver(A, method="pcg", preconditioner=name, deflation="none",
                       preconditioner_options=options)
    message = str(err.value)
    assert "\n" not in message and message.startswith(f"preconditioner {name!r} takes no option")
    for word in words:
        assert word in message, message


@pytest.mark.parametrize("key, value", [
    ("degree", 0), ("degree", 2.5), ("degree", True), ("ratio", 1.0), ("scale", 2.0),
    ("scale", float("nan")), ("coarsest", 0), ("min_side", -1),
    ("cycle_precision", "float16"), ("w_levels", -1), ("w_levels", "many"),
])
def test_a_value_is_refused_as_the_case_file_refuses_it(column, no_setup, key, value, tmp_path):
    A, _, _ = column
    with pytest.raises(ValueError) as err:
        PressureSolver(A, method="pcg", preconditioner="multigrid",
                       preconditioner_options={key: value})
    message = str(err.value)
    assert message.startswith(f"preconditioner 'multigrid': {key}={value!r}: expected "), message
    # The same words as the case file's error for the same value.
    with pytest.raises(CaseError) as case_err:
        case_from_dict({"solver": {"method": "pcg", "preconditioner": {"type": "multigrid",
                                                                       key: value}}})
    assert case_err.value.expected and case_err.value.expected in message


@pytest.mark.parametrize("kwargs, fragment", [
    (dict(method="gmres"), "method 'gmres'; expected one of"),
    (dict(preconditioner="multgrid"), "unknown preconditioner 'multgrid'; expected one of"),
    (dict(deflation="stripe"), "unknown deflation 'stripe'; expected one of"),
    (dict(variant="adef3"), "variant='adef3'; expected 'adef2' or 'def1'"),
    (dict(preconditioner="block_ic", block_lines=1), "block_lines=1: expected an integer >= 2"),
    (dict(subdomains=(0, 4)), "subdomains=(0, 4): expected two integers"),
    (dict(subdomains=4), "subdomains=4: expected two integers"),
    (dict(cells_per_subdomain=0), "cells_per_subdomain=0: expected an integer >= 1"),
    (dict(deflation="stripes", stripes=0), "stripes=0: expected an integer >= 1"),
    (dict(maxiter=0), "maxiter=0: expected an integer >= 1"),
    (dict(check_every=2.5), "check_every=2.5: expected an integer >= 1"),
    (dict(rtol=-1e-8), "rtol=-1e-08: expected a real, non-negative number"),
    (dict(atol="0"), "atol='0': expected a real, non-negative number"),
    (dict(preconditioner_options=[("degree", 2)]), "preconditioner_options=[('degree', 2)]: "
                                                   "expected a mapping"),
])
def test_the_other_keyword_options_are_checked(column, no_setup, kwargs, fragment):
    A, _, phi = column
    with pytest.raises(ValueError) as err:
        PressureSolver(A, phi=phi, **kwargs)
    assert fragment in str(err.value) and "\n" not in str(err.value)


def test_accepted_options_reach_the_preconditioner(column):
    A, b, _ = column
    s = PressureSolver(A, method="pcg", preconditioner="multigrid",
                       preconditioner_options={"degree": 3, "w_levels": 0,
                                               "cycle_precision": "float64"})
    assert s.preconditioner_options == {"degree": 3, "w_levels": 0, "cycle_precision": "float64"}
    x, rec = s.solve(b)
    assert rec.converged


def test_from_config_passes_only_the_options_of_its_preconditioner(column):
    """The case's section holds every preconditioner's keys: none is refused."""
    A, b, phi = column
    case = case_from_dict({"grid": {"nx": 16, "ny": 16},
                           "solver": {"method": "dpcg",
                                      "preconditioner": {"type": "jacobi", "degree": 3},
                                      "deflation": {"type": "levelset_subdomains",
                                                    "subdomains": [2, 2]}}})
    s = PressureSolver.from_config(A, case.solver, phi=phi)
    assert set(s.preconditioner_options) <= set(registry.PRECONDITIONERS["jacobi"].options)


def test_the_check_is_public_and_converts_as_the_case_file():
    assert check_preconditioner_options("multigrid", {"ratio": "5", "w_levels": "auto"}) == \
        {"ratio": 5.0, "w_levels": "auto"}
    with pytest.raises(ValueError, match="unknown preconditioner 'bogus'"):
        check_preconditioner_options("bogus", {})
