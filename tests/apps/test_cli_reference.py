"""docs/reference/cli.md is the CLI's own parser rendered: every command and option
there, each option with its help text."""
import argparse
from pathlib import Path

from bubbleflow.apps.cli import build_parser
from bubbleflow.apps.cli_reference import PAGE, commands, markdown

ROOT = Path(__file__).resolve().parents[2]


def test_every_option_has_help_text():
    for name, sub in commands().items():
        for action in sub._actions:
            if action.help != argparse.SUPPRESS:
                assert action.help, f"bubbleflow {name} {action.option_strings or action.dest}"


def test_the_page_holds_every_command_and_option():
    page = markdown()
    for name, sub in commands(build_parser()).items():
        assert f"## `bubbleflow {name}`" in page
        for action in sub._actions:
            if action.help not in (None, argparse.SUPPRESS) and \
                    not isinstance(action, argparse._HelpAction):
                for option in action.option_strings:
                    assert f"`{option}" in page or f", {option}" in page, (name, option)
    assert "--rows" not in page                         # a worker's option, not shown


def test_docs_cli_is_up_to_date():
    assert PAGE == "docs/reference/cli.md"
    assert (ROOT / PAGE).read_text() == markdown(), (
        f"{PAGE} is stale: python3 -m bubbleflow.apps.cli_reference --write {PAGE}")
