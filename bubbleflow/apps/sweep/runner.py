"""Running a study: the folder checked, the points run by an executor, the summary kept current."""
from __future__ import annotations

import contextlib
import os
import sys
import time

from ...case.config import CaseError
from ...io.atomic import atomic_text
from .dask_cluster import dask_connect, dask_distributed, run_dask
from .executors import run_inprocess, run_pool, visible_gpus
from .folder import check_folder, lock_study
from .study import STUDY_FILE, dump_record
from .summary import STATUSES, SUMMARY_CSV, write_summary
from .values import show

#: Most worker processes (``--workers``): each is an interpreter with its own
#: arrays on this machine (or a LocalCluster's), and no host has more cores.
MAX_WORKERS = 256

__all__ = ["run_study", "MAX_WORKERS"]


def _short_labels(keys):
    """Short unique labels for progress lines (``solver.preconditioner.type`` -> ``preconditioner``)."""
    parts = {k: k.split(".") for k in keys}
    for k, segs in parts.items():
        if len(segs) > 1 and segs[-1] == "type":
            parts[k] = segs[:-1]
    labels = {}
    for k, segs in parts.items():
        for n in range(1, len(segs) + 1):
            cand = ".".join(segs[-n:])
            if sum(".".join(o[-n:]) == cand for o in parts.values()) == 1:
                labels[k] = cand
                break
        else:
            labels[k] = k
    return labels


def _describe(row):
    st = row.get("status")
    bits = [st.replace("_", " ") if st else "?"]
    if row.get("iterations") is not None:
        bits.append(f"{row['iterations']} it")
    elif row.get("iterations_mean") is not None:
        bits.append(f"{row['iterations_mean']:.1f}/{row.get('iterations_max')} it")
    if isinstance(row.get("residual"), float):
        bits.append(f"residual {row['residual']:.1e}")
    if isinstance(row.get("wall_seconds"), float):
        bits.append(f"{row['wall_seconds']:.1f} s")
    if st != "ok" and row.get("error"):
        err = row["error"]
        bits.append(err if len(err) <= 160 else err[:157] + "...")
    return ", ".join(bits)


def run_study(study, executor="local", workers=None, scheduler=None, resume=False,
              progress=True, quiet=False):
    """Run (or resume) a prepared study; return the exit code (0 all ok, else 1).

    Raises
    ------
    CaseError
        The folder holds another study or another sweep is running it, the
        executor cannot be set up.
    """
    executor = executor or ("dask" if scheduler else "local")
    if executor not in ("local", "dask"):
        raise CaseError(study.source, None, f"--executor {executor!r}", "local or dask")
    if scheduler and executor != "dask":
        raise CaseError(study.source, None, f"got --scheduler with --executor {executor}",
                        "--executor dask --scheduler ADDRESS")
    if workers is not None and not 1 <= workers <= MAX_WORKERS:
        raise CaseError(study.source, None, f"--workers {workers}",
                        f"an integer from 1 to {MAX_WORKERS} (worker processes)")
    if executor == "dask":
        dask_distributed()     # not installed: one line, before anything runs
    # Held to the end: a second sweep of the folder is refused, naming this one,
    # before it reads the folder or touches a point's file.
    with lock_study(study):
        return _run_locked(study, executor, workers, scheduler, resume, progress, quiet)


def _run_locked(study, executor, workers, scheduler, resume, progress, quiet):
    """:func:`run_study` once the study folder is locked."""
    keep = check_folder(study, resume)
    # One worker per visible GPU when runs go to CuPy (local machine or LocalCluster).
    gpus = []
    if not (executor == "dask" and scheduler):
        backends = {p["case"]["backend"] for p in study.points}
        for b in sorted(backends):
            gpus = visible_gpus(b, study.source) or gpus
    if workers is None:
        workers = max(1, len(gpus))

    kept = {r["run"]: r for r in keep}
    todo = [p for p in study.points if p["run"] not in kept]
    client = cluster = None
    if executor == "dask" and todo:     # a scheduler that cannot be reached: nothing written
        client, cluster = dask_connect(scheduler, workers, gpus)
    try:
        return _execute(study, kept, todo, executor, workers, gpus, scheduler, client,
                        progress, quiet)
    finally:
        for closable in (client, cluster):
            if closable is not None:
                with contextlib.suppress(Exception):
                    closable.close()


def _execute(study, kept, todo, executor, workers, gpus, scheduler, client, progress, quiet):
    """Write study.yaml, run ``todo``, keep the summary up to date; return the exit code."""
    rows = dict(kept)
    os.makedirs(study.directory, exist_ok=True)
    record = study.record()
    record_path = os.path.join(study.directory, STUDY_FILE)
    study_text = dump_record(record)
    if not os.path.isfile(record_path) or not kept:
        atomic_text(record_path, study_text)
    else:
        with open(record_path, encoding="utf-8") as fh:
            study_text = fh.read()

    total = len(study.points)
    where = ("in-process" if executor == "local" and workers == 1 else
             f"{workers} processes" if executor == "local" else
             f"dask scheduler {scheduler}" if scheduler else f"dask LocalCluster of {workers}")
    gpu_note = f", GPUs {','.join(gpus)}" if gpus and not scheduler else ""
    say = (lambda *a: None) if quiet else (lambda *a: print(*a, flush=True))
    say(f"study {study.name}: {total} runs ({len(kept)} finished, {len(todo)} to run) in "
        f"{study.directory}; executor {executor} ({where}{gpu_note})")

    labels = _short_labels([p.key for p in study.parameters])
    bar = None
    if progress and not quiet and sys.stderr.isatty() and todo:
        from tqdm import tqdm

        bar = tqdm(total=total, initial=len(kept), unit="run", file=sys.stderr,
                   dynamic_ncols=True, desc=study.name)
    counts = {s: sum(r.get("status") == s for r in kept.values()) for s in STATUSES}
    t0 = time.perf_counter()
    finished = [len(kept)]

    def done(point, row):
        rows[point["run"]] = row
        counts[row.get("status", "failed")] = counts.get(row.get("status", "failed"), 0) + 1
        finished[0] += 1
        ordered = [rows[p["run"]] for p in study.points if p["run"] in rows]
        write_summary(study.directory, study.columns, ordered, study_text)
        if bar is not None:
            bar.set_postfix_str(f"ok {counts['ok']}, not converged {counts['not_converged']}, "
                                f"failed {counts['failed']}")
            bar.update(1)
        else:
            params = " ".join(f"{labels[k]}={show(v)}" for k, v in point["params"].items())
            say(f"[{finished[0]}/{total}] {point['run']} {params}: {_describe(row)}")

    try:
        if todo:
            if executor == "dask":
                run_dask(todo, done, client)
            elif workers == 1:
                run_inprocess(todo, done)
            else:
                run_pool(todo, done, workers, gpus)
        elif not os.path.isfile(os.path.join(study.directory, SUMMARY_CSV)):
            write_summary(study.directory, study.columns, [], study_text)
    finally:
        if bar is not None:
            bar.close()
    say(f"study {study.name}: {counts['ok']} ok, {counts['not_converged']} not converged, "
        f"{counts['failed']} failed of {total} runs ({len(todo)} run now in "
        f"{time.perf_counter() - t0:.1f} s); wrote {os.path.join(study.directory, SUMMARY_CSV)}")
    return 0 if counts["ok"] == total else 1
