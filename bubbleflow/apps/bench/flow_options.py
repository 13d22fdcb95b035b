"""The arguments of ``bubbleflow bench --flow``, validated (memory included) before any work."""
from __future__ import annotations

import os
from dataclasses import dataclass, field

from ...case.config import CaseError
from .flow_cases import DEFAULT_LABELS, NAMED_CASES, build_configs, parse_size
from .options import PROG, check_copy_fits, check_csv_writable, count_option

__all__ = ["FlowBench", "parse_flow_args", "SOLVER_ONLY", "FLOW_ONLY", "CSV_NAME"]

#: Options of the solver benchmark that mean nothing to ``--flow``: argparse
#: attribute -> option.  Given with ``--flow`` they are refused.
SOLVER_ONLY = {
    "contrasts": "--contrasts", "configs": "--configs",
    "cells_per_subdomain": "--cells-per-subdomain", "rhs": "--rhs", "seed": "--seed",
    "rtol": "--rtol", "maxiter": "--maxiter", "check_every": "--check-every",
    "storage": "--storage", "repeat": "--repeat", "peers": "--peers", "no_peer": "--no-peer",
    "peer_maxiter": "--peer-maxiter", "peer_repeat": "--peer-repeat",
    "peer_max_size": "--peer-max-size", "dim": "--dim",
}
#: Options of ``--flow`` only; given without it they are refused.
FLOW_ONLY = {"cases": "--cases", "steps": "--steps", "skip": "--skip", "set": "--set"}
#: The file name ``--csv FOLDER`` writes.
CSV_NAME = "bench_flow.csv"
DEFAULT_STEPS = 50
DEFAULT_SKIP = 5


@dataclass
class FlowBench:
    """Validated arguments of ``bubbleflow bench --flow``."""

    configs: list                  # FlowConfig, in the order they run
    backend: object
    steps: int = DEFAULT_STEPS
    skip: int = DEFAULT_SKIP
    overrides: list = field(default_factory=list)
    copy_mib: int = 0              # 0: 512 on the GPU, 64 on the CPU
    csv: str = None
    progress: bool = True
    # measured by run_flow_bench
    device: str = ""
    copy_bw: float = 0.0           # bytes/s on the backend's device
    host_bw: float = 0.0           # bytes/s on the host (the output's floor)


def _given(args, name):
    value = getattr(args, name, None)
    return value not in (None, False, [])


def _labels(tokens):
    """``--cases hysing,rising3d other.yaml`` -> ``["hysing", "rising3d", "other.yaml"]``."""
    labels = []
    for token in tokens or [",".join(DEFAULT_LABELS)]:
        for label in str(token).split(","):
            label = label.strip()
            if not label:
                continue
            if label not in NAMED_CASES and not os.path.isfile(label):
                raise CaseError(PROG, "--cases", f"got {label!r}",
                                "a comma-separated list of " + ", ".join(NAMED_CASES)
                                + " or paths of mode: flow case files")
            if label not in labels:
                labels.append(label)
    return labels


def _check_fits(configs, backend):
    """Refuse a configuration whose estimated memory exceeds the free memory, before any work."""
    from ...case.resources import check_memory

    for config in configs:
        try:
            check_memory(config.case, backend)
        except CaseError as exc:
            raise CaseError(PROG, "--sizes", f"got {config.case.grid.nx} ({config.title}), "
                            f"which does not fit: {exc.problem}",
                            exc.expected) from None


def _csv_path(path):
    """``--csv FILE``, or ``--csv FOLDER`` (an existing one, or a name ending in /)."""
    if path is None:
        return None
    if os.path.isdir(path) or str(path).endswith(("/", os.sep)):
        path = os.path.join(path, CSV_NAME)
    check_csv_writable(path)
    return path


def parse_flow_args(args):
    """The parsed ``argparse.Namespace`` (with ``--flow``) -> :class:`FlowBench`.

    Raises
    ------
    CaseError
        A solver-only option, an unknown case, a bad size, step count or
        ``--set``, a case that is invalid at a size, a size that does not
        fit in memory, an unwritable ``--csv``: one line, nothing run.
    """
    from ...compute.backend import BackendUnavailable, get_backend

    for name, option in SOLVER_ONLY.items():
        if _given(args, name):
            raise CaseError(PROG, option, "given with --flow",
                            "options of the flow benchmark: --cases, --sizes, --steps, --skip, "
                            "--set, --backend, --copy-mib, --csv, --no-progress")
    try:
        backend = get_backend(args.backend)
    except BackendUnavailable as exc:
        raise CaseError(PROG, "--backend", f"got {args.backend!r}",
                        f"'auto' or 'numpy' on this machine (cupy unavailable: {exc})") from None
    labels = _labels(args.cases)
    sizes = None
    if args.sizes:
        sizes = [(parse_size(s), str(s)) for s in args.sizes]
    steps = count_option("--steps", args.steps) if args.steps is not None else DEFAULT_STEPS
    skip = count_option("--skip", args.skip) if args.skip is not None else DEFAULT_SKIP
    copy_mib = count_option("--copy-mib", args.copy_mib) if args.copy_mib is not None else 0
    check_copy_fits(copy_mib, backend)
    overrides = list(args.set or [])
    configs = build_configs(labels, sizes, overrides, backend.on_device)
    _check_fits(configs, backend)
    return FlowBench(
        configs=configs, backend=backend, steps=steps, skip=skip, overrides=overrides,
        copy_mib=copy_mib,
        csv=_csv_path(args.csv), progress=not args.no_progress)


def refuse_flow_only(args):
    """Without ``--flow``: a flow-only option is one ``error:`` line."""
    for name, option in FLOW_ONLY.items():
        if _given(args, name):
            raise CaseError(PROG, option, "given without --flow",
                            "--flow (the flow benchmark), or the solver benchmark's options")
