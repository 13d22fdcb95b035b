"""The reference of ``bubbleflow``'s commands, generated from the CLI's own
parser: ``docs/reference/cli.md`` (:data:`PAGE`).

Each command's usage, description and options (with their help text) are
written once, where :func:`bubbleflow.apps.cli.build_parser` declares them;
this module renders them as Markdown, so the page cannot drift from the
program.  ``tests/apps/test_cli_reference.py`` fails while the file in the
source tree is stale or an option has no help text.

::

    python3 -m bubbleflow.apps.cli_reference               # print the page
    python3 -m bubbleflow.apps.cli_reference --write docs/reference/cli.md

(``--write`` without a file writes :data:`PAGE`.)
"""
from __future__ import annotations

import argparse
import pathlib
import sys

from .cli import build_parser

__all__ = ["commands", "markdown", "main", "PAGE"]

#: The page, relative to the repository's root.
PAGE = "docs/reference/cli.md"
#: What the page says above the commands.
PREAMBLE = ("# `bubbleflow` commands\n\n"
            "Generated from the program's own parser by `python3 -m "
            f"bubbleflow.apps.cli_reference --write {PAGE}`; do not edit.\n")


def commands(parser=None):
    """``{name: subparser}`` of the CLI's commands, in the order declared."""
    parser = parser or build_parser()
    for action in parser._actions:            # argparse keeps no public list of subparsers
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def _option_rows(sub):
    """``(names, help)`` of each option of ``sub`` shown in its help."""
    rows = []
    for action in sub._actions:
        if action.help == argparse.SUPPRESS or isinstance(action, argparse._HelpAction):
            continue
        names = ", ".join(action.option_strings) or action.dest
        if action.option_strings and action.nargs != 0:
            names += " " + (action.metavar if isinstance(action.metavar, str)
                            else action.dest.upper())
        help_text = (action.help or "") % {"default": action.default} if action.help else ""
        rows.append((names, " ".join(help_text.split())))
    return rows


def markdown(parser=None):
    """The page: per command its usage, its description and a table of its options."""
    parts = [PREAMBLE]
    for name, sub in commands(parser).items():
        # (Written here rather than argparse's usage line, whose layout
        # changes between Python versions.)
        positional = [a.metavar or a.dest for a in sub._actions if not a.option_strings]
        usage = " ".join([f"bubbleflow {name}", *positional, "[options]"])
        parts.append(f"\n## `bubbleflow {name}`\n\n```\n{usage}\n```\n")
        if sub.description:
            parts.append("\n" + " ".join(sub.description.split()) + "\n")
        rows = _option_rows(sub)
        if rows:
            parts.append("\n| option | meaning |\n| --- | --- |\n")
            parts.extend(f"| `{names}` | {text.replace('|', '/')} |\n" for names, text in rows)
    return "".join(parts)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--write", metavar="FILE", nargs="?", const=PAGE,
                    help=f"write the page there instead of printing it (default {PAGE})")
    args = ap.parse_args(argv)
    text = markdown()
    if args.write is None:
        sys.stdout.write(text)
        return 0
    pathlib.Path(args.write).write_text(text)
    print(f"{args.write}: the commands' reference written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
