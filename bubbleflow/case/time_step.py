"""The time-step limits of a flow, written once: :func:`step_limits`.

The flow solvers take the smallest of them every step (with the fluid's
speed and largest kinematic viscosity of the step); the case checks take
them at t = 0, the fluid at rest (:func:`initial_dt_limits`), to resolve
``momentum.viscosity: auto`` and to check ``time`` and ``output.interval``.
:func:`landing_step` shortens a step to land on the run's end and on its
snapshot times.  Host floats only: reading a case needs no numerics.
"""
from __future__ import annotations

import math
from typing import NamedTuple

from .bounds import MAX_SNAPSHOTS, MAX_STEPS, MIN_INTERVAL_FRACTION
from .errors import show_number, show_value
from .geometry_checks import has_gas

#: The speed (m/s) the convective limit divides by at least: a fluid at rest.
MIN_SPEED = 1e-12


class StepLimit(NamedTuple):
    """One time-step limit: its value and the formula it comes from.

    Attributes
    ----------
    dt : float
        The limit (s).
    rule : str
        The formula, its numbers as :meth:`str.format` fields.
    numbers : tuple of float
        The numbers of ``rule``.
    """

    dt: float
    rule: str
    numbers: tuple

    @property
    def formula(self):
        """The formula with its numbers, for messages (formatted only when
        asked: the solvers take the limits every step)."""
        return self.rule.format(*self.numbers)


def cell_size(case):
    """``h``: the smallest cell side (m) of the case's grid."""
    g = case.grid
    return min(v / n for v, n in zip(g.lengths, g.cells))


def step_limits(case, *, umax=None, nu=None, with_dt_max=True, h=None):
    """The time-step limits of a flow, by name, on cells of smallest side ``h``.

    ``convective``: ``cfl h / umax`` (``umax`` at least :data:`MIN_SPEED`);
    ``viscous``: the explicit viscous stress, ``0.4 / ndim h^2 / nu``
    (stable below ``h^2 / (2 ndim nu)``); ``capillary``: ``sqrt(rho_avg h^3
    / (2 pi sigma))``; ``gravity``: ``sqrt(h / g)``, a free fall over one
    cell; ``dt_max``: ``time.dt_max``.

    Parameters
    ----------
    case : Case
    umax : float, optional
        The largest speed (m/s); None: no convective limit (a fluid at rest).
    nu : float, optional
        The largest kinematic viscosity (m^2/s); None: no viscous limit (an
        implicit viscous stress).
    with_dt_max : bool
        Include ``time.dt_max`` when the case sets it.
    h : float, optional
        :func:`cell_size` of the case, when the caller holds it already.

    Returns
    -------
    dict
        ``{name: StepLimit}`` of the limits that apply, in the order above
        (the step is the smallest of them).
    """
    ph, t = case.physics, case.time
    if h is None:
        h = cell_size(case)
    limits = {}
    if umax is not None:
        limits["convective"] = StepLimit(t.cfl * h / max(umax, MIN_SPEED),
                                         "cfl h / umax with cfl = {0:g}, h = {1:g}, "
                                         "umax = {2:.3g}", (t.cfl, h, umax))
    if nu is not None:
        c = 0.4 / case.grid.ndim           # 2-D: exactly 0.2
        limits["viscous"] = StepLimit(c * h * h / nu,
                                      "{0:.3g} h^2 / nu with h = {1:g}, nu = {2:.3g}", (c, h, nu))
    sigma = ph.surface_tension
    if sigma > 0:
        fl = case.fluids
        rho_avg = 0.5 * (fl.liquid.density + fl.gas.density)
        limits["capillary"] = StepLimit(math.sqrt(rho_avg * h ** 3 / (2 * math.pi * sigma)),
                                        "sqrt(rho_avg h^3 / (2 pi sigma)) with rho_avg = {0:g}, "
                                        "h = {1:g}, sigma = {2:g}", (rho_avg, h, sigma))
    if ph.gravity > 0:
        limits["gravity"] = StepLimit(math.sqrt(h / ph.gravity),
                                      "sqrt(h / g) with h = {0:g}, g = {1:g}", (h, ph.gravity))
    if with_dt_max and t.dt_max is not None:
        limits["dt_max"] = StepLimit(t.dt_max, "time.dt_max = {0:g}", (t.dt_max,))
    return limits


