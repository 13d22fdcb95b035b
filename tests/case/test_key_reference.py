"""The key reference generated from the schema: every key documented, the
shipped case files' keys all in it, and the documentation's table
(docs/reference/case_keys.md) up to date."""
import doctest
import pathlib

import pytest

from bubbleflow.case import key_reference
from bubbleflow.case.key_reference import (BEGIN, END, PAGE, case_keys, generated_block,
                                           markdown_table, replace_block)
from bubbleflow.case.loading import case_from_dict, read_yaml_file

ROOT = pathlib.Path(__file__).resolve().parents[2]
CASES = sorted((ROOT / "cases").glob("*.yaml"))
REGENERATE = f"python3 -m bubbleflow.case.key_reference --write {PAGE}"


def leaves(node, prefix=""):
    """The dotted keys of ``node`` that hold values (a section's own key
    left out, a list of sections' entries spelt ``[]``)."""
    if isinstance(node, dict):
        out = set()
        for k, v in node.items():
            key = f"{prefix}{k}"
            out |= leaves(v, key + ".") if isinstance(v, dict) else {key} | leaves(v, key)
        return out
    if isinstance(node, (list, tuple)):
        return set().union(*(leaves(v, prefix + "[].") for v in node if isinstance(v, dict)))
    return set()


def test_every_key_says_what_it_means():
    undocumented = [row.key for row in case_keys() if not row.doc.strip()]
    assert not undocumented, f"keys without doc= text in bubbleflow/case/schema.py: {undocumented}"


def test_keys_are_unique_and_allowed_values_and_defaults_are_given():
    rows = case_keys()
    assert len({row.key for row in rows}) == len(rows)
    assert all(row.allowed.strip() and row.default.strip() for row in rows)


@pytest.mark.parametrize("path", CASES, ids=lambda p: p.name)
def test_shipped_case_keys_are_in_the_reference(path):
    data, _ = read_yaml_file(path)
    data.pop("sweep", None)             # a study file's own block (bubbleflow sweep)
    known = {row.key for row in case_keys()}
    assert leaves(data) <= known, f"{path.name}: keys missing from case_keys()"


def test_reference_keys_are_those_of_a_resolved_case():
    """The walk of the schema finds what a resolved case holds: every key of
    the default case, and besides them only the keys inside optional
    sections and lists of sections."""
    known = {row.key for row in case_keys()}
    containers = {k for k in known if any(o.startswith((k + ".", k + "[].")) for o in known)}
    inside = {k for k in known if any(k.startswith((c + ".", c + "[].")) for c in containers)}
    assert leaves(case_from_dict({}, warn=False).to_dict()) == known - inside
    assert inside


def test_docs_table_is_generated_from_the_schema():
    assert PAGE == "docs/reference/case_keys.md"
    text = (ROOT / PAGE).read_text(encoding="utf-8")
    assert generated_block(text) == markdown_table(), (
        f"{PAGE}'s case key table differs from the schema's; run: {REGENERATE}")


def test_known_rows():
    rows = {row.key: row for row in case_keys()}
    compression = rows["output.compression"]
    assert all(word in compression.allowed for word in ("none", "gzip", "auto"))
    assert compression.default == "auto"
    assert "multigrid (pcg)" in rows["solver.preconditioner.type"].default.replace("`", "")
    assert rows["geometry.bubbles[].radius"].default == "required"
    assert ("| `output.compression` | one of: auto, none, gzip | `auto` | how the fields are "
            "stored:") in markdown_table()


def test_examples_in_the_docstrings_hold():
    failures, _ = doctest.testmod(key_reference)
    assert not failures


def test_replace_block_keeps_the_text_around_it():
    text = f"intro\n\n{BEGIN}\nold table\n{END}\n\noutro\n"
    new = replace_block(text, "| a |\n")
    assert new == f"intro\n\n{BEGIN}\n\n| a |\n\n{END}\n\noutro\n"
    assert generated_block(new) == "| a |\n"
    with pytest.raises(ValueError):
        replace_block("no markers here")
