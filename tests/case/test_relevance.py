"""A ``--set`` that changes nothing given the rest of the case is said in one
line before any work, naming the key, the value and why; the run goes on."""
import dataclasses
import os
import shutil

import pytest

from bubbleflow.apps.cli import main
from bubbleflow.apps.sweep import prepare_study
from bubbleflow.case.config import PreconditionerConfig, DeflationConfig, case_from_dict, load_case
from bubbleflow.case.relevance import APPLIES_ONLY_WHEN, ineffective_settings
from bubbleflow.linalg import registry

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
COLUMN = os.path.join(ROOT, "cases", "bubbly_column.yaml")

BUBBLE = {"bubbles": [{"center": [0.5, 0.4], "radius": 0.15}]}
PRESSURE = {"grid": {"nx": 16, "ny": 16}, "geometry": BUBBLE}
# The method written: deflation options alone would make it dpcg.
PCG = dict(PRESSURE, solver={"method": "pcg"})
FLOW = {"mode": "flow", "grid": {"nx": 16, "ny": 16}, "geometry": BUBBLE,
        "time": {"end": 0.1}}


def column_copy(tmp_path):
    """The bubbly column case as a file of this test's own (a warning is said
    once per process and file)."""
    path = tmp_path / "bubbly_column.yaml"
    shutil.copyfile(COLUMN, path)
    return str(path)


def settings(data, *overrides):
    """``[(key, reason)]`` of the overrides that change nothing."""
    case = case_from_dict(data, overrides=list(overrides), warn=False)
    return [(s.key, s.reason) for s in ineffective_settings(case)]


@pytest.mark.parametrize("data,overrides,key,why", [
    (PCG, ["solver.deflation.subdomains=[4,4]"], "solver.deflation.subdomains",
     "solver.deflation.type is 'none'; only subdomains and levelset_subdomains read it"),
    (PRESSURE, ["solver.preconditioner.type=jacobi", "solver.preconditioner.block_lines=4"],
     "solver.preconditioner.block_lines",
     "solver.preconditioner.type is 'jacobi'; only block_ic reads it"),
    (PRESSURE, ["solver.preconditioner.type=block_ic", "solver.preconditioner.degree=3"],
     "solver.preconditioner.degree", "only multigrid reads it"),
    (PRESSURE, ["solver.variant=def1"], "solver.variant", "solver.method is 'pcg' without"),
    (PRESSURE, ["time.dt_max=0.01"], "time.dt_max", "mode is 'pressure'; only mode 'flow'"),
    (PRESSURE, ["output.interval=0.1"], "output.interval", "mode is 'pressure'"),
    (PRESSURE, ["solver.preconditioner.coarse_refresh=4"], "solver.preconditioner.coarse_refresh",
     "mode is 'pressure'"),
    (FLOW, ["solver.preconditioner.type=jacobi", "solver.preconditioner.coarse_refresh=4"],
     "solver.preconditioner.coarse_refresh", "only multigrid reads it"),
    (FLOW, ["time.dt=0.001", "time.dt_max=0.01"], "time.dt_max",
     "time.dt = 0.001 fixes the step"),
    (FLOW, ["time.dt=0.001", "time.cfl=0.5"], "time.cfl", "fixes the step"),
    (FLOW, ["levelset.method=clsvof", "levelset.reinit_every=3"], "levelset.reinit_every",
     "levelset.method is 'clsvof', which rebuilds the level set"),
    (FLOW, ["levelset.method=levelset", "levelset.reinit_every=0",
            "levelset.reinit_iterations=2"], "levelset.reinit_iterations",
     "levelset.reinit_every is 0"),
    (FLOW, ["momentum.viscosity=explicit", "momentum.viscous_rtol=1e-6"],
     "momentum.viscous_rtol", "momentum.viscosity is 'explicit'"),
    (FLOW, ["boundaries.front=no_slip"], "boundaries.front", "the grid is 2-D"),
    (dict(PRESSURE, geometry={}), ["fluids.gas.density=2"], "fluids.gas.density",
     "the geometry puts no gas in the domain"),
    (FLOW, ["output.compression=none", "output.compression_level=5"],
     "output.compression_level", "output.compression 'none' stores the fields uncompressed"),
])
def test_a_setting_that_changes_nothing_is_found_with_its_reason(data, overrides, key, why):
    found = settings(data, *overrides)
    assert [k for k, _ in found] == [key]
    assert why in found[0][1]


@pytest.mark.parametrize("data,overrides", [
    (PRESSURE, ["solver.deflation.type=subdomains", "solver.deflation.subdomains=[4,4]"]),
    (PRESSURE, ["solver.deflation.subdomains=[4,4]"]),          # makes the method dpcg
    (PRESSURE, ["solver.preconditioner.type=block_ic", "solver.preconditioner.block_lines=4"]),
    (PRESSURE, ["solver.deflation.type=stripes", "solver.variant=def1"]),
    (FLOW, ["time.dt_max=0.01", "time.cfl=0.5"]),
    (FLOW, ["levelset.method=levelset", "levelset.reinit_every=3",
            "levelset.reinit_iterations=2"]),
    (FLOW, ["physics.surface_tension=0.07", "fluids.gas.density=2"]),
    (PRESSURE, ["grid.nx=32", "solver.rtol=1e-6", "geometry.free_surface=0.9"]),
    (PRESSURE, ["solver.deflation.subdomains=null"]),          # a default restored
    (PRESSURE, ["output.compression_level=5"]),      # auto: gzip where a field shrinks
    (FLOW, ["output.compression_level=5"]),
    (PRESSURE, ["output.compression=gzip", "output.compression_level=5"]),
])
def test_settings_that_change_the_run_are_not_reported(data, overrides):
    assert settings(data, *overrides) == []


