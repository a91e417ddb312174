"""One adaptive truncation driver, with one stopping rule, for every truncated method.

An infinite model is made finite at an integer *level* (each queue at most ``K``
jobs, a phase difference at most ``N``, ...), or, where the kept set is not a level,
at a set the model describes itself (:attr:`Truncation.kept_set`). :func:`grow`
builds the representation at growing truncations, solves it with the solver it is
given, lets the model evaluate the measure, and stops by the rule below. It is used
by the ``ctmc`` and ``exact`` methods, the ``qbd`` phase truncation and the queries;
none of them has a loop of its own.

The stopping rule
-----------------
At each truncation ``k`` the driver records the value ``v_k``, the probability mass
``b_k`` on the states the truncation touched (:attr:`Truncation.rule`), and the
*boundary sensitivity* ``s_k``: the change of the value when that mass is removed and
the rest renormalised, times the tail factor ``1 / (1 - r)``, ``r`` the observed ratio
of the mass of the outermost layer to the one inside it (the boundary stands for a
geometric tail of layers beyond it). With the change ``c_k = |v_k - v_{k-1}|``:

* the *change estimate* is ``c_k``, or ``c_k r / (1 - r)`` once the last two ratios of
  successive changes are both below 1/2 (``r`` the larger: the remainder of a
  geometric series, observed and not assumed);
* the error estimate is ``e_k = max(change estimate, s_k)``, where ``s_k`` counts only
  for the ``block`` rule (mass is lost at the boundary); under ``redirect`` no mass
  is lost and ``s_k`` overstates the error (10-50x on power-of-d), so it is reported
  but not used;
* the driver stops when ``e_k <= tol |v_k|`` and, under ``block``, ``b_k <= tol``.

With a fixed truncation there is one solve; the error estimate is ``s_k`` (``None``
where the representation offers no sensitivity), with an :class:`AccuracyWarning`
when ``b_k > tol``.

Budgets
-------
Three budgets can end the growth before ``tol`` is reached: the memory the next level
would need, a wall-clock ``time_limit`` (the next level's time is predicted from the
last two, and the level is not started if it would end past the limit) and, where the
caller sets one, a number of states (``max_states``). The memory is predicted before a
level is built whenever the model can say its size: its states times the larger of
:data:`exactq.budget.CHAIN_BYTES_PER_STATE` (a measured lower bound) and the peak
memory per state of the last level, against :func:`exactq.budget.memory_budget` (a
share of the memory available, or ``EXACTQ_MEMORY_BUDGET``): no fixed cap, a machine
with more memory grows further. When one runs out the driver returns the
last value with its error estimate, an :class:`AccuracyWarning` saying which budget
stopped it, and ``info["truncation"]["stopped_by"]`` naming it; with ``strict`` it is a
:class:`TruncationError` instead. Only a budget that runs out before the first level
is solved is always an error (there is no value to return).

Every result reports ``info["truncation"]`` with the same keys: ``level`` (the last
integer level, or ``None`` for a set described by ``kept_set``), ``rule``,
``boundary_mass``, ``history`` (one record per truncation), ``stopped_by`` (``tol``,
``fixed``, ``max_states``, ``time_limit`` or ``memory``) and ``error_estimate_kind``;
and ``info["error_estimate_kind"]`` at the top level.
"""

from __future__ import annotations

import math
import time
import warnings
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from .budget import CHAIN_BYTES_PER_STATE, as_size, format_bytes, memory_budget, require_memory
from .errors import AccuracyWarning, ModelError, TruncationError

__all__ = ["Truncation", "Evaluation", "Outcome", "grow", "tail_factor", "geometric_steps"]

RULES = ("block", "redirect", "lower", "upper")


