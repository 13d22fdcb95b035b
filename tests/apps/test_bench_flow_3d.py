"""`bubbleflow bench --flow` on 3-D cases: the named 3-D cases, sizes of three
axes, titles and columns that name nz, and floors that count the whole 3-D
grid and the fields of a 3-D step (three velocity components, three face
densities, CLSVOF's volume fraction).

Small and quick, on NumPy; timings are never asserted on.
"""
import contextlib
import csv
import io
import math

import pytest

from bubbleflow.apps.bench import flow_floors
from bubbleflow.apps.bench.flow_cases import (NAMED_CASES, build_configs, named_case_data,
                                              parse_size, size_cells, subdomain_counts)
from bubbleflow.apps.bench.flow_report import h_text
from bubbleflow.apps.cli import main
from bubbleflow.case.config import CaseError, case_from_dict
from bubbleflow.linalg.registry import VECTOR_ARRAYS


def case_at(name, cells, *overrides):
    """The named case at ``cells`` (x first) with ``--set`` style overrides."""
    keys = ("grid.nx", "grid.ny", "grid.nz")
    grid = [f"{k}={n}" for k, n in zip(keys, cells)]
    return case_from_dict(named_case_data(name), "test", grid + list(overrides))


def run_cli(args):
    stdout, stderr = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(stdout), contextlib.redirect_stderr(stderr):
        code = main(args)
    return code, stdout.getvalue(), stderr.getvalue()


def test_named_3d_cases_default_to_3d_sizes_in_the_case_aspect():
    for name in ("rising3d", "column3d"):
        base = case_from_dict(named_case_data(name))
        assert base.grid.ndim == 3
        for on_device, sizes in ((True, NAMED_CASES[name].gpu_sizes),
                                 (False, NAMED_CASES[name].cpu_sizes)):
            configs = build_configs([name], None, [], on_device=on_device)
            assert [c.case.grid.nx for c in configs] == list(sizes)
            for c in configs:
                g = c.case.grid
                # The case's aspect: ny / nx and nz / nx as in the shipped file.
                assert (g.ny * base.grid.nx, g.nz * base.grid.nx) == (
                    g.nx * base.grid.ny, g.nx * base.grid.nz)
                assert c.title == f"{name} {g.nx} x {g.ny} x {g.nz}"


def test_sizes_take_one_number_or_one_per_axis_of_the_case():
    assert parse_size("12") == (12,)
    assert parse_size("12x24") == (12, 24)
    assert parse_size("12x12X24") == (12, 12, 24)
    for bad in ("3", "12x", "12x12x12x12", "ax4", "12x2x12"):
        with pytest.raises(CaseError, match="--sizes: got"):
            parse_size(bad)
    flat = case_from_dict(named_case_data("hysing")).grid
    deep = case_from_dict(named_case_data("rising3d")).grid
    assert size_cells((12,), deep, "rising3d", "12") == (12, 12, 2 * 12)
    assert size_cells((8, 12, 20), deep, "rising3d", "8x12x20") == (8, 12, 20)
    assert size_cells((12,), flat, "hysing", "12") == (12, 24)
    with pytest.raises(CaseError) as exc:
        size_cells((12, 24), deep, "rising3d", "12x24")
    assert str(exc.value) == ("bubbleflow bench: --sizes: got '12x24' for rising3d, a 3-D case; "
                              "expected NX (ny, nz from the case's aspect) or NXxNYxNZ")
    with pytest.raises(CaseError, match="got '12x12x24' for hysing, a 2-D case; expected NX "
                                        r"\(ny from the case's aspect\) or NXxNY"):
        size_cells((12, 12, 24), flat, "hysing", "12x12x24")


