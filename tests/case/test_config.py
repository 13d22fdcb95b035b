"""Case files: defaults, overrides, and one clear line for every kind of mistake."""
import dataclasses
import glob
import os
import pickle
import textwrap

import pytest
import yaml

from bubbleflow.case.config import (
    DEFLATIONS, METHODS, PRECONDITIONERS, VARIANTS, Case, CaseError, case_from_dict,
    lattice_centres, load_case,
)
from bubbleflow.case.config import initial_dt_limits, viscosity_scheme
from bubbleflow.linalg import registry
from bubbleflow.mesh.grid import blocks_near

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def write(tmp_path, text, name="case.yaml"):
    path = tmp_path / name
    path.write_text(textwrap.dedent(text).lstrip("\n"))
    return str(path)


def error_of(fn, *args, **kwargs):
    """The CaseError raised by ``fn``; checks that its message is one line."""
    with pytest.raises(CaseError) as info:
        fn(*args, **kwargs)
    msg = str(info.value)
    assert "\n" not in msg and "\r" not in msg
    return info.value


# --------------------------------------------------------------------------
# Defaults and method-dependent defaults
# --------------------------------------------------------------------------

def test_defaults_filled(tmp_path):
    case = load_case(write(tmp_path, "grid: {nx: 64}\n", name="my_case.yaml"))
    assert isinstance(case, Case)
    assert case.name == "my_case"                      # the file stem
    assert case.source.endswith("my_case.yaml")
    assert (case.mode, case.backend, case.precision) == ("pressure", "auto", "float64")
    assert (case.grid.nx, case.grid.ny, case.grid.lx, case.grid.ly) == (64, 128, 1.0, 1.0)
    assert case.fluids.liquid.density == 1000.0 and case.fluids.liquid.viscosity == 1.0e-3
    assert case.fluids.gas.density == 1.0 and case.fluids.gas.viscosity == 1.8e-5
    assert case.physics.gravity == 9.81
    g = case.geometry
    assert g.free_surface is None and g.bubbles == () and g.droplets == ()
    assert g.bubble_lattice is None and g.random_bubbles is None
    assert (case.operator.face_density, case.operator.storage) == ("arithmetic", "diagonals")
    s = case.solver
    assert (s.method, s.variant) == ("pcg", "adef2")
    assert s.preconditioner.type == "multigrid" and s.preconditioner.block_lines == 2
    assert (s.preconditioner.cycle_precision, s.preconditioner.w_levels) == ("float32", "auto")
    assert s.deflation.type == "none"
    assert s.deflation.subdomains is None and s.deflation.cells_per_subdomain is None
    c = registry.DEFAULT_CELLS_PER_SUBDOMAIN
    assert s.deflation.subdomain_counts(64, 128) == (blocks_near(64, c), blocks_near(128, c))
    assert s.deflation.stripes == 16
    assert (s.rtol, s.atol, s.maxiter, s.check_every) == (1e-8, 0.0, 10000, 10)
    assert case.output.directory == "outputs"


def test_subdomains_follow_the_grid_by_default(tmp_path):
    """Refining a case refines its deflation (subdomains of about
    ``cells_per_subdomain`` cells); written subdomain counts stay as written."""
    path = write(tmp_path, "grid: {nx: 40, ny: 80}\n"
                           "solver: {deflation: {cells_per_subdomain: 8}}\n")
    coarse = load_case(path)
    fine = load_case(path, ["grid.nx=160", "grid.ny=320"])
    assert coarse.solver.deflation.subdomain_counts(40, 80) == (5, 10)
    assert fine.solver.deflation.subdomain_counts(160, 320) == (20, 40)
    # The explicit form is kept as it is when cells_per_subdomain is not written.
    explicit = load_case(write(tmp_path, "grid: {nx: 160, ny: 320}\n"
                                         "solver: {deflation: {subdomains: [8, 8]}}\n",
                               name="explicit.yaml"))
    assert explicit.solver.deflation.subdomain_counts(160, 320) == (8, 8)
    # A case's dict (both keys, in agreement) round-trips.
    again = case_from_dict(fine.to_dict())
    assert again.solver.deflation == fine.solver.deflation


def test_subdomains_and_cells_that_disagree_are_refused(tmp_path):
    path = write(tmp_path, "grid: {nx: 64, ny: 64}\n"
                           "solver: {deflation: {subdomains: [4, 4], cells_per_subdomain: 8}}\n")
    with pytest.raises(CaseError) as e:
        load_case(path)
    msg = str(e.value)
    assert "solver.deflation.subdomains: got [4, 4] and cells_per_subdomain 8" in msg
    assert "one of the two" in msg and "\n" not in msg


def test_dict_defaults_and_name():
    case = case_from_dict({})
    assert case.name == "case" and case.source == "<dict>"
    assert case_from_dict({"name": "x"}).name == "x"
    # Sections given as null mean "all defaults".
    assert case_from_dict({"grid": None, "geometry": {"bubbles": None}}).grid.nx == 128


@pytest.mark.parametrize("method, pc, df", [
    ("cg", "none", "none"),
    ("pcg", "multigrid", "none"),
    ("dpcg", "incomplete_poisson_scaled", "levelset_subdomains"),
])
def test_method_dependent_defaults(method, pc, df):
    s = case_from_dict({"solver": {"method": method}}).solver
    assert (s.preconditioner.type, s.deflation.type) == (pc, df)


def test_explicit_choices_kept():
    s = case_from_dict({"solver": {"method": "pcg", "preconditioner": {"type": "jacobi"}}}).solver
    assert (s.preconditioner.type, s.deflation.type) == ("jacobi", "none")
    s = case_from_dict({"solver": {"method": "dpcg", "preconditioner": {"type": "none"},
                                   "deflation": {"type": "subdomains"}}}).solver
    assert (s.preconditioner.type, s.deflation.type) == ("none", "subdomains")


def test_case_is_frozen_and_hashable():
    case = case_from_dict({})
    with pytest.raises(dataclasses.FrozenInstanceError):
        case.grid.nx = 3
    assert hash(case) == hash(case_from_dict({}))