@dataclass(frozen=True)
class Truncation:
    """How a representation of an infinite model was made finite.

    Attributes
    ----------
    level : int or None
        The integer truncation level (``None`` when the kept set is not a level; then
        ``kept_set`` describes it).
    rule : {"block", "redirect", "lower", "upper"}
        What happens to a transition that would leave the kept set. ``block``: it is
        suppressed (an arrival is lost), so the mass on the boundary measures what
        the truncation changed; ``redirect``: it is redirected to a state inside and
        no job is lost; ``lower``/``upper``: the bounding rules of a comparison
        system (jobs only lost / only gained).
    variables : str
        What the level bounds, in words (``"each queue"``, ``"largest queue"``).
    layers : (n,) ndarray of int, optional
        The truncation layer of each state, for the tail factor (default: the state's
        largest coordinate).
    kept_set : object, optional
        The model's own description of a kept set that is not a level (for example a
        cost bound); opaque to solvers, handed back to the model for the next one.
    """

    level: int | None
    rule: str = "block"
    variables: str = ""
    layers: np.ndarray | None = field(default=None, compare=False, repr=False)
    kept_set: Any = None

    def __post_init__(self):
        if self.rule not in RULES:
            raise ModelError(f"truncation rule must be one of {', '.join(RULES)}; got {self.rule!r}")
        if self.level is not None and (int(self.level) != self.level or self.level < 0):
            raise ModelError(f"truncation level must be an integer >= 0; got {self.level!r}")

    def describe(self) -> dict:
        """The JSON-ready description reported in ``info["truncation"]``."""
        out: dict = {"level": None if self.level is None else int(self.level), "rule": self.rule}
        if self.variables:
            out["variables"] = self.variables
        if self.kept_set is not None:
            describe = getattr(self.kept_set, "describe", None)
            out["kept_set"] = describe() if callable(describe) else str(self.kept_set)
        return out


@dataclass
class Evaluation:
    """What the model's evaluation of one truncation gives the driver.

    ``value`` (float or list), ``boundary_mass``, ``sensitivity`` (the boundary
    sensitivity with the tail factor; ``None`` when the representation has none) and
    ``record``: extra entries for the history (solver iterations, phases, ...).
    """

    value: Any
    boundary_mass: float = 0.0
    sensitivity: float | None = None
    record: dict = field(default_factory=dict)


@dataclass
class Outcome:
    """The driver's answer: the last value, its error estimate, representation, solution and info."""

    value: Any
    error_estimate: float | None
    representation: Any
    solution: Any
    info: dict


def norm(v) -> float:
    """Largest absolute entry of a value (scalars and lists alike)."""
    a = np.asarray(v, dtype=float)
    return float(np.max(np.abs(a))) if a.size else 0.0


def difference(a, b) -> float:
    """Largest absolute difference of two values; lists of unequal length count the extra entries."""
    a, b = np.ravel(np.asarray(a, float)), np.ravel(np.asarray(b, float))
    if a.shape != b.shape:
        m = min(a.size, b.size)
        tail = np.abs(np.concatenate([a[m:], b[m:]]))
        return float(max(np.abs(a[:m] - b[:m]).max(initial=0.0), tail.max(initial=0.0)))
    return float(np.max(np.abs(a - b))) if a.size else 0.0


def tail_factor(layers: np.ndarray, pi: np.ndarray) -> float:
    """``1 / (1 - r)``, ``r`` the mass of the outermost layer over the one inside it (capped at 1e3)."""
    top = int(layers.max())
    last = float(pi[layers == top].sum())
    before = float(pi[layers == top - 1].sum())
    r = last / before if before > 0 else 0.0
    return 1.0 / max(1.0 - min(r, 1.0), 1e-3)


def geometric_steps(growth: float = 1.5, fine_growth: float = 1.125, min_step: int = 4) -> Callable:
    """The default growth: ``x growth`` while the boundary mass exceeds tol, then ``x fine_growth``.

    The smaller steps confirm a value once the truncation is nearly right; every step
    adds at least ``min_step`` levels.
    """

    def step(level: int, evaluation: Evaluation, tol: float) -> int:
        factor = growth if evaluation.boundary_mass > tol else fine_growth
        return max(int(math.ceil(level * factor)), level + min_step)

    return step


def _floor(err: float, value) -> float:
    """An error estimate is never below the rounding level of the value."""
    return max(err, 4 * np.finfo(float).eps * norm(value))


