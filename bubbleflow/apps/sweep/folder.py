"""The study folder: another study's is refused; the finished rows of this one are kept."""
from __future__ import annotations

import os
from collections.abc import Mapping

import yaml

from ...case.config import CaseError, first_difference
from .study import STUDY_FILE, dump_record
from .summary import STATUSES, SUMMARY_CSV, read_summary
from .values import one_line, show

__all__ = ["check_folder"]


def _fingerprint(record):
    """What must agree for two study.yaml files to be the same study."""
    case = record.get("case")
    case = yaml.safe_load(case) if isinstance(case, str) else (case or {})
    case = dict(case) if isinstance(case, Mapping) else {}
    for k in ("name", "backend"):
        case.pop(k, None)
    if isinstance(case.get("output"), Mapping):
        case["output"] = {k: v for k, v in case["output"].items() if k != "directory"}
    params = record.get("parameters") or {}
    return {"parameters": [[k, v] for k, v in params.items()], "case": case}


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
        with open(record_path, encoding="utf-8") as fh:
            theirs = yaml.safe_load(fh)
        if not isinstance(theirs, Mapping):
            raise ValueError("not a mapping")
    except (OSError, ValueError, yaml.YAMLError) as exc:
        raise CaseError(record_path, None, f"unreadable study record ({one_line(exc)})",
                        expected) from None
    ours = yaml.safe_load(dump_record(study.record()))
    a, b = _fingerprint(theirs), _fingerprint(ours)
    if a["parameters"] != b["parameters"]:
        there = {k: v for k, v in a["parameters"]}
        here = {k: v for k, v in b["parameters"]}
        if list(there) != list(here):
            what = f"parameters {list(there)} there, {list(here)} here"
        else:
            k = next(k for k in here if there[k] != here[k])
            what = f"parameter {k}: {show(there[k])} there, {show(here[k])} here"
        raise CaseError(record_path, None, f"holds another study ({what})", expected)
    diff = first_difference(a["case"], b["case"])
    if diff:
        key, there, here = diff
        raise CaseError(record_path, None, f"holds another study (base case {key}: "
                        f"{show(there)} there, {show(here)} here)", expected)
    rows = read_summary(os.path.join(d, SUMMARY_CSV))
    runs = {p["run"] for p in study.points}
    keep = [r for r in rows if r.get("run") in runs and r.get("status") in STATUSES
            and (r.get("status") == "failed" or os.path.isfile(os.path.join(d, f"{r['run']}.h5")))]
    if keep and not resume:
        raise CaseError(record_path, None, f"holds this study already ({len(keep)} of "
                        f"{len(study.points)} runs finished)",
                        "--resume to continue it, or a new --name or an empty folder")
    return keep
