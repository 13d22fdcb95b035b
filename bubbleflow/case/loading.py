"""Reading a case: the YAML file through the hardened reader, the ``--set``
overrides, the checks, the defaults; :func:`load_case` and
:func:`case_from_dict` return the validated :class:`~.schema.Case`.
"""
from __future__ import annotations

import copy
import dataclasses
import os
from collections.abc import Mapping

from .bounds import MAX_CASE_BYTES
from .checks import check_case
from .errors import CaseError, show_kind, show_value
from .field_specs import SectionSpec
from .key_paths import dotted, split_dotted
from .provenance import CheckContext, Where
from .relevance import warn_ineffective
from .schema import Case
from .yaml_reader import MAX_OPTION_CHARS, YamlError, load_yaml, read_text, shorten

def _case_error(exc, key=None, origin=None):
    """A :class:`~.yaml_reader.YamlError` as the :class:`CaseError` it is to the user."""
    if exc.path is not None:
        key = dotted(exc.path)
    return CaseError(exc.source, key, exc.problem, exc.expected, line=exc.line,
                     column=exc.column, origin=origin)


def read_yaml_file(path):
    """``(data, lines)`` of a YAML case or study file, read through the hardened reader.

    Parameters
    ----------
    path : str or os.PathLike

    Returns
    -------
    data : object
        The document (None when empty).
    lines : dict
        Key paths (``("grid", "nx")``) to 1-based lines.

    Raises
    ------
    CaseError
        The file cannot be read (missing, over :data:`~.bounds.MAX_CASE_BYTES`, not
        UTF-8) or is not usable YAML (see :func:`~.yaml_reader.load_yaml`).
    """
    file = os.fspath(path)
    try:
        text = read_text(file, limit=MAX_CASE_BYTES, what="YAML case file",
                         hint="case files are a few KiB; use random_bubbles or bubble_lattice "
                              "for many bubbles")
        return load_yaml(text, file, lines=True)
    except YamlError as exc:
        raise _case_error(exc) from None


def option_value(text, option):
    """A command-line value read as YAML, through the hardened reader.

    Parameters
    ----------
    text : str
        The value (``3`` of ``--configs multigrid(degree=3):none``).
    option : str
        The option, named in the error (``"--configs"``).

    Returns
    -------
    object

    Raises
    ------
    CaseError
        Longer than :data:`~.yaml_reader.MAX_OPTION_CHARS` or unusable YAML
        (see :func:`~.yaml_reader.load_yaml`); one line naming the option.
    """
    try:
        return load_yaml(text, option, limit=MAX_OPTION_CHARS)
    except YamlError as exc:
        raise CaseError(option, None,
                        f"cannot parse value {show_value(text, 40)} ({exc.problem})",
                        "a YAML value, e.g. 256, 1e-8, [8, 8], null") from None


def _apply_overrides(data, overrides, file):
    """Apply ``key.path=value`` overrides to a copy of ``data``.

    Returns ``(data, origins)`` where ``origins`` maps each path an override
    set (or created on the way) to the override's text.  Unknown keys are
    not rejected here: the validation does it, with the same message as for
    the file.

    Each override is a string ``"key.path=value"`` (value parsed as YAML) or
    a tuple ``(key_path, value[, label])`` (value used as is: the CLI's
    ``-o DIR`` must not turn a directory called ``2024`` into an int).
    """
    data = copy.deepcopy(data)
    origins = {}
    if isinstance(overrides, str):      # one override passed bare, not in a list
        overrides = [overrides]
    for item in overrides or ():
        if isinstance(item, str):
            label = f"--set {item.strip()}"
            key, sep, raw = item.partition("=")
            key = key.strip()
            if not sep or not key:
                raise CaseError(file, None, f"malformed override {shorten(repr(item))}",
                                "key.path=value, e.g. --set grid.nx=256", origin=label)
            if len(item) > MAX_OPTION_CHARS:
                raise CaseError(file, None, f"--set item of {len(item)} characters",
                                f"at most {MAX_OPTION_CHARS} (longer values belong in the "
                                "case file)", origin=label)
            try:
                value = load_yaml(raw, label, limit=MAX_OPTION_CHARS)
            except YamlError as exc:
                problem = exc.problem.replace("YAML syntax error: ", "")
                # (The override, named first, shows the value already.)
                raise CaseError(file, key,
                                f"cannot parse value {show_value(raw, 40)} ({problem})",
                                "a YAML value, e.g. 256, 1e-8, [8, 8], null",
                                origin=label) from None
        else:
            key, value, *rest = item
            label = rest[0] if rest else f"--set {key}={show_value(value)}"
        path = split_dotted(key)
        if path is None or isinstance(path[0], int):
            raise CaseError(file, None, f"malformed key path {shorten(repr(key))}",
                            "key.path=value, e.g. --set grid.nx=256 or "
                            "--set geometry.bubbles[0].radius=0.1", origin=label)

        def refuse(n, child):
            raise CaseError(file, dotted(path), f"{dotted(path[:n])} is {show_kind(child)}",
                            "an existing list to index" if isinstance(path[n], int)
                            else "a section (mapping) to set a key in", origin=label)

        node = data
        for n, seg in enumerate(path[:-1]):
            if isinstance(seg, int):
                if seg >= len(node):
                    raise CaseError(file, dotted(path), f"{dotted(path[:n])} has no item {seg}",
                                    f"an index below {len(node)}", origin=label)
                child = node[seg]
            else:
                child = node.get(seg)
                if child is None and not isinstance(path[n + 1], int):
                    # `--set` may create sections absent from the file.
                    child = node[seg] = {}
                    origins[path[: n + 1]] = label
            if isinstance(path[n + 1], int) != isinstance(child, list) or not isinstance(
                    child, (list, dict)):
                refuse(n + 1, child)
            node = child
        last = path[-1]
        if isinstance(last, int):
            if last >= len(node):
                raise CaseError(file, dotted(path), f"{dotted(path[:-1])} has no item {last}",
                                f"an index below {len(node)}", origin=label)
        node[last] = value
        # This override replaces whatever earlier ones set below it.
        for p in [p for p in origins if p[: len(path)] == path]:
            del origins[p]
        origins[path] = label
    return data, origins


