"""The error of a case that cannot be run, and how its messages quote values.

Every problem with a case file, an override or a value is one
:class:`CaseError` whose message is a single line naming the file (and
line), the key path, the offending value and what was expected, e.g.::

    cases/a.yaml:7: grid.nx: got -5; expected an integer >= 4

:func:`show_value`, :func:`show_number` and :func:`show_kind` spell the
values the messages quote.
"""
from __future__ import annotations

import re
from collections.abc import Mapping

from .key_paths import split_dotted
from .yaml_reader import shorten

#: Longest path shown in an error: a path is what identifies the file (its
#: end kept when longer); real paths stay well below, a crafted one does not.
MAX_PATH_CHARS = 300
#: Longest error message, whatever the input: the file is cut to
#: MAX_PATH_CHARS, the other user text it quotes (override, key, value) to
#: 80 characters each, and the longest messages the checks write reach some
#: 300 with short names.
MAX_MESSAGE_CHARS = MAX_PATH_CHARS + 400

#: The ``value`` of an error that quotes none (None may be the value).
NO_VALUE = object()


class CaseError(Exception):
    """A case file (or override) that cannot be run; ``str()`` is one line.

    The message reads ``"<file>[:<line>[:<col>]]: <key.path>: <what is
    wrong>; expected <what is expected>"``.  A value that came from an
    override names it instead of a line: ``"<file> (--set grid.nz=3): ..."``.
    The file, override and key are cut to what identifies them
    (:func:`~.yaml_reader.shorten`), control characters escaped, and the
    whole message to :data:`MAX_MESSAGE_CHARS`.

    Parameters
    ----------
    file : str
        The case file (or ``"<dict>"``).
    key : str or None
        Dotted key path such as ``"geometry.bubbles[2].radius"``; None for
        errors about the file as a whole.
    problem : str
        What is wrong, e.g. ``"got -5"``.
    expected : str or None
        What would be accepted.
    value : object, optional
        The offending value (None when there is none).
    line, column : int, optional
        1-based position in the file.
    origin : str, optional
        The command-line override the value came from (``"--set grid.nz=3"``).
    text : str, optional
        Replaces ``"<problem>; expected <expected>"`` in the message, for the
        few messages that read better in another shape (unknown keys).

    Attributes
    ----------
    file, key, value, expected, problem, line, column, origin
        As given.
    """

    def __init__(self, file, key=None, problem="", expected=None, *, value=NO_VALUE, line=None,
                 column=None, origin=None, text=None):
        self.file = str(file) if file is not None else "<case>"
        self.key = key
        self.problem = problem
        self.expected = expected
        self.value = None if value is NO_VALUE else value
        self.line = line
        self.column = column
        self.origin = origin
        if text is None:
            text = problem + (f"; expected {expected}" if expected else "")
        # The file, the override and the key are the user's text: shown cut
        # to what identifies them (a path's end), control characters escaped.
        loc = shorten(self.file, MAX_PATH_CHARS, keep="end")
        if origin:
            loc += f" ({shorten(origin)})"
        elif line is not None:
            loc += f":{line}" + (f":{column}" if column is not None else "")
        msg = f"{loc}: {shorten(key)}: {text}" if key else f"{loc}: {text}"
        # One line, always: file names, YAML problems or shown values may
        # carry newlines, and callers print this as a single `error:` line.
        msg = re.sub(r"\s*[\r\n]+\s*", " ", msg)
        # Values quoted in the problem are cut where they are shown; this
        # bounds what any message can grow to, whatever it quotes (control
        # characters escaped too).
        length = len(msg)
        msg = shorten(msg[:MAX_MESSAGE_CHARS], None)
        if max(length, len(msg)) > MAX_MESSAGE_CHARS:
            tail = f"... ({length} characters)"
            msg = msg[:MAX_MESSAGE_CHARS - len(tail)] + tail
        self.message = msg
        super().__init__(self.message)

    def __str__(self):
        return self.message

    def __reduce__(self):
        # Keyword-only arguments defeat Exception's default pickling, and
        # studies may send errors back from worker processes.
        return _restore_case_error, (dict(self.__dict__),)

    @classmethod
    def from_runtime(cls, case, key, problem, expected=None, value=NO_VALUE):
        """An error found after validation (e.g. while building the geometry).

        Points at ``key``'s line in the case file, or at the override that
        set it, when the case knows them.

        Parameters
        ----------
        case : Case
        key : str
            Dotted key path (``"geometry"``, ``"backend"``, ...).
        problem, expected : str
            As for :class:`CaseError`.
        """
        where = getattr(case, "_where", None)
        line = origin = None
        if where is not None:
            line, origin = where.locate(split_dotted(key))
        return cls(getattr(case, "source", "<case>"), key, problem, expected, value=value,
                   line=line, origin=origin)


def _restore_case_error(state):
    err = CaseError.__new__(CaseError)
    Exception.__init__(err, state["message"])
    err.__dict__.update(state)
    return err


def show_value(value, limit=80):
    """A value as the user wrote it (YAML spelling), cut to ``limit`` characters."""
    if value is None:
        s = "null"
    elif isinstance(value, bool):
        s = "true" if value else "false"
    elif isinstance(value, str):
        s = repr(value)
    elif isinstance(value, (list, tuple)):
        s = "[" + ", ".join(show_value(v, limit) for v in value) + "]"
    elif isinstance(value, Mapping):
        s = "{" + ", ".join(f"{k}: {show_value(v, limit)}" for k, v in value.items()) + "}"
    else:
        s = str(value)
    return shorten(s, limit)


def show_number(x):
    """A number for messages: ``1.0`` -> ``1``, ``0.08`` -> ``0.08``."""
    return f"{x:g}"


def show_kind(value):
    """``"a list"``, ``"a mapping"``... for wrong-container messages."""
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return show_value(value)