def viscosity_scheme(case):
    """``"implicit"`` or ``"explicit"``: ``momentum.viscosity``, with ``auto``
    resolved, in 2-D and 3-D alike.  Implicit when the explicit viscous
    limit ``0.4 / ndim h^2 / nu`` (``0.2 h^2 / nu`` in 2-D) is below every
    other step limit at t = 0 (capillary, gravity, ``dt_max``, a fixed
    ``dt``): only then can it ever set the step, the convective
    limit only shrinking the step as the flow speeds up.  Otherwise the
    explicit stress costs less and the step is the same."""
    scheme = case.momentum.viscosity
    if scheme != "auto":
        return scheme
    limits = _initial_limits(case, viscous=True)
    viscous = limits.pop("viscous")[0]
    others = [dt for dt, _ in limits.values()] + [x for x in (case.time.dt, case.time.dt_max)
                                                  if x is not None]
    return "implicit" if others and viscous < min(others) else "explicit"


def initial_dt_limits(case):
    """The time-step limits of a flow at rest (t = 0), in seconds.

    :func:`step_limits` without the convective limit (the fluid at rest)
    and without ``dt_max``, the viscous limit with the largest kinematic
    viscosity of the fluids present, and only when the viscous stress is
    explicit (:func:`viscosity_scheme`).

    Parameters
    ----------
    case : Case

    Returns
    -------
    dict
        ``{"viscous": (dt, formula), "capillary": ..., "gravity": ...}`` for
        the limits that apply; ``formula`` shows the numbers, for messages.
    """
    return _initial_limits(case, viscous=viscosity_scheme(case) == "explicit")


def _initial_limits(case, viscous):
    fl = case.fluids
    fluids = [fl.liquid] + ([fl.gas] if has_gas(case.geometry) else [])
    nu = max(f.viscosity / f.density for f in fluids) if viscous else None
    limits = step_limits(case, nu=nu, with_dt_max=False)
    return {name: (limit.dt, limit.formula) for name, limit in limits.items()}


def check_time(case, ctx):
    """A flow's time step and output interval against the limits at t = 0."""
    t, out = case.time, case.output
    limits = initial_dt_limits(case) or {"no": (math.inf, "no viscous, capillary or gravity limit")}
    name, (dt0, formula) = min(limits.items(), key=lambda kv: kv[1][0])
    if t.dt is not None:
        if t.dt > t.end:
            ctx.bad(("time", "dt"), t.dt, f"a step <= time.end = {show_number(t.end)}")
        if t.dt > dt0:
            ctx.fail(("time", "dt"), f"got {show_value(t.dt)}, above the {name} stability limit "
                     f"{dt0:.3g} s at t = 0 ({formula})",
                     f"a fixed step <= {dt0:.3g}, or no time.dt (adaptive steps)", value=t.dt)
    step = min(x for x in (dt0, t.dt, t.dt_max) if x is not None)
    if t.end / step > MAX_STEPS:
        ctx.fail(("time", "end"), f"got {show_value(t.end)}, at least {t.end / step:.3g} steps of "
                 f"{step:.3g} s (the {name} limit at t = 0: {formula})",
                 f"at most {MAX_STEPS:.0e} steps: a shorter time.end or a coarser grid",
                 value=t.end)
    if out.interval is not None:
        iv = out.interval
        if t.end / iv > MAX_SNAPSHOTS:
            ctx.fail(("output", "interval"), f"got {show_value(iv)}, {t.end / iv:.3g} snapshots "
                     f"to time.end = {show_number(t.end)}",
                     f"at most {MAX_SNAPSHOTS} snapshots: an interval >= "
                     f"{t.end / MAX_SNAPSHOTS:.3g}", value=iv)
        if math.isfinite(step) and iv < MIN_INTERVAL_FRACTION * step:
            ctx.fail(("output", "interval"), f"got {show_value(iv)}, which would force steps "
                     f"{step / iv:.3g} times shorter than the stable step {step:.3g} s at t = 0",
                     f"an interval >= {MIN_INTERVAL_FRACTION:g} * step = "
                     f"{MIN_INTERVAL_FRACTION * step:.3g}", value=iv)


def landing_step(time, dt, end, interval):
    """``dt`` shortened to land exactly on ``end`` and on the next multiple
    of the snapshot ``interval`` (None: no snapshots) after ``time``."""
    if time + dt > end - 1e-12 * end:
        dt = end - time
    if interval is not None:
        k = math.floor(time / interval + 1e-9) + 1
        if time + dt > k * interval - 1e-12 * end:
            dt = k * interval - time
    return dt
