"""Where a case's values came from (file lines, ``--set`` overrides), and
the validation state that reports a refused value at that place."""
from __future__ import annotations

from .errors import NO_VALUE, CaseError, show_value
from .key_paths import dotted

class Where:
    """Maps key paths to their file line or to the override that set them,
    and keeps which paths the case gave (:attr:`explicit`, filled by the
    validation) so that what an override changes can be told afterwards
    (:mod:`.relevance`)."""

    def __init__(self, lines=None, origins=None):
        self.lines = dict(lines or {})       # path tuple -> 1-based line
        self.origins = dict(origins or {})   # path tuple -> "--set a.b=c"
        self.explicit = set()                # key paths present in the file or an override

    def locate(self, path, missing=False):
        """``(line, origin)`` for ``path``; at most one of them is not None.

        An override owns everything below the path it set (it may have
        replaced a whole section), so the longest overridden prefix wins.
        A missing key has no line of its own: point at its parent's.
        """
        if path is None:
            return None, None
        for n in range(len(path), 0, -1):
            if path[:n] in self.origins:
                return None, self.origins[path[:n]]
        if path in self.lines:
            return self.lines[path], None
        if missing:
            for n in range(len(path) - 1, 0, -1):
                if path[:n] in self.lines:
                    return self.lines[path[:n]], None
        return None, None


class CheckContext:
    """Validation state: the source, where values came from, explicit keys."""

    def __init__(self, file, where):
        self.file = file
        self.where = where
        self.explicit = where.explicit    # key paths present in the file or set by an override

    def fail(self, path, problem, expected=None, value=NO_VALUE, text=None, missing=False):
        line, origin = self.where.locate(path, missing=missing)
        raise CaseError(self.file, dotted(path) or None, problem, expected, value=value,
                        line=line, origin=origin, text=text)

    def bad(self, path, value, expected):
        """The common case: ``<key>: got <value>; expected <expected>``."""
        self.fail(path, f"got {show_value(value)}", expected, value=value)