def test_enums_match_the_numerics():
    from bubbleflow.linalg.deflation.space import DEFLATIONS as NUM_DEFLATIONS
    from bubbleflow.linalg.precond import PRECONDITIONERS as NUM_PRECONDITIONERS
    from bubbleflow.linalg.solver import METHODS as NUM_METHODS, VARIANTS as NUM_VARIANTS

    assert set(PRECONDITIONERS) == set(NUM_PRECONDITIONERS)
    assert set(DEFLATIONS) == set(NUM_DEFLATIONS)
    assert set(METHODS) == set(NUM_METHODS) and set(VARIANTS) == set(NUM_VARIANTS)


@pytest.mark.parametrize("path", sorted(glob.glob(os.path.join(ROOT, "cases", "*.yaml"))))
def test_shipped_cases_load(path):
    with open(path) as fh:
        data = yaml.safe_load(fh)
    if "sweep" in data:
        # A study file: `bubbleflow run` refuses it; its base case must load.
        with pytest.raises(CaseError, match="sweep"):
            load_case(path)
        data.pop("sweep")
        case = case_from_dict(data, source=path)
    else:
        case = load_case(path)
    assert case_from_dict(yaml.safe_load(case.to_yaml())).to_dict() == case.to_dict()


# --------------------------------------------------------------------------
# Round trip
# --------------------------------------------------------------------------

FULL = """
name: full
backend: numpy
precision: float64
grid: {nx: 64, ny: 32, lx: 2.0, ly: 1.0}
fluids:
  gas: {density: 1.2}
geometry:
  free_surface: 0.8
  bubbles:
    - {center: [0.5, 0.3], radius: 0.1}
  droplets:
    - {center: [1.5, 0.9], radius: 0.05}
  bubble_lattice: {columns: 2, rows: 1, radius: 0.05, x_range: [1.0, 1.8], y_range: [0.1, 0.5]}
  random_bubbles: {count: 3, radius: 0.02, seed: 7, region: [0.1, 1.9, 0.1, 0.7]}
operator: {face_density: harmonic, storage: matrix_free}
solver:
  method: dpcg
  variant: def1
  preconditioner: {type: block_ic, block_lines: 4}
  deflation: {type: stripes, stripes: 8}
  rtol: 1e-6
  maxiter: 500
output: {directory: results}
"""


def test_to_yaml_round_trips(tmp_path):
    case = load_case(write(tmp_path, FULL))
    d = case.to_dict()
    assert d["solver"]["rtol"] == 1e-6
    assert d["geometry"]["bubbles"] == [{"center": [0.5, 0.3], "radius": 0.1}]
    assert d["geometry"]["bubbles"][0]["center"] == [0.5, 0.3]      # lists, not tuples
    assert d["solver"]["deflation"]["subdomains"] is None           # from cells_per_subdomain
    again = case_from_dict(yaml.safe_load(case.to_yaml()))
    assert again.to_dict() == d
    assert dataclasses.replace(again, source=case.source) == case
    assert "source" not in d


def test_to_dict_is_plain():
    def check(obj):
        if isinstance(obj, dict):
            for k, v in obj.items():
                assert isinstance(k, str)
                check(v)
        elif isinstance(obj, list):
            for v in obj:
                check(v)
        else:
            assert obj is None or isinstance(obj, (str, int, float, bool))
    check(case_from_dict(yaml.safe_load(FULL)).to_dict())


# --------------------------------------------------------------------------
# Overrides
# --------------------------------------------------------------------------

def test_set_overrides_nested_keys(tmp_path):
    path = write(tmp_path, FULL)
    case = load_case(path, ["grid.nx=256", "solver.deflation.type=subdomains",
                            "solver.deflation.subdomains=[8,8]", "geometry.free_surface=null",
                            "geometry.droplets=[]",     # no gas layer for it any more
                            "solver.rtol=1e-10", "geometry.bubbles[0].radius=0.2",
                            "fluids.liquid.density=998.2"])
    assert case.grid.nx == 256
    assert case.solver.deflation.type == "subdomains"
    assert case.solver.deflation.subdomains == (8, 8)
    assert case.geometry.free_surface is None
    assert case.solver.rtol == 1e-10
    assert case.geometry.bubbles[0].radius == 0.2
    assert case.fluids.liquid.density == 998.2
    assert case.grid.ny == 32                             # untouched keys stay


def test_set_creates_missing_sections(tmp_path):
    path = write(tmp_path, "name: bare\n")
    case = load_case(path, ["solver.preconditioner.type=jacobi", "solver.method=pcg",
                            "geometry.bubble_lattice={columns: 1, rows: 1, radius: 0.1, "
                            "x_range: [0.5, 0.5], y_range: [0.5, 0.5]}"])
    assert case.solver.preconditioner.type == "jacobi"
    assert case.geometry.bubble_lattice.columns == 1


def test_later_override_wins_and_tuple_overrides_are_unparsed(tmp_path):
    path = write(tmp_path, "name: x\n")
    case = load_case(path, ["grid.nx=64", "grid.nx=32", ("output.directory", "2024", "-o 2024")])
    assert case.grid.nx == 32
    assert case.output.directory == "2024"


def test_set_unknown_key_names_the_override(tmp_path):
    path = write(tmp_path, "grid: {nx: 64}\n")
    err = error_of(load_case, path, ["grid.nw=3"])
    msg = str(err)
    assert msg.startswith(f"{path} (--set grid.nw=3): grid.nw: unknown key")
    assert "did you mean" in msg and "nx, ny, lx, ly" in msg
    assert err.key == "grid.nw" and err.line is None and err.origin == "--set grid.nw=3"


def test_set_unknown_section_with_suggestion():
    msg = str(error_of(case_from_dict, {}, overrides=["solvr.rtol=1e-6"]))
    assert "(--set solvr.rtol=1e-6): solvr: unknown key; did you mean 'solver'?" in msg


def test_set_bad_value_names_the_override(tmp_path):
    path = write(tmp_path, "grid:\n  nx: 64\n")
    msg = str(error_of(load_case, path, ["grid.nx=-1"]))
    assert msg == f"{path} (--set grid.nx=-1): grid.nx: got -1; expected an integer >= 4"


@pytest.mark.parametrize("item", ["gridnx256", "=3", "grid..nx=3", "grid.nx[x]=3"])
def test_malformed_override(item):
    err = error_of(case_from_dict, {}, overrides=[item])
    assert "malformed" in str(err) and "key.path=value" in err.expected