def test_the_option_rules_follow_the_registry():
    """Every option of solver.preconditioner and solver.deflation is reported
    exactly where the chosen entry's registry ``options`` do not list it."""
    concrete = {"subdomains": [4, 4], "cells_per_subdomain": 8}
    for section, config, table in (("preconditioner", PreconditionerConfig,
                                    registry.PRECONDITIONERS),
                                   ("deflation", DeflationConfig, registry.DEFLATIONS)):
        options = [f.name for f in dataclasses.fields(config)
                   if f.name != "type" and "spec" in f.metadata]
        assert all(any(o in e.options for e in table.values()) for o in options), options
        for name, entry in table.items():
            if 2 not in entry.dimensions:
                continue
            for option in options:
                default = getattr(config(), option)
                value = concrete.get(option, default)
                text = str(value).replace(" ", "").replace("'", "")
                # (a flow's refreshes are what coarse_refresh spaces out)
                data = FLOW if option == "coarse_refresh" else PRESSURE
                found = settings(data, f"solver.{section}.type={name}",
                                 f"solver.{section}.{option}={text}")
                keys = [k for k, _ in found]
                expected = [] if option in entry.options else [f"solver.{section}.{option}"]
                assert keys == expected, (name, option, found)


def test_every_rule_names_keys_of_the_schema():
    case = case_from_dict({}, warn=False)
    for rule in APPLIES_ONLY_WHEN:
        for path in rule.keys:
            node = case
            for seg in path:
                assert hasattr(node, seg), path
                node = getattr(node, seg)


def test_a_section_override_names_the_key_inside_it(tmp_path, capsys):
    path = tmp_path / "case.yaml"
    path.write_text("grid: {nx: 16, ny: 16}\n")
    load_case(str(path), ["solver.preconditioner={type: jacobi, block_lines: 4}"])
    err = capsys.readouterr().err.strip()
    assert err == (f"warning: {path}: --set solver.preconditioner={{type: jacobi, "
                   "block_lines: 4}: solver.preconditioner.block_lines = 4 changes nothing: "
                   "solver.preconditioner.type is 'jacobi'; only block_ic reads it")


def test_keys_written_in_the_file_and_created_sections_are_not_reported(tmp_path, capsys):
    path = tmp_path / "case.yaml"
    path.write_text("grid: {nx: 16, ny: 16}\nsolver:\n  deflation: {subdomains: [4, 4]}\n"
                    "  preconditioner: {type: multigrid}\n")
    case = load_case(str(path), ["solver.deflation.type=none", "time.end=2"])
    assert [s.key for s in ineffective_settings(case)] == ["time.end"]   # not `time`
    assert capsys.readouterr().err.count("\n") == 1


def test_run_says_the_override_in_one_line_before_the_work_and_goes_on(tmp_path, capsys):
    column = column_copy(tmp_path)
    rc = main(["run", column, "--backend", "numpy", "--no-progress", "-o", str(tmp_path),
               "--set", "grid.nx=16", "--set", "grid.ny=16",
               "--set", "solver.deflation.subdomains=[4,4]", "--set", "time.dt_max=0.01"])
    assert rc == 0
    assert (tmp_path / "bubbly_column.h5").is_file()              # the run went on
    out, err = capsys.readouterr()
    lines = err.splitlines()
    assert lines == [
        f"warning: {column}: --set solver.deflation.subdomains=[4,4] changes nothing: "
        "solver.deflation.type is 'none'; only subdomains and levelset_subdomains read it",
        f"warning: {column}: --set time.dt_max=0.01 changes nothing: mode is 'pressure'; "
        "only mode 'flow' reads it",
    ]
    assert out                                                    # the work came after


def test_a_sweep_says_an_override_once_and_only_if_no_point_reads_it(tmp_path, capsys):
    column = column_copy(tmp_path)
    prepare_study(column, params=["solver.preconditioner.type"], values=["multigrid,block_ic"],
                  overrides=["grid.nx=16", "grid.ny=16", "solver.deflation.subdomains=[4,4]",
                             "solver.preconditioner.block_lines=4",
                             "solver.preconditioner.degree=3"],
                  output=str(tmp_path), backend="numpy")
    lines = capsys.readouterr().err.splitlines()
    # block_lines is read by the block_ic point, degree by the multigrid one.
    assert lines == [f"warning: {column}: --set solver.deflation.subdomains=[4,4] changes "
                     "nothing: solver.deflation.type is 'none'; only subdomains and "
                     "levelset_subdomains read it"]


def test_the_same_warning_is_said_once_per_process(tmp_path, capsys):
    path = tmp_path / "case.yaml"
    path.write_text("grid: {nx: 16, ny: 16}\n")
    for _ in range(3):                     # a benchmark loads its case once per size
        load_case(str(path), ["solver.variant=def1"])
    assert len(capsys.readouterr().err.splitlines()) == 1