def grow(
    build: Callable[[Any, Any], Any],
    solve: Callable[[Any, Any], Any],
    evaluate: Callable[[Any, Any], Evaluation],
    *,
    tol: float,
    start: Any = None,
    fixed: Any = None,
    next_level: Callable | None = None,
    size: Callable[[Any], int] | None = None,
    max_states: int | None = None,
    unit: str = "states",
    time_limit: float | None = None,
    strict: bool = False,
    progress: Callable[[dict], None] | None = None,
) -> Outcome:
    """Grow a truncation until the measure has converged (module docstring).

    Parameters
    ----------
    build : callable ``(level, previous) -> representation``
        The representation at ``level`` (``None`` when the model chooses the next set
        itself from ``previous = (representation, solution)``, or ``None`` at first).
        The representation has ``truncation`` (a :class:`Truncation`) and ``n_states``.
    solve : callable ``(representation, previous) -> solution``
        ``previous`` allows a warm start.
    evaluate : callable ``(representation, solution) -> Evaluation``
    tol : float
        Relative accuracy target.
    start : int, optional
        The first level (``None``: the model's first set).
    fixed : int, optional
        A fixed level: one solve.
    next_level : callable ``(level, evaluation, tol) -> level``, optional
        The growth policy (default :func:`geometric_steps`); ignored when ``start`` is
        ``None`` (the model grows its own sets).
    size : callable ``level -> int``, optional
        The number of states a level would give, checked against the memory budget
        (and ``max_states``) before building.
    max_states : int, optional
        A cap on ``size`` (or on the representation's ``n_states``) for callers whose
        cost is not memory (the dense QBD's phases); ``None``: only the memory budget.
    unit : str
        What ``size`` counts (``"states"``, ``"phases per level"``); only states are
        priced at :data:`exactq.budget.CHAIN_BYTES_PER_STATE` before the first level.
    time_limit : float, optional
        Wall-clock seconds for the whole growth (module docstring, *Budgets*).
    strict : bool
        Turn the warnings of a fixed truncation and of a budget that ran out into a
        :class:`TruncationError`.
    progress : callable, optional
        Called with each history record (a dict), for progress reports.

    Returns
    -------
    Outcome

    Examples
    --------
    The M/M/1 queue at load 1/2 cut at ``level`` jobs (arrivals blocked there) has the
    geometric law ``rho^n`` on ``0..level``; its mean grows to ``rho / (1 - rho) = 1``:

    >>> import numpy as np
    >>> from types import SimpleNamespace
    >>> def build(level, previous):
    ...     return SimpleNamespace(n_states=level + 1, truncation=Truncation(level, "block"))
    >>> def solve(rep, previous):
    ...     p = 0.5 ** np.arange(rep.n_states)
    ...     return p / p.sum()
    >>> def evaluate(rep, pi):  # the mean, and the mass on the boundary state
    ...     return Evaluation(float(pi @ np.arange(rep.n_states)), boundary_mass=float(pi[-1]))
    >>> out = grow(build, solve, evaluate, tol=1e-9, start=8)
    >>> abs(out.value - 1.0) < 1e-9, out.error_estimate < 1e-9, out.info["truncation"]["stopped_by"]
    (True, True, 'tol')
    """
    t0 = time.perf_counter()
    step = next_level or geometric_steps()

    if fixed is not None:
        if size is not None and not isinstance(fixed, str):
            need = as_size(size(fixed))
            if max_states is not None and need > max_states:
                raise TruncationError(f"truncation {fixed} gives {need:.3g} {unit}, above the limit of {max_states}; "
                                      "lower the truncation or tol, or use another method")
            if unit == "states":
                require_memory(need * CHAIN_BYTES_PER_STATE, f"the chain at truncation {fixed} ({need:.3g} states, at "
                               f"least {CHAIN_BYTES_PER_STATE} B each)", hint="lower the truncation")
        rep = build(fixed, None)
        _check_states(rep, max_states, unit)
        sol = solve(rep, None)
        ev = evaluate(rep, sol)
        trunc = rep.truncation
        err = None if ev.sensitivity is None else _floor(ev.sensitivity, ev.value)
        kind = "boundary_sensitivity" if err is not None else "not_estimated"
        record = _record(rep, ev, None, None, time.perf_counter() - t0)
        if ev.boundary_mass > tol:
            msg = (f"truncation {fixed}: probability mass {ev.boundary_mass:.3e} on the truncation boundary "
                   f"exceeds tol={tol:g}; the value may be inaccurate")
            if strict:
                raise TruncationError(msg)
            warnings.warn(msg, AccuracyWarning, stacklevel=4)
        elif err is None:
            warnings.warn(f"truncation fixed at {fixed}: the error is not estimated (probability at the "
                          f"truncation boundary {ev.boundary_mass:.3g})", AccuracyWarning, stacklevel=4)
        info = _info(trunc, ev.boundary_mass, [record], "fixed", kind)
        return Outcome(ev.value, err, rep, sol, info)

    history: list[dict] = []
    changes: list[float] = []
    level = start
    previous = None
    prev_value = None
    best = None  # (representation, solution, evaluation, error, kind) of the last solved level
    base_memory = _peak_memory()

    def out_of_budget(reason: str, detail: str) -> Outcome:
        if best is None:
            raise TruncationError(f"automatic truncation for tol={tol:g} stopped before its first level: {detail}")
        rep0, sol0, ev0, err0, kind0 = best
        if not math.isfinite(err0) and ev0.sensitivity is not None:  # one level only: its sensitivity is all we have
            err0, kind0 = ev0.sensitivity, "boundary_sensitivity"
        err0 = _floor(err0, ev0.value)
        where = f"at the last level ({_where(history[-1])}) with error estimate {err0:.2e}"
        if strict:
            raise TruncationError(f"automatic truncation stopped by {reason} before reaching tol={tol:g}: {detail}; "
                                  f"the value {where} was not returned (strict)")
        warnings.warn(f"automatic truncation stopped by {reason} before reaching tol={tol:g}: {detail}; returning "
                      f"the value {where}", AccuracyWarning, stacklevel=4)
        return Outcome(ev0.value, err0, rep0, sol0, _info(rep0.truncation, ev0.boundary_mass, history, reason, kind0))

    while True:
        if level is not None and size is not None:
            need = as_size(size(level))
            if max_states is not None and need > max_states:
                return out_of_budget("max_states", f"level {level} needs {need:.3g} {unit}, above the limit "
                                                   f"of {max_states}")
            why = _predicted_overrun(history, need, t0, time_limit, base_memory, unit, level)
            if why is not None:
                return out_of_budget(*why)
        tb = time.perf_counter()
        rep = build(level, previous)
        build_seconds = time.perf_counter() - tb
        n = getattr(rep, "n_states", None)
        if n is not None and max_states is not None and n > max_states:
            del rep
            return out_of_budget("max_states", f"the next truncation has {n} {unit}, above the limit of {max_states}")
        if n is not None and (level is None or size is None):  # sets chosen by the model: predict once built
            why = _predicted_overrun(history, n, t0, time_limit, base_memory, unit, level)
            if why is not None:
                del rep
                return out_of_budget(*why)
        ts = time.perf_counter()
        sol = solve(rep, previous)
        solve_seconds = time.perf_counter() - ts
        ev = evaluate(rep, sol)
        rule = rep.truncation.rule
        change = math.inf if prev_value is None else difference(ev.value, prev_value)
        changes.append(change)
        estimate = change
        if len(changes) >= 3 and 0 < changes[-2] < math.inf and 0 < changes[-3] < math.inf:
            r1, r2 = changes[-1] / changes[-2], changes[-2] / changes[-3]
            if r1 < 0.5 and r2 < 0.5:
                r = max(r1, r2)
                estimate = change * r / (1.0 - r)
        lossy = rule == "block"
        sens = ev.sensitivity if (lossy and ev.sensitivity is not None) else 0.0
        err = max(estimate, sens)
        kind = "geometric_extrapolation" if estimate < change else "level_difference"
        if sens > estimate:
            kind = "boundary_sensitivity"
        record = _record(rep, ev, change, estimate, build_seconds + solve_seconds)
        record.update(build_seconds=build_seconds, solve_seconds=solve_seconds, peak_memory=_peak_memory())
        history.append(record)
        if progress is not None:
            progress(dict(record, elapsed=time.perf_counter() - t0))
        scale = norm(ev.value)
        if err <= max(tol * scale, 1e-300) and (not lossy or ev.boundary_mass <= tol):
            break
        previous = (_released(rep), sol)
        best = (previous[0], sol, ev, err, kind)
        del rep  # free the large matrices before the next, larger representation is built
        prev_value = ev.value
        if time_limit is not None and time.perf_counter() - t0 > time_limit:
            return out_of_budget("time_limit", f"{time.perf_counter() - t0:.3g} s used of time_limit={time_limit:g} s")
        level = None if start is None else step(level, ev, tol)
    info = _info(rep.truncation, ev.boundary_mass, history, "tol", kind)
    return Outcome(ev.value, _floor(err, ev.value), rep, sol, info)