def test_override_through_a_scalar_or_missing_item():
    msg = str(error_of(case_from_dict, {}, overrides=["grid.nx.deep=3"]))
    assert "grid.nx is 128" not in msg     # grid.nx was not in the data: a section is created
    msg = str(error_of(case_from_dict, {"grid": {"nx": 64}}, overrides=["grid.nx.deep=3"]))
    assert "grid.nx.deep: grid.nx is 64; expected a section" in msg
    msg = str(error_of(case_from_dict, {}, overrides=["geometry.bubbles[0].radius=0.1"]))
    assert "geometry.bubbles[0].radius" in msg


def test_override_value_yaml_error():
    msg = str(error_of(case_from_dict, {}, overrides=["grid.nx=[1"]))
    assert "(--set grid.nx=[1): grid.nx: cannot parse value" in msg


# --------------------------------------------------------------------------
# Bad input: one line naming file, line, key path, value and expectation
# --------------------------------------------------------------------------

def test_yaml_syntax_error_has_line_and_column(tmp_path):
    path = write(tmp_path, """
        name: x
        grid:
          nx: 64
          ny 3
          lx: 1.0
    """)
    err = error_of(load_case, path)
    assert str(err).startswith(f"{path}:5:")
    assert "YAML syntax error:" in str(err)
    assert err.line == 5


def test_yaml_syntax_error_unclosed_flow(tmp_path):
    path = write(tmp_path, "grid: {nx: 64\nsolver: {}\n")
    err = error_of(load_case, path)
    assert "YAML syntax error" in str(err) and err.line is not None


def test_missing_file(tmp_path):
    path = str(tmp_path / "nope.yaml")
    assert str(error_of(load_case, path)) == (
        f"{path}: file not found; expected a readable YAML case file")


@pytest.mark.parametrize("text, what", [("", "empty case file"), ("- 1\n- 2\n", "top level is a list"),
                                        ("just a string\n", "top level is 'just a string'")])
def test_top_level_must_be_a_mapping(tmp_path, text, what):
    path = write(tmp_path, text) if text else write(tmp_path, "# only a comment\n")
    msg = str(error_of(load_case, path))
    assert what in msg and "expected a mapping" in msg


def test_unknown_key_in_file_with_did_you_mean(tmp_path):
    path = write(tmp_path, """
        grid: {nx: 64}
        solver:
          method: dpcg
          preconditoner:
            type: jacobi
    """)
    err = error_of(load_case, path)
    assert str(err) == (
        f"{path}:4: solver.preconditoner: unknown key; did you mean 'preconditioner'? "
        "(expected one of: method, variant, preconditioner, deflation, rtol, atol, maxiter, "
        "check_every)")
    assert err.key == "solver.preconditoner" and err.line == 4


def test_unknown_key_without_suggestion():
    msg = str(error_of(case_from_dict, {"grid": {"resolution": 64}}))
    assert msg == "<dict>: grid.resolution: unknown key; expected one of: nx, ny, lx, ly, nz, lz"


def test_duplicate_key(tmp_path):
    path = write(tmp_path, "solver:\n  rtol: 1.0e-6\n  rtol: 1.0e-7\n")
    msg = str(error_of(load_case, path))
    assert msg.startswith(f"{path}:3: solver.rtol: duplicate key (first at line 2)")


@pytest.mark.parametrize("text, key, shown, expected", [
    ("grid: {nx: -5}", "grid.nx", "-5", "an integer >= 4"),
    ("grid: {nx: 0}", "grid.nx", "0", "an integer >= 4"),
    ("grid: {nx: 256.0}", "grid.nx", "256.0", "an integer >= 4"),
    ("grid: {nx: true}", "grid.nx", "true", "an integer >= 4"),
    ("grid: {nx: '64'}", "grid.nx", "'64'", "an integer >= 4"),
    ("grid: {lx: 0}", "grid.lx", "0", "a number > 0"),
    ("grid: {ly: -1.0}", "grid.ly", "-1.0", "a number > 0"),
    ("fluids: {liquid: {density: 0}}", "fluids.liquid.density", "0", "a number > 0"),
    ("fluids: {gas: {density: -1.0}}", "fluids.gas.density", "-1.0", "a number > 0"),
    ("fluids: {gas: {viscosity: abc}}", "fluids.gas.viscosity", "'abc'", "a number > 0"),
    ("physics: {gravity: -9.81}", "physics.gravity", "-9.81", "a number >= 0"),
    ("physics: {gravity: .inf}", "physics.gravity", "inf", "a finite number >= 0"),
    ("solver: {rtol: 1.5}", "solver.rtol", "1.5", "a number with 0 < rtol < 1"),
    ("solver: {rtol: 0}", "solver.rtol", "0", "a number with 0 < rtol < 1"),
    ("solver: {maxiter: 0}", "solver.maxiter", "0", "an integer >= 1"),
    ("solver: {check_every: 2.5}", "solver.check_every", "2.5", "an integer >= 1"),
    ("solver: {preconditioner: {block_lines: 1}}", "solver.preconditioner.block_lines", "1",
     "an integer >= 2"),
    ("solver: {preconditioner: {w_levels: W}}", "solver.preconditioner.w_levels", "'W'",
     "an integer >= 0 or 'auto'"),
    ("solver: {deflation: {subdomains: [8]}}", "solver.deflation.subdomains", "[8]",
     "two integers [px, py] >= 1"),
    ("solver: {deflation: {subdomains: [0, 8]}}", "solver.deflation.subdomains", "[0, 8]",
     "two integers [px, py] >= 1"),
    ("geometry: {bubbles: [{center: [0.5], radius: 0.1}]}", "geometry.bubbles[0].center",
     "[0.5]", "two numbers [x, y]"),
    ("geometry: {bubbles: [{center: [0.5, 0.5], radius: 0}]}", "geometry.bubbles[0].radius",
     "0", "a number > 0"),
    ("name: ''", "name", "''", "a non-empty name"),
    ("name: 2024", "name", "2024", "a non-empty name"),
    ("output: {directory: 3}", "output.directory", "3", "a non-empty directory path"),
])
def test_wrong_values(tmp_path, text, key, shown, expected):
    path = write(tmp_path, "# a comment first\n" + text + "\n")
    err = error_of(load_case, path)
    msg = str(err)
    assert msg.startswith(f"{path}:2: {key}: got {shown}; expected {expected}"), msg
    assert err.key == key and err.file == path and err.line == 2
    assert err.expected.startswith(expected)


