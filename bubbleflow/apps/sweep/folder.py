"""The study folder: locked against a second sweep; another study's is refused; the
finished rows of this one are kept."""
from __future__ import annotations

import os
from collections.abc import Mapping

import yaml

from ...case.config import CaseError, first_difference
from ...case.yaml_reader import MAX_TEXT_CHARS, YamlError, load_yaml, read_text, shorten
from ...io.lock import FolderLock, LockBusy, LockRefused
from .study import STUDY_FILE, dump_record
from .summary import STATUSES, SUMMARY_CSV, read_summary
from .values import show

__all__ = ["check_folder", "lock_study"]


def _fingerprint(record, source):
    """What must agree for two study.yaml files to be the same study.

    Raises
    ------
    YamlError
        The record's case (YAML text) is unreadable, its parameters no mapping.
    """
    case = record.get("case")
    case = load_yaml(case, f"{source}: case") if isinstance(case, str) else (case or {})
    case = dict(case) if isinstance(case, Mapping) else {}
    for k in ("name", "backend"):
        case.pop(k, None)
    if isinstance(case.get("output"), Mapping):
        case["output"] = {k: v for k, v in case["output"].items() if k != "directory"}
    params = record.get("parameters") or {}
    if not isinstance(params, Mapping):
        raise YamlError(source, "parameters is not a mapping", "KEY: [values]")
    return {"parameters": [[k, v] for k, v in params.items()], "case": case}


def lock_study(study):
    """The held lock of the study folder ``<study>``: ``.<study>.study.lock`` beside it
    (as a run's ``.<name>.lock`` beside its file; the folder's listing stays the study's).

    Raises
    ------
    CaseError
        Another sweep holds it (named), the lock file is a link, or the
        folder holding it cannot be created.
    """
    d = study.directory
    parent = os.path.dirname(os.path.abspath(d))
    try:
        os.makedirs(parent, exist_ok=True)
    except OSError as exc:
        raise CaseError(parent, None, f"cannot create the folder ({exc.strerror})",
                        "a writable location") from None
    lock = FolderLock(parent, f".{os.path.basename(os.path.abspath(d))}.study.lock")
    try:
        return lock.acquire()
    except LockBusy as exc:
        raise CaseError(d, None, f"another bubbleflow sweep ({exc.holder}) is running this "
                        "study", "one sweep per study folder: wait for it, or a new --name "
                        "or -o") from None
    except LockRefused as exc:
        raise CaseError(parent, None, f"the lock file {os.path.basename(exc.path)} "
                        f"{exc.problem}; bubbleflow never writes through it",
                        "a regular file there or nothing (remove it)") from None


def check_folder(study, resume):
    """Refuse a folder holding another study; return the rows to keep (for --resume)."""
    d = study.directory
    record_path = os.path.join(d, STUDY_FILE)
    expected = "a new --name or an empty folder, or --resume with the same study"
    if os.path.exists(d) and not os.path.isdir(d):
        raise CaseError(d, None, "exists and is not a folder", "a new --name or another -o")
    if not os.path.isdir(d) or not os.listdir(d):
        return []
    if not os.path.isfile(record_path):
        raise CaseError(d, None, f"folder is not empty and holds no {STUDY_FILE} "
                        "(not a study folder)", expected)
    try:
        theirs = load_yaml(read_text(record_path, limit=MAX_TEXT_CHARS, what="study record"),
                           record_path)
        if not isinstance(theirs, Mapping):
            raise YamlError(record_path, "not a mapping")
        a = _fingerprint(theirs, record_path)
    except YamlError as exc:
        raise CaseError(record_path, None, f"unreadable study record ({exc.problem})",
                        expected) from None
    # Our own record as it reads back from the file (lists, not tuples).
    b = _fingerprint(yaml.safe_load(dump_record(study.record())), STUDY_FILE)
    if a["parameters"] != b["parameters"]:
        there = {k: v for k, v in a["parameters"]}
        here = {k: v for k, v in b["parameters"]}
        if list(there) != list(here):
            what = f"parameters {shorten(list(there))} there, {shorten(list(here))} here"
        else:
            k = next(k for k in here if there[k] != here[k])
            what = (f"parameter {shorten(k)}: {shorten(show(there[k]))} there, "
                    f"{shorten(show(here[k]))} here")
        raise CaseError(record_path, None, f"holds another study ({what})", expected)
    diff = first_difference(a["case"], b["case"])
    if diff:
        key, there, here = diff
        raise CaseError(record_path, None, f"holds another study (base case {key}: "
                        f"{shorten(show(there))} there, {shorten(show(here))} here)", expected)
    rows = read_summary(os.path.join(d, SUMMARY_CSV))
    runs = {p["run"] for p in study.points}
    keep = [r for r in rows if r.get("run") in runs and r.get("status") in STATUSES
            and (r.get("status") == "failed" or os.path.isfile(os.path.join(d, f"{r['run']}.h5")))]
    if keep and not resume:
        raise CaseError(record_path, None, f"holds this study already ({len(keep)} of "
                        f"{len(study.points)} runs finished)",
                        "--resume to continue it, or a new --name or an empty folder")
    return keep