def _where(record: dict) -> str:
    parts = [] if record.get("level") is None else [f"level {record['level']}"]
    if record.get("n_states") is not None:
        parts.append(f"{record['n_states']} states")
    if record.get("change") is not None and math.isfinite(record["change"]):
        parts.append(f"last change {record['change']:.2e}")
    return ", ".join(parts) or "the first one"


def _peak_memory() -> int:
    """Peak resident memory of this process in bytes (0 where the platform does not say)."""
    try:
        import resource

        return int(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss) * 1024  # kilobytes on Linux
    except (ImportError, OSError, ValueError):  # pragma: no cover - not Linux
        return 0


def _predicted_overrun(history, need, t0, time_limit, base_memory, unit="states", level=None):
    """``(budget, detail)`` if the next level (``need`` states) would overrun time or memory, else None.

    Time: the last level's seconds scaled by the growth in states to the power
    observed between the last two levels (at least 1, at most 3). Memory: ``need``
    times the bytes per state, the larger of the last level's peak memory per state
    (above the process's memory at the start) and, for states,
    :data:`~exactq.budget.CHAIN_BYTES_PER_STATE` (the only prediction before the
    first level), less what the last level already held, against
    :func:`~exactq.budget.memory_budget`.
    """
    last = history[-1] if history and history[-1].get("n_states") else None
    where = f"level {level} ({need:.3g} {unit})" if level is not None else f"the next truncation ({need:.3g} {unit})"
    if last is not None and time_limit is not None:
        ratio = need / max(last["n_states"], 1)
        power = 1.0
        if len(history) >= 2 and history[-2].get("n_states") and last["n_states"] > history[-2]["n_states"]:
            growth = last["n_states"] / history[-2]["n_states"]
            power = min(max(math.log(max(last["seconds"], 1e-9) / max(history[-2]["seconds"], 1e-9))
                            / math.log(growth), 1.0), 3.0)
        predicted = last["seconds"] * ratio ** power
        elapsed = time.perf_counter() - t0
        if elapsed + predicted > time_limit:
            return ("time_limit", f"the next level ({need:.3g} states) would take about {predicted:.3g} s, "
                                  f"{elapsed:.3g} s of time_limit={time_limit:g} s being used")
    per_state = float(CHAIN_BYTES_PER_STATE) if unit == "states" else 0.0
    used = 0
    if last is not None:
        used = max(last.get("peak_memory", 0) - base_memory, 0)
        if used > 0:
            per_state = max(per_state, used / max(last["n_states"], 1))
    if per_state <= 0:
        return None
    budget = memory_budget()
    predicted = need * per_state
    if budget is not None and predicted - used > budget:  # what the last level held is there to reuse
        return ("memory", f"{where} would need about {format_bytes(predicted)} ({per_state:.3g} B per state), "
                          f"above the memory budget of {format_bytes(budget)} (EXACTQ_MEMORY_BUDGET changes it)")
    return None


