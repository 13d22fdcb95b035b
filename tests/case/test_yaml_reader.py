"""The hardened YAML reader, the upper bounds of the case's counts, short error lines."""
import dataclasses
import pickle
import time

import pytest
import yaml

from bubbleflow.case import config
from bubbleflow.case.config import (MAX_CIRCLES, MAX_DEGREE, MAX_ITERATIONS, MAX_MESSAGE_CHARS,
                                    MAX_PATH_CHARS,
                                    CaseError, case_from_dict, load_case, option_value)
from bubbleflow.case import yaml_reader
from bubbleflow.case.yaml_reader import (MAX_FILE_BYTES, MAX_OPTION_CHARS, MAX_TEXT_CHARS,
                                         MAX_YAML_DEPTH, MAX_YAML_NODES, YamlError, load_yaml,
                                         read_text, shorten)

#: A "billion laughs": nine levels of ten aliases, 10**9 values once expanded.
BOMB = "a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n" + "".join(
    f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]\n" for i in range(1, 9))

HOSTILE = {
    "alias_bomb": (BOMB, f"more than {MAX_YAML_NODES} values once aliases"),
    "deep_flow": ("[" * 100_000, f"nested more than {MAX_YAML_DEPTH} levels deep"),
    "deep_mappings": ("{a: " * 100_000, f"nested more than {MAX_YAML_DEPTH} levels deep"),
    "deep_block": ("- " * 100_000, f"nested more than {MAX_YAML_DEPTH} levels deep"),
    "recursive_alias": ("&a [*a]", "recursive alias"),
    "recursive_mapping": ("a: &a {b: *a}", "recursive alias"),
    "too_long": ("x" * (MAX_TEXT_CHARS + 1), f"{MAX_TEXT_CHARS + 1} characters long"),
    "control_character": ("name: a\x1b[31mb", "character '\\x1b' (U+001B) is not allowed"),
    "nul": ("name: a\x00", "character '\\x00' (U+0000) is not allowed"),
    "syntax": ("a: [1, 2", "YAML syntax error"),
    "python_tag": ("!!python/object:os.system x", "YAML syntax error: could not determine"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_text_is_one_short_error_fast(name):
    text, fragment = HOSTILE[name]
    start = time.perf_counter()
    with pytest.raises(YamlError) as info:
        load_yaml(text, "source.yaml")
    assert time.perf_counter() - start < 5.0
    msg = str(info.value)
    assert msg.startswith("source.yaml") and fragment in msg, msg
    assert "\n" not in msg and len(msg) < 300, msg
    # One error type, which callers of PyYAML already handle.
    assert isinstance(info.value, yaml.YAMLError) and isinstance(info.value, ValueError)


def test_limits_are_where_they_start(monkeypatch):
    assert load_yaml("[" * MAX_YAML_DEPTH + "]" * MAX_YAML_DEPTH) is not None
    with pytest.raises(YamlError, match="nested more than"):
        load_yaml("[" * (MAX_YAML_DEPTH + 1) + "]" * (MAX_YAML_DEPTH + 1))
    # (A smaller node limit: composing 100,000 values takes seconds.)
    monkeypatch.setattr(yaml_reader, "MAX_YAML_NODES", 100)
    assert len(load_yaml("[" + "1," * 99 + "]")) == 99       # the list and its 99 items
    with pytest.raises(YamlError, match="1:200: more than 100 values; expected at most 100"):
        load_yaml("[" + "1," * 100 + "]")
    # The document, two keys, a list of 8 and a list of 9 aliases to it: 94 values expanded.
    expanded = "a: &a [1, 2, 3, 4, 5, 6, 7, 8]\nb: [" + ", ".join(["*a"] * 9) + "]\n"
    assert len(load_yaml(expanded)["b"]) == 9
    with pytest.raises(YamlError, match="more than 100 values once aliases"):
        load_yaml(expanded.replace("[*a", "[*a, *a"))          # 103
    assert load_yaml("x" * 10, limit=10) == "x" * 10
    with pytest.raises(YamlError, match="11 characters long; expected at most 10"):
        load_yaml("x" * 11, limit=10)


def test_position_and_duplicate_keys_with_lines():
    data, lines = load_yaml("grid:\n  nx: 8\n  ny: 8\nname: a\n", "c.yaml", lines=True)
    assert data == {"grid": {"nx": 8, "ny": 8}, "name": "a"}
    assert lines == {("grid",): 1, ("grid", "nx"): 2, ("grid", "ny"): 3, ("name",): 4}
    with pytest.raises(YamlError) as info:
        load_yaml("grid:\n  nx: 8\n  nx: 9\n", "c.yaml", lines=True)
    err = info.value
    assert (err.line, err.path) == (3, ("grid", "nx"))
    assert str(err) == ("c.yaml:3: duplicate key (first at line 2); "
                        "expected each key once per section")
    # Merge keys are not duplicates.
    data = load_yaml("base: &b {x: 1}\nc:\n  <<: *b\n  y: 2\n", lines=True)[0]
    assert data["c"] == {"x": 1, "y": 2}


def test_empty_bytes_and_non_text():
    assert load_yaml("") is None and load_yaml("# comment\n", lines=True) == (None, {})
    assert load_yaml(b"a: 1") == {"a": 1}
    with pytest.raises(YamlError, match="not UTF-8 text"):
        load_yaml(b"a: \xff")
    with pytest.raises(YamlError, match="got int; expected YAML text"):
        load_yaml(42)


def test_error_pickles():
    err = pickle.loads(pickle.dumps(YamlError("s", "bad", "good", 1, 2, ("a",))))
    assert str(err) == "s:1:2: bad; expected good" and err.path == ("a",)


def test_read_text_bounded(tmp_path):
    path = tmp_path / "a.yaml"
    path.write_text("x" * (MAX_FILE_BYTES + 1))
    with pytest.raises(YamlError, match="larger than 512 KiB; expected a YAML file of at most"):
        read_text(path)
    path.write_text("name: a\n")
    assert read_text(path) == "name: a\n"
    with pytest.raises(YamlError, match="file not found; expected a readable YAML file"):
        read_text(tmp_path / "missing.yaml")


def test_shorten_cuts_and_escapes():
    assert shorten("short") == "short"
    assert shorten("x" * 1000) == "x" * 80 + "... (1000 characters)"
    assert shorten("a\x1b[31mb\x07") == "a\\x1b[31mb\\x07"
    assert shorten("a\nb", None) == "a\\x0ab"


# --------------------------------------------------------------------------
# Case files and overrides through the reader
# --------------------------------------------------------------------------

def test_case_file_and_override_doors(tmp_path):
    path = tmp_path / "case.yaml"
    path.write_text(BOMB)
    with pytest.raises(CaseError, match=r"case\.yaml:\d+:\d+: more than 100000 values"):
        load_case(path)
    with pytest.raises(CaseError) as info:
        case_from_dict({}, overrides=["name=" + "[" * 50_000])
    assert "nested more than 32 levels deep" in str(info.value)
    with pytest.raises(CaseError) as info:
        case_from_dict({}, overrides=["name=" + "x" * 10_000_000])
    msg = str(info.value)
    assert f"--set item of 10000005 characters; expected at most {MAX_OPTION_CHARS}" in msg
    assert "--set name=xxx" in msg and "(10000011 characters)" in msg and len(msg) < 300


def test_long_path_keeps_its_end(tmp_path):
    folder = tmp_path / ("d" * 200) / ("e" * 200)
    folder.mkdir(parents=True)
    path = folder / "my_case.yaml"
    path.write_text("grid: {nx: 2}\n")
    msg = str(pytest.raises(CaseError, load_case, path).value)
    assert msg.startswith("...") and "/my_case.yaml:1: grid.nx: got 2" in msg
    assert len(msg.split(":1:")[0]) == len("...") + MAX_PATH_CHARS


def test_option_value():
    assert option_value("3", "--configs") == 3
    with pytest.raises(CaseError) as info:
        option_value("&a [*a]", "--configs")
    assert str(info.value).startswith("--configs: cannot parse value '&a [*a]' (recursive alias")


@pytest.mark.parametrize("override", [
    "grid.nx=" + "x" * 50_000,                  # a long value
    "x" * 50_000 + "=1",                        # a long unknown key
    "grid." + "a" * 50_000 + "=1",
    "grid[" + "9" * 5000 + "]=1",               # an index int() refuses
    "geometry.bubbles[" + "9" * 100 + "].radius=1",
    "solver.preconditioner.type=" + "y" * 50_000,
], ids=["value", "key", "subkey", "index", "long_index", "enum"])
def test_error_lines_stay_short(override):
    with pytest.raises(CaseError) as info:
        case_from_dict({}, overrides=[override])
    msg = str(info.value)
    assert len(msg) <= MAX_MESSAGE_CHARS and "\n" not in msg, msg
    assert "characters)" in msg, msg


def test_control_characters_in_echoed_text_are_escaped():
    with pytest.raises(CaseError) as info:
        case_from_dict({}, overrides=["gr\x1b[2Jid.nx=3"])
    assert "\x1b" not in str(info.value) and "gr\\x1b[2Jid" in str(info.value)


def test_any_message_is_capped():
    err = CaseError("f" * 5000, "k" * 5000, "p" * 100_000, "e" * 5000, origin="o" * 5000)
    assert len(str(err)) == MAX_MESSAGE_CHARS and str(err).endswith(" characters)")
    assert str(err).startswith("..." + "f" * MAX_PATH_CHARS + " (" + "o" * 80
                               + "... (5000 characters))")


# --------------------------------------------------------------------------
# Upper bounds of the case's counts
# --------------------------------------------------------------------------

def _int_fields(cls, path=()):
    for f in dataclasses.fields(cls):
        spec = f.metadata.get("spec")
        while isinstance(spec, (config._Optional, config._Tuple, config._List)):
            spec = spec.inner if isinstance(spec, config._Optional) else spec.item
        if isinstance(spec, config._Section):
            yield from _int_fields(spec.cls, path + (f.name,))
        elif isinstance(spec, config._Int):
            yield ".".join(path + (f.name,)), spec


def test_every_count_has_an_upper_bound():
    unbounded = sorted(key for key, spec in _int_fields(config.Case) if spec.max is None)
    # The cells per axis are bounded together: MAX_CELLS (test_config's int32 bound).
    assert unbounded == ["grid.nx", "grid.ny", "grid.nz"]


@pytest.mark.parametrize("key, value, expected", [
    ("solver.preconditioner.degree", MAX_DEGREE + 1, f"an integer <= {MAX_DEGREE} ("),
    ("solver.preconditioner.degree", 10 ** 30, f"an integer <= {MAX_DEGREE} ("),
    ("solver.preconditioner.coarsest", 10 ** 6, "an integer <= 8192 (the coarsest level"),
    ("solver.preconditioner.w_levels", 100, "an integer <= 32 or 'auto' ("),
    ("solver.maxiter", MAX_ITERATIONS + 1, f"an integer <= {MAX_ITERATIONS} ("),
    ("levelset.reinit_iterations", 10 ** 9, "an integer <= 1000 ("),
    ("geometry.random_bubbles", "{count: 100000, radius: 0.001}",
     f"an integer <= {MAX_CIRCLES} (bubbles and droplets in all)"),
])
def test_count_above_its_bound_names_it(key, value, expected):
    with pytest.raises(CaseError) as info:
        case_from_dict({}, overrides=[f"{key}={value}"])
    assert expected in str(info.value), str(info.value)


LATTICE_3D = {"grid": {"nx": 16, "ny": 16, "nz": 16},
              "geometry": {"bubble_lattice": {"columns": 2, "rows": 2, "layers": 2,
                                              "radius": 0.05, "x_range": [0.3, 0.7],
                                              "y_range": [0.3, 0.7], "z_range": [0.3, 0.7]}}}


@pytest.mark.parametrize("changes, key, expected", [
    ({"layers": 10 ** 9}, "geometry.bubble_lattice.layers", f"an integer <= {MAX_CIRCLES}"),
    ({"columns": 10 ** 12}, "geometry.bubble_lattice.columns", f"an integer <= {MAX_CIRCLES}"),
    # Each side within the bound, their product not: counted before any centre is made.
    ({"columns": 100, "rows": 100, "layers": 100}, "geometry",
     f"got 1000000 bubbles and droplets; expected at most {MAX_CIRCLES}"),
])
def test_lattice_3d_bounded(changes, key, expected):
    data = {"grid": LATTICE_3D["grid"],
            "geometry": {"bubble_lattice": dict(LATTICE_3D["geometry"]["bubble_lattice"],
                                                **changes)}}
    start = time.perf_counter()
    with pytest.raises(CaseError) as info:
        case_from_dict(data)
    assert time.perf_counter() - start < 1.0
    assert info.value.key == key and expected in str(info.value), str(info.value)
    assert case_from_dict(LATTICE_3D).geometry.bubble_lattice.layers == 2