@pytest.mark.parametrize("args, fragment", [
    (["--cases", "rising3d", "--sizes", "16x32"], "--sizes: got '16x32' for rising3d, a 3-D"),
    (["--cases", "hysing,column3d", "--sizes", "16", "16x32"], "for column3d, a 3-D case"),
    (["--cases", "hysing", "--sizes", "16x16x32"], "--sizes: got '16x16x32' for hysing, a 2-D"),
    (["--cases", "rising3d", "--sizes", "16", "--set", "grid.nz=8"],
     "--set: got grid.nz together with --sizes"),
])
def test_sizes_of_the_wrong_dimension_are_one_line(args, fragment, capsys, monkeypatch):
    from bubbleflow.apps import bench as bench_mod

    monkeypatch.setattr(bench_mod, "run_flow_bench", lambda *a, **k: pytest.fail("it ran"))
    assert main(["bench", "--flow", "--backend", "numpy", *args]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and err.startswith("error: ")
    assert fragment in err


def test_a_3d_size_that_cannot_fit_names_its_three_sizes(capsys, monkeypatch):
    import bubbleflow.compute.backend as backend_mod
    from bubbleflow.apps import bench as bench_mod

    monkeypatch.setattr(bench_mod, "run_flow_bench", lambda *a, **k: pytest.fail("it ran"))
    monkeypatch.setattr(backend_mod, "host_available_memory", lambda: 2 ** 30)
    assert main(["bench", "--flow", "--backend", "numpy", "--cases", "rising3d", "--sizes",
                 "16", "512"]) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1
    assert "--sizes: got 512 (rising3d 512 x 512 x 1024), which does not fit" in err


def test_every_phase_floor_scales_with_the_whole_3d_grid():
    small = case_at("rising3d", (8, 8, 16))
    tall = case_at("rising3d", (8, 8, 32))
    assert flow_floors.cell_bytes(tall) == 8 * 8 * 8 * 32
    for name in flow_floors.PHASE_FIELDS:
        assert flow_floors.phase_bytes(tall, name) == 2 * flow_floors.phase_bytes(small, name)
    floors = flow_floors.phase_floors(tall, list(flow_floors.PHASE_FIELDS), 1.0, 1e9, 1e9)
    small_floors = flow_floors.phase_floors(small, list(flow_floors.PHASE_FIELDS), 1.0, 1e9, 1e9)
    assert floors[flow_floors.OUTPUT][0] == 2 * small_floors[flow_floors.OUTPUT][0]


def test_3d_phases_count_three_components_and_the_volume_fraction():
    # Counted by hand from the step (FlowSolver.step): a 3-D CLSVOF case with
    # reduced gravity and the explicit viscous limit.
    case = case_at("rising3d", (8, 8, 16))
    assert case.levelset.method == "clsvof"
    expected = {
        "properties": 1 + 3 + 3,          # phi -> H, rho, mu, rho on the faces of 3 axes
        "finite check": 3 + 1 + 2,        # u, v, w, phi, rho, mu
        "time step": 0,                   # host arithmetic
        "pressure set-up": 3 + 3,         # 3 face densities -> 3 couplings (matrix free)
        "momentum": 3 + 1 + 1 + 1 + 3 + 3 + 2,   # u, phi, H, mu, faces -> u*, div u*, rhs
        "correction": 3 + 1 + 3 + 1 + 3,  # u*, p, faces, div u* -> u
        "advection": 2 + 3 + 2,           # phi, c, u, v, w -> phi, c
        "reinitialisation": 3,            # phi, c -> phi, every step
        "diagnostics": 1 + 3 + 1 + 1 + 3,  # phi, u, c, and the old phi and velocity
    }
    cells = 8 * 8 * 16
    assert {name: flow_floors.phase_bytes(case, name) / (8 * cells)
            for name in flow_floors.PHASE_FIELDS} == expected
    stored = case_at("rising3d", (8, 8, 16), "operator.storage=diagonals")
    assert flow_floors.phase_bytes(stored, "pressure set-up") == (3 + 7) * 8 * cells
    # phi, rho, p, u, v, w; the cell velocity (3); c; the dynamic pressure.
    assert flow_floors.field_count(flow_floors.OUTPUT_FIELDS, case) == 6 + 3 + 1 + 1
    # A level set alone: no volume fraction, and phi reinitialised every 5th step.
    plain = case_at("rising3d", (8, 8, 16), "levelset.method=levelset")
    assert flow_floors.phase_bytes(plain, "advection") == (1 + 3 + 1) * 8 * cells
    assert flow_floors.phase_bytes(plain, "reinitialisation") == pytest.approx(2 * 8 * cells / 5)
    never = case_at("rising3d", (8, 8, 16), "levelset.method=levelset",
                    "levelset.reinit_every=0")
    assert flow_floors.phase_bytes(never, "reinitialisation") == 0


def test_3d_subdomains_fit_every_axis(tmp_path):
    text = NAMED_CASES["rising3d"].text
    assert "method: pcg" in text and "preconditioner: {type: multigrid}" in text
    path = tmp_path / "rising.yaml"
    path.write_text(text.replace("method: pcg", "method: dpcg").replace(
        "preconditioner: {type: multigrid}", "preconditioner: {type: incomplete_poisson_scaled}")
        .replace("deflation: {type: none}", "deflation: {type: subdomains, subdomains: [4, 4, 8]}"))
    (one,) = build_configs([str(path)], [((12, 12, 20), "12x12x20")], [], on_device=False)
    assert subdomain_counts(one.case) == (4, 4, 10)
    assert one.subdomains_note == ("deflation subdomains 4 x 4 x 10 (the case's 4 x 4 x 8 do not "
                                   "divide 12 x 12 x 20: the nearest divisors)")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
    path = tmp_path_factory.mktemp("bench_flow_3d") / "rows.csv"
    code, out, err = run_cli(["bench", "--flow", "--cases", "rising3d", "--sizes", "12",
                              "--steps", "2", "--skip", "1", "--backend", "numpy",
                              "--copy-mib", "4", "--no-progress", "--csv", str(path)])
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    return dict(code=code, out=out, err=err, rows=rows)


def test_a_tiny_3d_run_names_its_three_sizes_and_writes_nz(tiny_run):
    assert tiny_run["code"] == 0, tiny_run["err"]
    assert tiny_run["err"] == ""
    assert f"# rising3d 12 x 12 x 24 (rising_bubble_3d, h = {h_text(1 / 12)}, clsvof)" \
        in tiny_run["out"]
    rows = tiny_run["rows"]
    assert rows[-1]["phase"] == "step"
    for r in rows:
        assert (r["status"], r["nx"], r["ny"], r["nz"], r["cells"]) == (
            "ok", "12", "12", "24", str(12 * 12 * 24))
        assert float(r["h"]) == pytest.approx(1 / 12)
    by_phase = {r["phase"]: r for r in rows}
    # Every phase the step reported has a floor on the whole 3-D grid.
    for name in flow_floors.PHASE_FIELDS:
        assert float(by_phase[name]["bytes_per_step"]) == pytest.approx(
            flow_floors.phase_bytes(case_at("rising3d", (12, 12, 24)), name))
    # The solve: at least CG's vector work on every cell of the 3-D grid.
    step = by_phase["step"]
    assert int(step["bytes_per_iteration"]) >= 8 * math.prod((12, 12, 24)) * VECTOR_ARRAYS
    assert float(by_phase[flow_floors.SOLVE]["bytes_per_step"]) == pytest.approx(
        float(step["iterations_mean"]) * int(step["bytes_per_iteration"]), rel=1e-6)
    assert float(step["ns_per_cell"]) == pytest.approx(
        1e6 * float(step["step_ms"]) / (12 * 12 * 24), rel=1e-9)