@pytest.mark.parametrize("text, key, expected", [
    ("mode: turbulent", "mode", "one of: pressure, flow"),
    ("backend: gpu", "backend", "one of: auto, numpy, cupy"),
    ("precision: float16", "precision", "one of: float64"),
    ("operator: {face_density: geometric}", "operator.face_density",
     "one of: arithmetic, harmonic, levelset"),
    ("solver: {method: gmres}", "solver.method", "one of: cg, pcg, dpcg"),
    ("solver: {variant: def2}", "solver.variant", "one of: adef2, def1"),
])
def test_enum_lists_allowed_values(tmp_path, text, key, expected):
    msg = str(error_of(load_case, write(tmp_path, text + "\n")))
    assert msg.startswith(f"{msg.split(':')[0]}:1: {key}: got ") and expected in msg


def test_enum_did_you_mean():
    msg = str(error_of(case_from_dict, {"solver": {"method": "dpgc"}}))
    assert "got 'dpgc'; expected one of: cg, pcg, dpcg (did you mean 'dpcg'?)" in msg


@pytest.mark.parametrize("data, key, got, expected", [
    ({"grid": 5}, "grid", "got 5", "a mapping with keys nx, ny, lx, ly"),
    ({"grid": [64, 64]}, "grid", "got a list", "a mapping with keys nx, ny, lx, ly"),
    ({"geometry": {"bubbles": {"center": [0.5, 0.5], "radius": 0.1}}}, "geometry.bubbles",
     "got a mapping", "a list of {center: [x, y], radius: r}"),
    ({"geometry": {"bubble_lattice": [1, 2]}}, "geometry.bubble_lattice", "got a list",
     "a mapping with keys columns"),
    ({"solver": {"preconditioner": "jacobi"}}, "solver.preconditioner", "got 'jacobi'",
     "a mapping, e.g. {type: jacobi}"),
])
def test_wrong_container_types(data, key, got, expected):
    err = error_of(case_from_dict, data)
    assert str(err).startswith(f"<dict>: {key}: {got}; expected {expected}")


def test_missing_required_key_points_at_parent_line(tmp_path):
    path = write(tmp_path, """
        geometry:
          bubbles:
            - center: [0.5, 0.5]
    """)
    err = error_of(load_case, path)
    assert str(err) == (f"{path}:3: geometry.bubbles[0].radius: missing required key; "
                        "expected a number > 0")


def test_float_strings_accepted(tmp_path):
    # PyYAML reads 1e-8 (no dot) as a string; float fields take it anyway.
    path = write(tmp_path, """
        solver: {rtol: 1e-8, atol: 1E-12}
        fluids: {gas: {viscosity: 2e-5}}
        grid: {lx: 2e0}
    """)
    assert yaml.safe_load(open(path))["solver"]["rtol"] == "1e-8"
    case = load_case(path, ["solver.rtol=1e-9"])
    assert case.solver.rtol == 1e-9 and isinstance(case.solver.rtol, float)
    assert case.solver.atol == 1e-12
    assert case.fluids.gas.viscosity == 2e-5
    assert case.grid.lx == 2.0
    # Integer fields do not take them: 1e3 is not written as an integer.
    assert "got '1e3'; expected an integer" in str(error_of(case_from_dict, {"grid": {"nx": "1e3"}}))


def test_ints_accepted_for_floats():
    case = case_from_dict({"grid": {"lx": 2}, "physics": {"gravity": 0}})
    assert case.grid.lx == 2.0 and isinstance(case.grid.lx, float)
    assert case.physics.gravity == 0.0


# --------------------------------------------------------------------------
# Cross-field checks
# --------------------------------------------------------------------------

def test_bubble_outside_the_domain(tmp_path):
    path = write(tmp_path, """
        grid: {lx: 2.0}
        geometry:
          bubbles:
            - {center: [0.5, 0.5], radius: 0.1}
            - {center: [1.0, 0.5], radius: 0.2}
            - {center: [1.95, 0.5], radius: 0.1}
    """)
    err = error_of(load_case, path)
    assert str(err) == (f"{path}:6: geometry.bubbles[2]: got centre (1.95, 0.5) with radius 0.1; "
                        "expected a circle inside the domain [0, 2] x [0, 1]")


def test_circle_touching_the_wall_is_inside():
    case_from_dict({"geometry": {"bubbles": [{"center": [0.7, 0.3], "radius": 0.3}]}})


def test_droplet_outside_the_domain():
    msg = str(error_of(case_from_dict,
                       {"geometry": {"droplets": [{"center": [0.5, 0.02], "radius": 0.05}]}}))
    assert "geometry.droplets[0]: got centre (0.5, 0.02) with radius 0.05" in msg


def test_lattice_centres_and_checks():
    lat = {"columns": 3, "rows": 2, "radius": 0.05, "x_range": [0.2, 0.8], "y_range": [0.3, 0.6]}
    case = case_from_dict({"geometry": {"bubble_lattice": lat}})
    centres = lattice_centres(case.geometry.bubble_lattice)
    expected = [(0.2, 0.3), (0.5, 0.3), (0.8, 0.3), (0.2, 0.6), (0.5, 0.6), (0.8, 0.6)]
    assert len(centres) == len(expected)
    for got, want in zip(centres, expected):       # bottom row first, left to right
        assert got == pytest.approx(want)
    (single,) = lattice_centres({**lat, "columns": 1, "rows": 1})
    assert single == pytest.approx((0.5, 0.45))    # one column/row: the midpoint
    msg = str(error_of(case_from_dict, {"geometry": {"bubble_lattice": {**lat, "radius": 0.25}}}))
    assert msg.startswith("<dict>: geometry.bubble_lattice: got (column 1, row 1) centre (0.2, 0.3)")
    msg = str(error_of(case_from_dict,
                       {"geometry": {"bubble_lattice": {**lat, "x_range": [0.8, 0.2]}}}))
    assert "geometry.bubble_lattice.x_range: got [0.8, 0.2]; expected" in msg