def _released(rep):
    """The representation without its large matrices, kept only to start the next one."""
    release = getattr(rep, "released", None)
    return release() if callable(release) else rep


def _check_states(rep, max_states, unit):
    n = getattr(rep, "n_states", None)
    if n is not None and max_states is not None and n > max_states:
        raise TruncationError(f"the representation has {n} {unit}, above the limit of {max_states}")


def _record(rep, ev: Evaluation, change, estimate, seconds) -> dict:
    n = getattr(rep, "n_states", None)
    rec = {"level": rep.truncation.level, "n_states": None if n is None else int(n), "value": ev.value,
           "change": change, "boundary_mass": ev.boundary_mass, "sensitivity": ev.sensitivity}
    if n is None and hasattr(rep, "n_phases"):
        rec["phases"] = int(rep.n_phases)
    if estimate is not None:
        rec["estimate"] = estimate
    if rep.truncation.kept_set is not None:
        rec["kept_set"] = rep.truncation.describe()["kept_set"]
    rec["seconds"] = seconds
    rec.update(ev.record)
    return rec


def _info(trunc: Truncation, bmass: float, history: list, stopped_by: str, kind: str) -> dict:
    t = trunc.describe()
    t.update(boundary_mass=bmass, history=history, stopped_by=stopped_by, error_estimate_kind=kind)
    return {"truncation": t, "error_estimate_kind": kind}