def _build(data, file, lines, overrides, warn):
    if data is None:
        raise CaseError(file, None, "empty case file",
                        "a mapping of case sections (name, grid, fluids, ...)")
    if not isinstance(data, Mapping):
        raise CaseError(file, None, f"top level is {show_kind(data)}",
                        "a mapping of case sections (name, grid, fluids, ...)",
                        value=data, line=1 if lines is not None else None)
    if "sweep" in data:
        raise CaseError(file, "sweep", "this file describes a parameter study",
                        "`bubbleflow sweep` for it, or a case file without the sweep block",
                        line=(lines or {}).get(("sweep",)) if isinstance(lines, dict) else None)
    data, origins = _apply_overrides(dict(data), overrides, file)
    where = Where(lines, origins)
    ctx = CheckContext(file, where)
    case = SectionSpec(Case).convert(ctx, (), data)
    case = check_case(case, ctx)
    name = case.name
    if ("name",) not in ctx.explicit:
        # Sources such as "<dict>" or "<study>" are not files: no stem.
        stem = os.path.splitext(os.path.basename(file))[0]
        name = "case" if file.startswith("<") or not stem else stem
    case = dataclasses.replace(case, name=name, source=file, _where=where)
    if warn:
        warn_ineffective(case)
    return case


def load_case(path, overrides=(), *, warn=True):
    """Read, override, validate and complete a YAML case file.

    Parameters
    ----------
    path : str or os.PathLike
        The case file.
    overrides : sequence of str
        ``"key.path=value"`` items (the CLI's ``--set``), applied in order;
        ``value`` is parsed as YAML (``256``, ``1e-8``, ``[8, 8]``, ``null``).
        Tuples ``(key_path, value[, label])`` set ``value`` unparsed.
    warn : bool
        Say on stderr, in one line each, the ``--set`` items that change
        nothing given the rest of the case (``solver.deflation.subdomains``
        without deflation...; :mod:`.relevance`); the case is returned
        all the same.

    Returns
    -------
    Case

    Raises
    ------
    CaseError
        For anything wrong with the file, an override or a value; the
        message is one line.
    """
    file = os.fspath(path)
    data, lines = read_yaml_file(file)
    return _build(data, file, lines, overrides, warn)


def case_from_dict(data, source="<dict>", overrides=(), *, warn=True):
    """Validate and complete a case given as a (nested) dict.

    Same checks and messages as :func:`load_case`, without line numbers;
    ``Case.to_dict()`` round-trips through it.

    Parameters
    ----------
    data : mapping
    source : str
        Named in error messages and kept as ``case.source``.
    overrides : sequence of str
        As for :func:`load_case`.
    warn : bool
        As for :func:`load_case`.

    Returns
    -------
    Case
    """
    if data is None:
        data = {}
    if not isinstance(data, Mapping):
        raise CaseError(source, None, f"top level is {show_kind(data)}",
                        "a mapping of case sections (name, grid, fluids, ...)", value=data)
    return _build(data, str(source), None, overrides, warn)