@pytest.mark.parametrize("region, what", [
    ([0.5, 0.4, 0.0, 1.0], "x0 < x1 and y0 < y1"),
    ([0.0, 1.5, 0.0, 1.0], "a region inside the domain [0, 1] x [0, 1]"),
    ([0.1, 0.15, 0.0, 1.0], "at least 2 * radius = 0.1 wide and tall"),
    ([0.1, 0.5], "four numbers"),
])
def test_random_bubbles_region(region, what):
    data = {"geometry": {"random_bubbles": {"count": 4, "radius": 0.05, "region": region}}}
    err = error_of(case_from_dict, data)
    assert err.key == "geometry.random_bubbles.region" and what in str(err)


def test_random_bubbles_defaults():
    rb = case_from_dict({"geometry": {"random_bubbles": {"count": 4, "radius": 0.05}}}
                        ).geometry.random_bubbles
    assert (rb.seed, rb.min_gap, rb.region) == (0, 0.0, None)


@pytest.mark.parametrize("h", [0, -0.1, 1.5])
def test_free_surface_range(h):
    err = error_of(case_from_dict, {"geometry": {"free_surface": h}})
    assert err.key == "geometry.free_surface" and "0 < h <= ly = 1" in str(err)


def test_subdomains_must_fit_the_grid(tmp_path):
    path = write(tmp_path, """
        grid: {nx: 128, ny: 128}
        solver:
          deflation:
            subdomains: [5, 16]
    """)
    assert str(error_of(load_case, path)) == (
        f"{path}:4: solver.deflation.subdomains: got [5, 16] for a 128 x 128 grid; "
        "expected divisors of nx and ny")


def test_default_subdomains_fit_any_grid():
    # The default subdomains are divisors of the grid's cells: never refused.
    for nx, ny in ((100, 128), (97, 61), (4, 6)):
        case = case_from_dict({"grid": {"nx": nx, "ny": ny}})
        px, py = case.solver.deflation.subdomain_counts(nx, ny)
        assert nx % px == 0 and ny % py == 0


def test_only_the_deflation_in_use_is_checked():
    case_from_dict({"grid": {"nx": 100},
                    "solver": {"deflation": {"type": "stripes", "stripes": 8}}})
    msg = str(error_of(case_from_dict, {"solver": {"deflation": {"type": "stripes", "stripes": 10}}}))
    assert "solver.deflation.stripes: got 10 for a 128 x 128 grid; expected a divisor of ny" in msg


@pytest.mark.parametrize("lines", [3, 128])
def test_block_ic_lines_must_fit(lines):
    err = error_of(case_from_dict, {"solver": {"preconditioner": {"type": "block_ic",
                                                                  "block_lines": lines}}})
    assert err.key == "solver.preconditioner.block_lines" and "at least two blocks" in str(err)


@pytest.mark.parametrize("solver, key, expected", [
    ({"method": "cg", "preconditioner": {"type": "jacobi"}}, "solver.preconditioner.type",
     "method pcg or dpcg, or preconditioner none"),
    ({"method": "pcg", "preconditioner": {"type": "none"}}, "solver.preconditioner.type",
     "a preconditioner, or method cg"),
    ({"method": "pcg", "deflation": {"type": "subdomains"}}, "solver.deflation.type", "method dpcg"),
    ({"method": "cg", "deflation": {"type": "stripes"}}, "solver.deflation.type", "method dpcg"),
    ({"method": "dpcg", "deflation": {"type": "none"}}, "solver.deflation.type",
     "a deflation type, or method pcg"),
])
def test_method_contradictions(solver, key, expected):
    err = error_of(case_from_dict, {"solver": solver})
    assert err.key == key and err.expected.startswith(expected)
    assert f"with method '{solver['method']}'" in str(err)


def test_method_contradiction_in_file_has_line(tmp_path):
    path = write(tmp_path, """
        solver:
          method: cg
          preconditioner: {type: jacobi}
    """)
    assert str(error_of(load_case, path)) == (
        f"{path}:3: solver.preconditioner.type: got 'jacobi' with method 'cg'; "
        "expected method pcg or dpcg, or preconditioner none")


def test_from_runtime_points_at_the_key(tmp_path):
    path = write(tmp_path, "name: x\nbackend: cupy\n")
    case = load_case(path)
    err = CaseError.from_runtime(case, "backend", "got 'cupy'", "'auto' or 'numpy'")
    assert str(err) == f"{path}:2: backend: got 'cupy'; expected 'auto' or 'numpy'"
    case = load_case(path, [("backend", "cupy", "--backend cupy")])
    err = CaseError.from_runtime(case, "backend", "got 'cupy'")
    assert str(err) == f"{path} (--backend cupy): backend: got 'cupy'"


def test_case_error_pickles():
    err = error_of(case_from_dict, {"grid": {"nx": -5}})
    again = pickle.loads(pickle.dumps(err))
    assert str(again) == str(err) and again.key == "grid.nx" and again.value == -5


def test_tuple_item_error_names_the_whole_list():
    err = error_of(case_from_dict, {"geometry": {"bubbles": [{"center": [0.5, "x"], "radius": 0.1}]}})
    assert str(err) == "<dict>: geometry.bubbles[0].center: got [0.5, 'x']; expected two numbers [x, y] (three, [x, y, z], in 3-D)"
    assert err.__context__ is None


def test_method_follows_from_deflation_and_preconditioner_when_not_written():
    from bubbleflow.case.config import case_from_dict

    c = case_from_dict({"solver": {"deflation": {"type": "none"}}})
    assert c.solver.method == "pcg" and c.solver.preconditioner.type == "multigrid"
    c = case_from_dict({"solver": {"deflation": {"cells_per_subdomain": 8}}})
    assert c.solver.method == "dpcg" and c.solver.deflation.type == "levelset_subdomains"
    c = case_from_dict({"solver": {"deflation": {"type": "none"}, "preconditioner": {"type": "none"}}})
    assert c.solver.method == "cg"
    c = case_from_dict({"solver": {"deflation": {"type": "stripes"}}})
    assert c.solver.method == "dpcg"
    with pytest.raises(CaseError, match="method"):
        case_from_dict({"solver": {"method": "dpcg", "deflation": {"type": "none"}}})


# --------------------------------------------------------------------------
# Hostile files: refused before any work, in one line
# --------------------------------------------------------------------------

