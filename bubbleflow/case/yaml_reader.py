"""The one reader of the YAML that enters bubbleflow.

Case files, ``--set`` and ``--values`` items, study files, the cases stored
in result and restart files, plot and bench specs: all are read here, with
the same limits.  PyYAML's safe loader builds no objects, but on its own it
still hangs or exhausts the memory on small hostile texts (nested aliases
that expand to 10**9 values, a value that contains itself, ``[[[[...``
nested past the interpreter's recursion limit), and it reads a text of any
size.  :func:`load_yaml` bounds the text, the alias expansion and the
nesting before anything walks the parsed tree, and reports every problem as
one :class:`YamlError` whose message is a single short line::

    data = load_yaml(text, "cases/a.yaml")
    data, lines = load_yaml(read_text("cases/a.yaml"), "cases/a.yaml", lines=True)

:func:`shorten` cuts user text echoed in messages (a file name, an
override, a value) to what identifies it.
"""
from __future__ import annotations

import re

import yaml

__all__ = ["load_yaml", "read_text", "shorten", "YamlError", "MAX_FILE_BYTES",
           "MAX_TEXT_CHARS", "MAX_OPTION_CHARS", "MAX_YAML_NODES", "MAX_YAML_DEPTH",
           "SHOWN_CHARS"]

# Case files are a few KiB; PyYAML (pure Python) composes slowly, so the limit
# (some 12,000 explicit bubbles) is what still parses in a few seconds on a
# busy small CPU (measured rate: docs/performance_records.md), and anything larger is
# refused unread.
MAX_FILE_BYTES = 512 * 1024
# A text that comes from elsewhere than a file (the resolved case stored in a
# result file): the resolved form of the largest case file, with room to spare.
MAX_TEXT_CHARS = 2 * MAX_FILE_BYTES
# One command-line item (`--set KEY=VALUE`, `--values LIST`): longer values
# belong in the case file.
MAX_OPTION_CHARS = 64 * 1024
# Aliases share composed nodes, so a 351-byte text of nested aliases (a
# "billion laughs") expands to 10**9 nodes when walked; count the expansion
# on the shared graph first.  A full case file has some 200 nodes.
MAX_YAML_NODES = 100_000
# A case needs 6 levels (geometry.bubbles[0].center[0] under the document).
MAX_YAML_DEPTH = 32
# User text shown in a message: enough to recognise it.
SHOWN_CHARS = 80

_MERGE_TAG = "tag:yaml.org,2002:merge"


def shorten(text, limit=SHOWN_CHARS, keep="start"):
    """``text`` printable and cut to ``limit`` characters, for messages.

    Control characters are escaped (``\\x1b``): echoed raw, they would
    drive the terminal.  Texts over ``limit`` (None: no limit) are cut and
    end in ``"... (N characters)"``; with ``keep="end"`` (a path, whose
    end names the file) their last ``limit`` characters are kept instead,
    after ``"..."``.

    >>> shorten("x" * 100, 10)
    'xxxxxxxxxx... (100 characters)'
    >>> shorten("/a/long/path/to/case.yaml", 10, keep="end")
    '.../case.yaml'
    >>> shorten("a\\x1bb")
    'a\\\\x1bb'
    """
    text = str(text)
    if limit is None or len(text) <= limit:
        return _printable(text)
    if keep == "end":
        return "..." + _printable(text[-limit:])
    return f"{_printable(text[:limit])}... ({len(text)} characters)"


def _printable(text):
    return "".join(c if c.isprintable() else _escape(c) for c in text)


def _escape(c):
    code = ord(c)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}" if code < 0x10000 \
        else f"\\U{code:08x}"


class YamlError(yaml.YAMLError, ValueError):
    """A YAML text that cannot be used; ``str()`` is one short line.

    It reads ``"<source>[:<line>[:<col>]]: <problem>[; expected <expected>]"``.
    A :class:`yaml.YAMLError` (and a :class:`ValueError`), so that callers
    that already handle PyYAML's errors handle this one too.

    Parameters
    ----------
    source : str
        The file, option or attribute the text came from.
    problem : str
        What is wrong.
    expected : str, optional
        What would be accepted.
    line, column : int, optional
        1-based position in the text.
    path : tuple, optional
        The key path of the problem (a duplicate key), e.g. ``("grid", "nx")``.
    """

    def __init__(self, source, problem, expected=None, line=None, column=None, path=None):
        self.source, self.problem, self.expected = str(source), problem, expected
        self.line, self.column, self.path = line, column, path
        where = shorten(self.source)
        if line is not None:
            where += f":{line}" + (f":{column}" if column is not None else "")
        text = problem + (f"; expected {expected}" if expected else "")
        # One line, always: problems may quote text that spans lines.
        self.message = re.sub(r"\s*[\r\n]+\s*", " ", f"{where}: {text}")
        super().__init__(self.message)

    def __str__(self):
        return self.message

    def __reduce__(self):
        return _restore, (dict(self.__dict__),)