def _laughs(levels=9):
    """A "billion laughs": 9**levels scalars from a file of a few hundred bytes."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x]"]
    for n in range(1, levels):
        lines.append(f"a{n}: &a{n} [" + ", ".join([f"*a{n - 1}"] * 9) + "]")
    return "\n".join(lines) + "\n"


def test_alias_bomb_refused_fast_and_small(tmp_path):
    import time
    import tracemalloc

    path = write(tmp_path, _laughs())
    assert os.path.getsize(path) < 500
    tracemalloc.start()
    t0 = time.perf_counter()
    try:
        err = error_of(load_case, path)
        seconds = time.perf_counter() - t0
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert "values once aliases (*name) are expanded" in str(err)
    assert str(err).startswith(f"{path}:")
    assert seconds < 0.5 and peak < 5e6, (seconds, peak)
    # The same through an override.
    err = error_of(load_case, write(tmp_path, "name: ok\n", "ok.yaml"),
                   ["name=" + _laughs().replace("\n", " ").join("{}")])
    assert "(--set name=" in str(err)


def test_recursive_and_deep_yaml_refused(tmp_path):
    err = error_of(load_case, write(tmp_path, "name: ok\ngrid: &g [*g]\n"))
    assert ":2:7: recursive alias" in str(err)
    err = error_of(load_case, write(tmp_path, "name: " + "[" * 40 + "]" * 40 + "\n"))
    assert "nested more than 32 levels deep" in str(err)
    err = error_of(load_case, write(tmp_path, "name: " + "[" * 3000 + "]" * 3000 + "\n"))
    assert "nested more than 32 levels deep" in str(err)


def test_small_anchors_and_merge_keys_still_work(tmp_path):
    case = load_case(write(tmp_path, """
        fluids:
          liquid: &water {density: 998.0, viscosity: 1.0e-3}
          gas: {<<: *water, density: 1.2}
        geometry:
          bubbles:
            - &b {center: [0.3, 0.3], radius: 0.1}
            - {<<: *b, center: [0.7, 0.3]}
        """))
    assert case.fluids.gas.density == 1.2 and case.fluids.gas.viscosity == 1.0e-3
    assert [b.center for b in case.geometry.bubbles] == [(0.3, 0.3), (0.7, 0.3)]


@pytest.mark.parametrize("raw, fragment", [
    (b"name: ok\nfluids:\n  gas: {density: 1\x07}\n",
     ":3:19: character '\\x07' (U+0007) is not allowed in YAML"),
    (b"name: ok\x00\n", ":1:9: character '\\x00' (U+0000) is not allowed"),
    (b"name: caf\xe9\n", ":1:10: not UTF-8 text (invalid continuation byte: byte 0xe9"),
    (b"\xff\xfen\x00a\x00", ":1:1: not UTF-8 text"),
    (b"", ": empty case file; expected a mapping"),
    (b"# only a comment\n", ": empty case file"),
    (b"42\n", ":1: top level is 42"),
    (b"name: 2024-13-45\n", ": YAML value cannot be read (month must be in 1..12)"),
    (b"name: !!python/object:os.system x\n", ":1:7: YAML syntax error: could not determine"),
])
def test_unreadable_bytes_are_one_line(tmp_path, raw, fragment):
    path = tmp_path / "case.yaml"
    path.write_bytes(raw)
    err = error_of(load_case, str(path))
    assert str(err).startswith(str(path)) and fragment in str(err), str(err)


def test_huge_file_and_directory_refused(tmp_path):
    from bubbleflow.case.config import MAX_CASE_BYTES

    path = write(tmp_path, "# padding\n" * (MAX_CASE_BYTES // 10 + 1))
    assert "larger than 512 KiB" in str(error_of(load_case, path))
    (tmp_path / "dir.yaml").mkdir()
    err = error_of(load_case, str(tmp_path / "dir.yaml"))
    assert str(err).endswith("dir.yaml: is a directory; expected a readable YAML case file")
    # A device that never ends is read no further than the limit.
    if os.path.exists("/dev/zero"):
        assert "larger than" in str(error_of(load_case, "/dev/zero"))


# --------------------------------------------------------------------------
# Impossible cases: what the numerics cannot represent or finish
# --------------------------------------------------------------------------

FLOW = {"mode": "flow", "grid": {"nx": 40, "ny": 80, "lx": 1.0, "ly": 2.0},
        "fluids": {"liquid": {"density": 1000.0, "viscosity": 10.0},
                   "gas": {"density": 100.0, "viscosity": 1.0}},
        "physics": {"gravity": 0.98, "surface_tension": 24.5},
        "geometry": {"bubbles": [{"center": [0.5, 0.5], "radius": 0.25}]},
        "solver": {"deflation": {"subdomains": [8, 8]}},
        "time": {"end": 3.0}}


def flow(**changes):
    """FLOW (cases/two_phase.yaml) with dotted-key changes."""
    return case_from_dict(FLOW, overrides=[f"{k}={v}" for k, v in changes.items()])


@pytest.mark.parametrize("gas, ok", [(1e-3, True), (1e-4, False), (1e-15, False), (1e9, True),
                                     (1e10, False)])
def test_density_contrast_bound(gas, ok):
    data = {"fluids": {"gas": {"density": gas}}, "geometry": {"free_surface": 0.8}}
    if ok:
        case_from_dict(data)
        return
    err = error_of(case_from_dict, data)
    assert err.key == "fluids.gas.density"
    assert ("a contrast of at most 1e+06" in str(err)
            or "a density between 1e-12 and 1e+12" in str(err)), str(err)


def test_contrast_irrelevant_without_gas():
    # Liquid only (item 7: a valid case): the gas density is never used.
    case = case_from_dict({"fluids": {"gas": {"density": 1e-6}}})
    assert case.geometry.free_surface is None


@pytest.mark.parametrize("key, value, expected", [
    ("fluids.liquid.viscosity", 1e-13, "a viscosity between 1e-12 and 1e+12 Pa s"),
    ("fluids.liquid.density", 1e13, "a density between 1e-12 and 1e+12 kg/m^3"),
    ("grid.lx", 1e-10, "a length between 1e-09 and 1e+09 m"),
    ("physics.gravity", 1e13, "a number between 0 and 1e+12"),
    ("grid.lx", 10 ** 400, "a finite number > 0"),
])
def test_magnitudes_float64_can_carry(key, value, expected):
    err = error_of(case_from_dict, {}, overrides=[(key, value)])
    assert err.key == key and expected in str(err), str(err)


def test_grid_too_many_cells_for_32_bit_offsets():
    err = error_of(case_from_dict, {"grid": {"nx": 50000, "ny": 50000}})
    assert err.key == "grid" and "got 50000 x 50000 = 2.5e+09 cells" in str(err)
    assert "at most 2080374784 cells (the GPU kernels index a grid with 32-bit offsets)" in str(err)
    err = error_of(case_from_dict, {"grid": {"nx": 10 ** 30}})
    assert err.key == "grid"


def test_grid_past_the_csr_bound_needs_no_deflation():
    """Deflation's CSR matrices have int32 indices (2 ndim + 1 entries a row
    at most); without deflation the grid's bound is the kernels' offsets."""
    big2 = {"grid": {"nx": 24000, "ny": 24000}}
    err = error_of(case_from_dict, {**big2, "solver": {"method": "dpcg"}})
    assert err.key == "grid" and "with solver.deflation.type levelset_subdomains" in str(err)
    assert "at most 429496729 cells with deflation" in str(err), str(err)
    assert case_from_dict(big2).grid.cells == (24000, 24000)
    big3 = {"mode": "pressure", "grid": {"nx": 1024, "ny": 1024, "nz": 1024}}
    err = error_of(case_from_dict, {**big3, "solver": {"deflation": {"type": "subdomains"}}})
    assert "at most 306783378 cells with deflation" in str(err), str(err)
    assert case_from_dict(big3).solver.deflation.type == "none"


def test_fixed_dt_against_the_limits():
    err = error_of(flow, **{"time.dt": 10})
    assert err.key == "time.dt" and "expected a step <= time.end = 3" in str(err)
    err = error_of(flow, **{"time.dt": 0.5})
    # Capillary: sqrt(550 * 0.025**3 / (2 pi 24.5)) = 0.00747 s at h = 1/40.
    assert "above the capillary stability limit 0.00747 s at t = 0" in str(err), str(err)
    # Viscous: 0.2 h^2 / nu = 0.2 / 1600 / 0.01 = 0.0125; gravity sqrt(h/g) = 0.16.
    assert flow(**{"time.dt": 0.009, "physics.surface_tension": 0}).time.dt == 0.009
    err = error_of(flow, **{"time.dt": 0.02, "physics.surface_tension": 0,
                            "momentum.viscosity": "explicit"})
    assert "above the viscous stability limit 0.0125 s" in str(err), str(err)
    assert flow(**{"time.dt": 0.007}).time.dt == 0.007
    # momentum.viscosity auto: a step the viscous limit would forbid makes it implicit.
    case = flow(**{"time.dt": 0.02, "physics.surface_tension": 0})
    assert viscosity_scheme(case) == "implicit" and "viscous" not in initial_dt_limits(case)
    assert viscosity_scheme(flow()) == "explicit"          # capillary 0.00747 < viscous 0.0125


def test_auto_viscosity_is_implicit_where_the_viscous_limit_would_set_the_step():
    # Hysing case 1: the capillary limit is smaller at h = 1/40 and 1/80, the
    # viscous one at 1/160 (0.2 h^2 / nu ~ h^2, capillary ~ h^1.5).
    for n, scheme in ((40, "explicit"), (80, "explicit"), (160, "implicit")):
        assert viscosity_scheme(flow(**{"grid.nx": n, "grid.ny": 2 * n})) == scheme, n


def test_dt_limits_match_the_flow_solver():
    from bubbleflow.compute.backend import get_backend
    from bubbleflow.case.config import initial_dt_limits
    from bubbleflow.flow.navier_stokes import FlowSolver

    for changes in ({}, {"physics.surface_tension": 0, "fluids.gas.viscosity": 1e-3}):
        case = flow(**changes)
        solver = FlowSolver(case, get_backend("numpy"))
        state = solver.initial_state()
        expected = min(v for v, _ in initial_dt_limits(case).values())
        assert solver.stable_dt(state) == pytest.approx(expected, rel=1e-12)


def test_pressure_mode_ignores_time():
    assert case_from_dict({"time": {"dt": 10, "end": 1}}).time.dt == 10


def test_output_interval_bounds():
    err = error_of(flow, **{"output.interval": 1e-9})
    assert err.key == "output.interval" and "3e+09 snapshots" in str(err)
    assert "at most 10000 snapshots: an interval >= 0.0003" in str(err)
    # Few snapshots, but each would cut the step 1000-fold (end 0.001).
    err = error_of(flow, **{"output.interval": 1e-6, "time.end": 1e-3})
    assert "force steps" in str(err) and "an interval >= 0.01 * step" in str(err)
    assert flow(**{"output.interval": 0.001}).output.interval == 0.001


def test_too_many_steps():
    err = error_of(flow, **{"fluids.liquid.viscosity": 1e9, "momentum.viscosity": "explicit"})
    assert err.key == "time.end" and "steps" in str(err) and "viscous limit" in str(err)


def test_bubbles_overlapping_each_other(tmp_path):
    path = write(tmp_path, """
        geometry:
          bubbles:
            - {center: [0.2, 0.2], radius: 0.1}
            - {center: [0.7, 0.7], radius: 0.1}
            - {center: [0.25, 0.25], radius: 0.1}
        """)
    err = error_of(load_case, path)
    assert str(err).startswith(f"{path}:5: geometry.bubbles[2]: got centre (0.25, 0.25) with "
                               "radius 0.1, overlapping geometry.bubbles[0]")
    assert "expected bubbles apart from each other" in str(err)
    # Touching is allowed in a pressure case, not in a flow (one cell apart).
    case_from_dict({"geometry": {"bubbles": [{"center": [0.2, 0.5], "radius": 0.1},
                                             {"center": [0.4, 0.5], "radius": 0.1}]}})
    err = error_of(flow, **{"geometry.bubbles": "[{center: [0.5, 0.5], radius: 0.2}, "
                                                "{center: [0.5, 0.91], radius: 0.2}]"})
    assert "geometry.bubbles[1]" in str(err) and "by at least one cell" in str(err)


def test_many_bubbles_overlap_check_is_fast():
    import time

    bubbles = [{"center": [0.01 + 0.0198 * (i % 50), 0.01 + 0.0198 * (i // 50)], "radius": 0.009}
               for i in range(2500)]
    t0 = time.perf_counter()
    case_from_dict({"geometry": {"bubbles": bubbles}})
    assert time.perf_counter() - t0 < 5
    bubbles[2499] = {"center": [0.02, 0.02], "radius": 0.009}
    err = error_of(case_from_dict, {"geometry": {"bubbles": bubbles}})
    assert "geometry.bubbles[2499]" in str(err) and "overlapping geometry.bubbles[0]" in str(err)


def test_bubble_lattice_overlaps():
    lat = {"columns": 5, "rows": 2, "radius": 0.08, "x_range": [0.2, 0.8], "y_range": [0.2, 0.6]}
    err = error_of(case_from_dict, {"geometry": {"bubble_lattice": lat}})
    assert err.key == "geometry.bubble_lattice" and "got 5 columns of radius 0.08, 0.15 apart" \
        in str(err)
    lat["columns"] = 3
    err = error_of(case_from_dict, {"geometry": {"bubble_lattice": lat, "bubbles": [
        {"center": [0.9, 0.9], "radius": 0.05}, {"center": [0.55, 0.65], "radius": 0.05}]}})
    assert err.key == "geometry.bubbles[1]" and "bubble_lattice bubble at (0.5, 0.6) (column 2, " \
        "row 2)" in str(err)


@pytest.mark.parametrize("fs, where", [(0.55, "crossing"), (0.3, "lying in the gas above")])
def test_bubbles_and_the_free_surface(fs, where):
    err = error_of(case_from_dict, {"geometry": {"free_surface": fs, "bubbles": [
        {"center": [0.5, 0.5], "radius": 0.1}]}})
    assert err.key == "geometry.bubbles[0]" and f"{where} the free surface at {fs}" in str(err)
    assert f"expected a bubble in the liquid, below the free surface at {fs}" in str(err)
    lat = {"columns": 1, "rows": 1, "radius": 0.1, "x_range": [0.5, 0.5], "y_range": [0.5, 0.5]}
    err = error_of(case_from_dict, {"geometry": {"free_surface": fs, "bubble_lattice": lat}})
    assert err.key == "geometry.bubble_lattice" and where in str(err)
    rb = {"count": 3, "radius": 0.02, "region": [0.1, 0.9, 0.1, 0.6]}
    err = error_of(case_from_dict, {"geometry": {"free_surface": fs, "random_bubbles": rb}})
    assert err.key == "geometry.random_bubbles.region" and f"with y1 <= {fs}" in str(err)


def test_droplets_must_lie_in_gas():
    geo = {"free_surface": 0.5, "droplets": [{"center": [0.5, 0.8], "radius": 0.1}]}
    case_from_dict({"geometry": geo})                       # in the gas layer
    geo["droplets"] = [{"center": [0.5, 0.55], "radius": 0.1}]
    err = error_of(case_from_dict, {"geometry": geo})
    assert err.key == "geometry.droplets[0]" and "crossing the free surface at 0.5" in str(err)
    geo["droplets"] = [{"center": [0.5, 0.2], "radius": 0.05}]
    err = error_of(case_from_dict, {"geometry": geo})
    assert "lying in the liquid below the free surface" in str(err)
    # Inside a bubble is gas too.
    geo["bubbles"] = [{"center": [0.5, 0.2], "radius": 0.15}]
    case_from_dict({"geometry": geo})
    geo = {"free_surface": 0.5, "droplets": [{"center": [0.3, 0.8], "radius": 0.1},
                                             {"center": [0.35, 0.8], "radius": 0.1}]}
    err = error_of(case_from_dict, {"geometry": geo})
    assert err.key == "geometry.droplets[1]" and "overlapping geometry.droplets[0]" in str(err)


def test_too_many_circles_and_random_fill():
    lat = {"columns": 1000, "rows": 1000, "radius": 1e-4, "x_range": [0.1, 0.9],
           "y_range": [0.1, 0.9]}
    err = error_of(case_from_dict, {"geometry": {"bubble_lattice": lat}})
    assert err.key == "geometry" and "got 1000000 bubbles and droplets" in str(err)
    err = error_of(case_from_dict, {"geometry": {"random_bubbles": {"count": 100,
                                                                    "radius": 0.05}}})
    assert err.key == "geometry.random_bubbles.count" and "79% of their region" in str(err)


def test_liquid_only_flow_is_valid():
    case = flow(**{"geometry.bubbles": "[]"})
    assert case.geometry.bubbles == () and case.mode == "flow"


def test_registry_entries_name_what_they_build():
    """Every registry factory loads, builds the thing its entry names, and the
    fused engine's branch codes are distinct (one file + one entry per
    preconditioner)."""
    from bubbleflow import bubbly_column
    from bubbleflow.linalg import registry
    from bubbleflow.linalg.precond import make_preconditioner

    A, b, phi = bubbly_column(16, 10.0)
    for name, entry in registry.PRECONDITIONERS.items():
        assert registry.load(entry.factory).name == name
        assert make_preconditioner(name, A).name == name
        assert entry.fused in registry.FUSED_VARIANTS and set(entry.engines) <= set(registry.ENGINES)
    codes = [v.code for v in registry.FUSED_VARIANTS.values()]
    assert len(set(codes)) == len(codes)
    for name, entry in registry.DEFLATIONS.items():
        assert entry.factory is None or callable(registry.load(entry.factory))
    for target in registry.DEVICE_ENGINES.values():
        assert callable(registry.load(target))
    assert set(METHODS) == set(registry.METHODS)
    with pytest.raises(ValueError, match="unknown preconditioner 'ilu'; expected one of none, "):
        registry.preconditioner("ilu")


def test_an_override_of_one_subdomain_form_replaces_the_other(tmp_path):
    path = write(tmp_path, "grid: {nx: 64, ny: 64}\n"
                           "solver: {deflation: {cells_per_subdomain: 8}}\n")
    d = load_case(path, ["solver.deflation.subdomains=[4, 4]"]).solver.deflation
    assert (d.subdomains, d.cells_per_subdomain) == ((4, 4), None)
    path = write(tmp_path, "grid: {nx: 64, ny: 64}\n"
                           "solver: {deflation: {subdomains: [2, 2]}}\n", name="b.yaml")
    d = load_case(path, ["solver.deflation.cells_per_subdomain=16"]).solver.deflation
    assert (d.subdomains, d.cells_per_subdomain) == (None, 16)
    assert d.subdomain_counts(64, 64) == (4, 4)