def _restore(state):
    err = YamlError.__new__(YamlError)
    Exception.__init__(err, state["message"])
    err.__dict__.update(state)
    return err


def _position(text, index):
    """1-based ``(line, column)`` of character ``index`` of ``text``."""
    index = max(0, min(int(index), len(text)))
    return text.count("\n", 0, index) + 1, index - (text.rfind("\n", 0, index) + 1) + 1


def _mark(node):
    m = node.start_mark
    return m.line + 1, m.column + 1


def _check_expansion(root, source):
    """Refuse recursive aliases, over-deep nesting and a large alias expansion.

    Walks the composed node graph once per distinct node (aliases are
    shared nodes), so the cost is that of the text, not of its expansion.
    """
    size, depth = {}, {}
    open_ = set()
    stack = [(root, False)]
    while stack:
        node, done = stack.pop()
        nid = id(node)
        kids = (node.value if isinstance(node, yaml.SequenceNode) else
                [n for kv in node.value for n in kv] if isinstance(node, yaml.MappingNode) else ())
        if done:
            open_.discard(nid)
            # Capped so that the sums stay small numbers.
            size[nid] = min(1 + sum(size[id(k)] for k in kids), MAX_YAML_NODES + 1)
            depth[nid] = 1 + max((depth[id(k)] for k in kids), default=0)
            if size[nid] > MAX_YAML_NODES:
                raise YamlError(source, f"more than {MAX_YAML_NODES} values once aliases "
                                "(*name) are expanded", f"at most {MAX_YAML_NODES}",
                                *_mark(node))
            if depth[nid] > MAX_YAML_DEPTH:
                raise YamlError(source, f"nested more than {MAX_YAML_DEPTH} levels deep",
                                f"at most {MAX_YAML_DEPTH} levels", *_mark(node))
            continue
        if nid in size:
            continue
        open_.add(nid)
        stack.append((node, True))
        for k in kids:
            if id(k) in open_:          # only the current path is open
                raise YamlError(source, "recursive alias (a value that contains itself)",
                                "aliases (*name) of finished values only", *_mark(k))
            if id(k) not in size:
                stack.append((k, False))


class _Loader(yaml.SafeLoader):
    """PyYAML's safe loader that stops composing past the depth and size limits.

    The scanner's cost grows with the square of the flow nesting (``[[[[``
    a thousand deep takes seconds), so the nesting is refused as it is
    read, not after; nodes are counted as they are made, so a long text
    stops at the limit too.  Aliases are checked afterwards
    (:func:`_check_expansion`): they add no nodes here.
    """

    def __init__(self, text, source):
        super().__init__(text)
        self.source, self.depth, self.nodes = source, 0, 0

    def compose_node(self, parent, index):
        self.depth += 1
        self.nodes += 1
        try:
            if self.depth > MAX_YAML_DEPTH:
                raise YamlError(self.source, f"nested more than {MAX_YAML_DEPTH} levels deep",
                                f"at most {MAX_YAML_DEPTH} levels", *self._here())
            if self.nodes > MAX_YAML_NODES:
                raise YamlError(self.source, f"more than {MAX_YAML_NODES} values",
                                f"at most {MAX_YAML_NODES}", *self._here())
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def _here(self):
        m = self.peek_event().start_mark
        return m.line + 1, m.column + 1


def _index_lines(node, source, path=(), lines=None):
    """Map each key path of a composed (checked) node tree to its 1-based line.

    Also rejects duplicate keys, which PyYAML would silently resolve to the
    last one: a case file where ``rtol`` is given twice is a mistake.  Runs
    after :func:`_check_expansion`: the tree has no cycle and is shallow.
    """
    lines = {} if lines is None else lines
    if isinstance(node, yaml.MappingNode):
        seen = {}
        for knode, vnode in node.value:
            if not isinstance(knode, yaml.ScalarNode) or knode.tag == _MERGE_TAG:
                continue
            key, line = knode.value, knode.start_mark.line + 1
            if key in seen:
                raise YamlError(source, f"duplicate key (first at line {seen[key]})",
                                "each key once per section", line=line, path=path + (key,))
            seen[key] = line
            lines[path + (key,)] = line
            _index_lines(vnode, source, path + (key,), lines)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            lines[path + (i,)] = item.start_mark.line + 1
            _index_lines(item, source, path + (i,), lines)
    return lines


def _as_text(text, source, limit):
    if isinstance(text, (bytes, bytearray)):
        try:
            text = bytes(text).decode("utf-8")
        except UnicodeDecodeError as exc:
            raise YamlError(source, f"not UTF-8 text ({exc.reason} at byte offset "
                            f"{exc.start})", "UTF-8 text") from None
    if not isinstance(text, str):
        raise YamlError(source, f"got {type(text).__name__}", "YAML text")
    if len(text) > limit:
        raise YamlError(source, f"{len(text)} characters long", f"at most {limit}")
    return text


def load_yaml(text, source="<text>", *, lines=False, limit=MAX_TEXT_CHARS):
    """The data of one YAML document (safe tags only), within the limits.

    Parameters
    ----------
    text : str or bytes
        The YAML text (bytes are read as UTF-8).
    source : str
        Names the text in messages: a file, ``"--set grid.nx=3"``, ...
    lines : bool
        Also return a dict mapping key paths (``("grid", "nx")``,
        ``("geometry", "bubbles", 0)``) to 1-based lines; duplicate keys
        are then refused.
    limit : int
        Longest text read, in characters (:data:`MAX_TEXT_CHARS`;
        :data:`MAX_OPTION_CHARS` for a command-line item).

    Returns
    -------
    object or (object, dict)
        The data (None for an empty document), with the lines if asked.

    Raises
    ------
    YamlError
        Too long, a control character, a syntax error, an unknown tag, an
        alias expansion over :data:`MAX_YAML_NODES` values, nesting over
        :data:`MAX_YAML_DEPTH` levels, a recursive alias, a value PyYAML
        cannot convert.
    """
    text = _as_text(text, source, limit)
    loader = None
    try:
        loader = _Loader(text, source)      # checks the characters already
        node = loader.get_single_node()
        if node is None:
            return (None, {}) if lines else None
        _check_expansion(node, source)
        # Lines before constructing: the constructor splices merge keys
        # (`<<: *base`) into the mapping nodes, which would read as duplicates.
        index = _index_lines(node, source) if lines else None
        data = loader.construct_document(node)
        return (data, index) if lines else data
    except YamlError:
        raise
    except yaml.reader.ReaderError as exc:
        ch = exc.character
        ch = chr(ch) if isinstance(ch, int) else ch
        what = (f"character {ch!r} (U+{ord(ch):04X})" if isinstance(ch, str) and len(ch) == 1
                else f"character {ch!r}")
        raise YamlError(source, f"{what} is not allowed in YAML (control character)", None,
                        *_position(text, exc.position)) from None
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = exc.problem or exc.context or str(exc).splitlines()[0]
        raise YamlError(source, f"YAML syntax error: {shorten(problem, 200)}", None,
                        mark.line + 1 if mark else None,
                        mark.column + 1 if mark else None) from None
    except yaml.YAMLError as exc:
        raise YamlError(source, f"YAML error: {shorten(exc, 200)}") from None
    except RecursionError:
        # A guard: the loader stops composing past MAX_YAML_DEPTH already.
        raise YamlError(source, f"nested more than {MAX_YAML_DEPTH} levels deep",
                        f"at most {MAX_YAML_DEPTH} levels") from None
    except (ValueError, OverflowError) as exc:
        # The SafeLoader's own conversions (e.g. a timestamp `2024-13-45`).
        raise YamlError(source, f"YAML value cannot be read ({shorten(exc, 200)})") from None
    finally:
        if loader is not None:
            loader.dispose()


def read_text(path, *, limit=MAX_FILE_BYTES, what="YAML file", hint=None):
    """The text of a file: at most ``limit`` bytes of UTF-8.

    Parameters
    ----------
    path : str or os.PathLike
    limit : int
        Largest file read, in bytes; a larger one is refused unread.
    what : str
        The kind of file, for messages (``"YAML case file"``).
    hint : str, optional
        Added to the message of a file over the limit.

    Raises
    ------
    YamlError
        Not found, a directory, unreadable, over the limit, not UTF-8.
    """
    source = str(path)
    try:
        with open(path, "rb") as fh:
            # A bounded read: /dev/zero or a pipe must not fill the memory.
            raw = fh.read(limit + 1)
    except FileNotFoundError:
        problem = "file not found"
    except IsADirectoryError:
        problem = "is a directory"
    except PermissionError:
        problem = "permission denied"
    except OSError as exc:
        problem = f"cannot read ({shorten(exc.strerror or exc)})"
    else:
        if len(raw) > limit:
            raise YamlError(source, f"larger than {limit // 1024} KiB",
                            f"a {what} of at most that size" + (f" ({hint})" if hint else ""))
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            at = exc.start
            line = raw.count(b"\n", 0, at) + 1
            col = at - (raw.rfind(b"\n", 0, at) + 1) + 1
            raise YamlError(source, f"not UTF-8 text ({exc.reason}: byte 0x{raw[at]:02x} at "
                            f"byte offset {at})", "a UTF-8 text file", line, col) from None
    raise YamlError(source, problem, f"a readable {what}")
