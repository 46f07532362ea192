"""Run state: is a run finished, and is its last row a final loss? (issue 9, section 1)

One rule for every source. A run's *end row* is its row marked ``final`` (at most one), else
its last row by step (or tokens, or flops). Up to three facts about that row say whether
the run finished:

=================  ===========================================================================
``final``          True: finished; False: not finished; empty: no evidence
``status``         the tracker's run state (also read from a ``state`` column): W&B's
                   ``finished`` / ``running``, ``crashed``, ``failed``, ``killed``,
                   ``preempted``; Marin executor's ``SUCCESS`` / ``RUNNING``, ``FAILED``,
                   ``DEP_FAILED``, ``CANCELLED``, ``WAITING`` (:data:`FINISHED_STATES`,
                   :data:`UNFINISHED_STATES`; ``unknown`` or empty: no evidence)
``fraction``       1: reached its planned length; below 1: stopped early. Without a fraction,
                   the step against the planned length (``total_steps``): reached when
                   ``step >= total_steps - 1`` (0- or 1-based step counters)
=================  ===========================================================================

Facts that disagree (``final = true`` with status ``crashed``, status ``finished`` at
fraction 0.5, ``final = false`` at fraction 1 ...) are an error naming the run and row: one
of them is wrong, and either guess changes the forecast. Otherwise the run is finished when a
fact says so, unfinished when one says not, and, with no fact at all, finished (a tidy table of
one final row per run). Only finished runs' end rows enter final-loss laws; unfinished runs
are excluded with the reason (checkpoint laws still fit their checkpoints).

A finished run whose end row is still at its peak learning rate (``lr >= 0.9 x peak_lr``)
while the ladder's schedule decays is *not annealed*: its loss is above the loss the run
would reach after its LR decay (a WSD run before its cooldown). It is excluded from final-loss
laws like an unfinished run, not merely warned about: fitted as a final loss it biases the
law upward at that rung. ``include_unfinished`` (CLI ``--include-unfinished``) fits it anyway.
The schedule decays when the ladder states a non-constant shape, or another run ends below
0.9 x its peak, or a run's logged LR falls below 0.9 x peak after reaching it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from ..errors import option

__all__ = ["FINISHED_STATES", "UNFINISHED_STATES", "Invalid", "RunStates", "run_states",
           "status_kinds", "invalid_message", "not_annealed", "PEAK_LR_SHARE", "MAX_LISTED",
           "ROWS_FROM_ZERO"]

#: Run states (lower case, ``-``/space as ``_``) meaning the run completed its training.
FINISHED_STATES = frozenset({"finished", "success", "succeeded", "successful", "completed",
                             "complete", "done"})
#: Run states meaning it did not (yet): W&B's running/crashed/failed/killed/preempted,
#: Marin executor's RUNNING/FAILED/DEP_FAILED/CANCELLED/WAITING, and common synonyms.
UNFINISHED_STATES = frozenset({"running", "crashed", "failed", "killed", "preempted",
                               "preempting", "pending", "queued", "waiting", "dep_failed",
                               "cancelled", "canceled", "aborted", "timeout", "timed_out",
                               "diverged", "oom"})
_NO_EVIDENCE = frozenset({"", "unknown", "none", "nan", "null", "n/a", "na"})
#: An end row at or above this share of its peak LR has not started its decay.
PEAK_LR_SHARE = 0.9
#: Invalid rows listed in one error message (the count is always given).
MAX_LISTED = 20


def _norm(value) -> str | None:
    if value is None or value is pd.NA or (isinstance(value, float) and np.isnan(value)):
        return None
    return str(value).strip().lower().replace("-", "_").replace(" ", "_")


def status_kinds(series: pd.Series) -> tuple[np.ndarray, np.ndarray]:
    """``(kind, bad)`` for a status column, both shape (n,): kind is 1 (finished), 0 (not
    finished) or -1 (no evidence: empty, ``unknown``); ``bad`` marks values that are none of
    these (the caller reports them). Each distinct value is read once."""
    codes, uniques = pd.factorize(series.astype(object), use_na_sentinel=False)
    kinds, bads = [], []
    for u in uniques:
        v = _norm(u)
        if v is None or v in _NO_EVIDENCE:
            kinds.append(-1); bads.append(False)
        elif v in FINISHED_STATES:
            kinds.append(1); bads.append(False)
        elif v in UNFINISHED_STATES:
            kinds.append(0); bads.append(False)
        else:
            kinds.append(-1); bads.append(True)
    return (np.asarray(kinds, dtype=np.int8)[codes] if len(codes) else np.zeros(0, np.int8),
            np.asarray(bads, dtype=bool)[codes] if len(codes) else np.zeros(0, bool))


@dataclass(frozen=True)
class Invalid:
    """One problem with a ladder's rows: a bad value, a duplicate, a contradiction.

    ``rows`` are table positions implicated (shape (k,)); ``run`` is set when the problem
    concerns the whole run (dropping it drops the run), else only ``rows`` are invalid.
    """

    label: str
    """Where: ``"run 'a' (row 3)"``, ``"run 'a'"`` or ``"row 3"``."""
    detail: str
    """What, e.g. ``"column 'loss' is empty or NaN, got nan"``."""
    rows: tuple[int, ...]
    run: str | None = None
    order: float = 0.0
    """Source row used to list problems in file order."""
    superseded: bool = False
    """The rows are a resumed run's superseded rows (logged before a rollback and replaced by
    the segment the run continued from), not bad values: dropping them keeps the run."""
    fix: str = ""
    """What to do about it, for the error only (not repeated in a drop's exclusion)."""

    @property
    def message(self) -> str:
        return f"{self.label}: {self.detail}" + (f"; {self.fix}" if self.fix else "")


#: How messages count rows, said once in each invalid-rows error: ``row`` numbers are the
#: source's records from 0 (row 0 is the first data row: line 2 of a CSV, line 1 of JSON Lines).
ROWS_FROM_ZERO = ("rows count the records from 0: row 0 is the first data row (line 2 of a CSV, "
                  "line 1 of JSON Lines)")


def invalid_message(name: str, problems: list[Invalid], n_rows: int,
                    n_runs: int | None = None) -> str:
    """One error message for every problem: a single problem as itself, several as a count
    and the first :data:`MAX_LISTED` in source-row order, each on its own line.

    ``n_rows`` is the number of distinct invalid rows, ``n_runs`` the number of distinct runs
    they belong to (``None``: not given); runs invalid as a whole (``Invalid.run``) are
    counted among them. Row numbers are 0-based data rows (:data:`ROWS_FROM_ZERO`)."""
    hint = (f"{option('drop_invalid=True', '--drop-invalid')} drops invalid rows and lists "
            f"each with its reason")
    if len(problems) == 1:
        return f"{problems[0].message} [{hint}; {ROWS_FROM_ZERO}]"
    listed = sorted(problems, key=lambda p: p.order)
    lines = "\n".join(f"  {p.message}" for p in listed[:MAX_LISTED])
    more = (f"\n  ... and {len(problems) - MAX_LISTED} more problem(s)"
            if len(problems) > MAX_LISTED else "")
    whole = {p.run for p in problems if p.run is not None}
    rows = f"{n_rows} invalid row(s)"
    if n_runs is not None:
        rows += f" in {n_runs} run(s)"
    if whole:
        rows += f" ({len(whole)} run(s) invalid as a whole)"
    first = f"the first {MAX_LISTED}" if len(problems) > MAX_LISTED else "all"
    return (f"ladder {name!r} has {rows}, {len(problems)} problem(s); {first} listed "
            f"({ROWS_FROM_ZERO}):\n{lines}{more}\nFix them, or {hint}")


@dataclass
class RunStates:
    """Each run's end row and state; arrays of shape (n_runs,) in run order."""

    end: np.ndarray
    """Position of the end row (the ``final`` row, else the last row)."""
    state: np.ndarray
    """1 finished, 0 not finished, -1 no evidence (treated as finished)."""
    reason: list
    """Why a run is not finished (``None`` for the others)."""
    contradictions: list = field(default_factory=list)
    """``[(k, detail)]``: runs whose facts disagree (the end row is ``end[k]``)."""
    multiple_finals: list = field(default_factory=list)
    """``[(k, positions)]``: runs with more than one ``final`` row."""
    fin: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))
    """What ``final`` says of the end row: 1 final, 0 not, -1 nothing."""
    status: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))
    """What ``status`` says: 1 finished, 0 not, -1 nothing."""
    reached: np.ndarray = field(default_factory=lambda: np.zeros(0, np.int8))
    """Whether the end row reached the planned length (``fraction`` = 1, or step against
    ``total_steps``): 1 yes, 0 no, -1 unknown."""


def run_states(t: pd.DataFrame, codes: np.ndarray, names, starts: np.ndarray, *,
               step_unreliable: np.ndarray | None = None,
               status_name: str = "status") -> RunStates:
    """The state of each run of ``t`` (rows sorted by run, then step; ``codes`` the run
    number of each row, shape (n,), non-decreasing; ``starts`` each run's first position).

    ``step_unreliable`` (bool, shape (n_runs,)) marks runs whose step counter restarted
    (:func:`delphi.schedules.find_restarts`): their step says nothing about how far they got,
    so it is not compared with ``total_steps`` (``fraction``, ``final`` and ``status`` still
    count). ``status_name`` is the run-state column as the source spells it (W&B: ``State``),
    for messages.

    Vectorised: only runs with a problem or an unfinished state are formatted one by one.
    """
    n, n_runs = len(t), len(starts)
    ends = np.r_[starts[1:], n] - 1
    end = ends.copy()
    has_final = np.zeros(n_runs, dtype=bool)
    multiple = []
    fin = np.full(n_runs, -1, dtype=np.int8)           # the final column's word on the end row
    if "final" in t.columns:
        final = t["final"].astype("boolean")
        is_true = final.fillna(False).to_numpy(bool)
        is_false = (~final).fillna(False).to_numpy(bool)
        n_final = np.add.reduceat(is_true.astype(np.int64), starts) if n else np.zeros(0, int)
        for k in np.flatnonzero(n_final > 1):
            multiple.append((int(k), np.flatnonzero(is_true[starts[k]:ends[k] + 1]) + starts[k]))
        has_final = n_final == 1
        true_at = np.flatnonzero(is_true)
        one = np.flatnonzero(has_final)
        if len(one):
            # The single final row of each such run: the true row within its group.
            pick = np.full(n_runs, -1)
            pick[codes[true_at]] = true_at    # runs with one final row: that row
            end[one] = pick[one]
        fin[has_final] = 1
        fin[~has_final & is_false[ends]] = 0

    # Fraction: the given column, else step against the planned length.
    frac = np.full(n_runs, np.nan)
    if "fraction" in t.columns:
        frac = t["fraction"].to_numpy(float)[end].copy()
    col_frac = ~np.isnan(frac)
    reached = np.full(n_runs, -1, dtype=np.int8)
    with np.errstate(invalid="ignore"):
        reached[col_frac] = (frac[col_frac] >= 1.0).astype(np.int8)
    step = total = None
    if {"step", "total_steps"} <= set(t.columns):
        step = t["step"].to_numpy(float)[end]
        total = t["total_steps"].to_numpy(float)[end]
        use = ~col_frac & ~np.isnan(step) & ~np.isnan(total)
        if step_unreliable is not None:
            use &= ~np.asarray(step_unreliable, dtype=bool)
        # Step counters start at 0 or 1: the last step of a T-step run is T - 1 or T.
        reached[use] = (step[use] >= total[use] - 1).astype(np.int8)

    def frac_text(k: int) -> str | None:
        """How far run k got, for a message (only runs with a message are formatted)."""
        if col_frac[k]:
            return f"fraction = {frac[k]:g}"
        if reached[k] >= 0:
            return f"step {step[k]:g} of {total[k]:g} planned (total_steps)"
        return None

    status = np.full(n_runs, -1, dtype=np.int8)
    raw_all = None
    if "status" in t.columns:
        kinds, _ = status_kinds(t["status"])
        status = kinds[end]
        raw_all = t["status"].to_numpy(dtype=object)[end]

    def raw(k: int) -> str | None:
        return None if raw_all is None else str(raw_all[k]).strip()

    contradictions = []
    facts = np.stack([fin, status, reached])            # (3, n_runs)
    said_yes = (facts == 1).any(axis=0)
    said_no = (facts == 0).any(axis=0)
    for k in np.flatnonzero(said_yes & said_no):
        contradictions.append((int(k), _contradiction(fin[k], status[k], reached[k], raw(k),
                                                      frac_text(k), status_name)))
    state = np.where(said_no, 0, np.where(said_yes, 1, -1)).astype(np.int8)
    reason: list = [None] * n_runs
    for k in np.flatnonzero(state == 0):
        parts = []
        if status[k] == 0:
            parts.append(f"{status_name} {raw(k)!r}")
        if reached[k] == 0:
            parts.append(frac_text(k))
        if not parts:
            parts.append("its last row is marked final = false")
        reason[k] = f"unfinished ({'; '.join(parts)}); final-loss laws need finished runs"
    return RunStates(end=end, state=state, reason=reason, contradictions=contradictions,
                     multiple_finals=multiple, fin=fin, status=status, reached=reached)


def _contradiction(fin, status, reached, raw, frac_text, status_name: str = "status") -> str:
    """The message for a run whose facts disagree (the first disagreeing pair); the status
    column is named ``status_name`` (as the source spells it)."""
    length = ("fraction" if frac_text is not None and frac_text.startswith("fraction")
              else "step or total_steps")

    def fix(a: str, b: str) -> str:
        return f"; one of them is wrong: fix the {a} or the {b} column"

    if fin == 1 and status == 0:
        return (f"marked final = true, but its {status_name} is {raw!r} (not a finished "
                f"run){fix('final', status_name)}")
    if fin == 1 and reached == 0:
        return f"marked final = true at {frac_text}{fix('final', length)}"
    if fin == 0 and reached == 1:
        what = "with fraction = 1" if length == "fraction" else f"at {frac_text}"
        return (f"marked final = false {what}; a run at 100% of its planned length "
                f"is finished{fix('final', length)}")
    if fin == 0 and status == 1:
        return f"marked final = false, but its {status_name} is {raw!r}{fix('final', status_name)}"
    if status == 1 and reached == 0:
        return (f"{status_name} {raw!r} but {frac_text}; a finished run reaches its planned "
                f"length{fix(status_name, length)}")
    return (f"{status_name} {raw!r} (not a finished run) but {frac_text}, its planned "
            f"length{fix(status_name, length)}")


def not_annealed(t: pd.DataFrame, codes: np.ndarray, names, states: RunStates,
                 schedule: str | None) -> dict[int, str]:
    """``{run index: reason}`` for runs whose end row is at their peak LR on a decaying
    schedule (see the module docstring). Needs ``lr`` and ``peak_lr``; runs without them at
    their end row are not judged."""
    if not {"lr", "peak_lr"} <= set(t.columns):
        return {}
    kind = schedule.split(":", 1)[0].strip().lower() if schedule else None
    if kind == "constant":
        return {}
    lr = t["lr"].to_numpy(float)
    peak = t["peak_lr"].to_numpy(float)
    end = states.end
    with np.errstate(invalid="ignore"):
        at_peak_end = lr[end] >= PEAK_LR_SHARE * peak[end]
    candidates = np.flatnonzero(at_peak_end & (states.state != 0))
    if not len(candidates):
        return {}
    rows = t["row"].to_numpy() if "row" in t.columns else np.arange(len(t))
    evidence = None
    if kind is not None:
        evidence = f"the ladder's schedule is {schedule!r}"
    if evidence is None:
        with np.errstate(invalid="ignore"):
            below_end = (lr[end] < PEAK_LR_SHARE * peak[end]) & (states.state != 0)
        if below_end.any():
            k = int(np.argmax(below_end))
            evidence = (f"run {str(names[k])!r} ends at lr {lr[end[k]]:.3g} = "
                        f"{lr[end[k]] / peak[end[k]]:.2f} x its peak")
    if evidence is None:
        with np.errstate(invalid="ignore"):
            at = lr >= PEAK_LR_SHARE * peak
            below = lr < PEAK_LR_SHARE * peak
        seen = pd.Series(at).groupby(codes).cummax().to_numpy(bool)
        decayed = below & seen
        if decayed.any():
            i = int(np.argmax(decayed))
            evidence = (f"run {str(names[codes[i]])!r} decays to {lr[i] / peak[i]:.2f} x its "
                        f"peak after reaching it (row {rows[i]})")
    if evidence is None:
        return {}        # every run ends at its peak: a constant schedule, nothing to anneal
    out = {}
    for k in candidates:
        i = end[k]
        out[int(k)] = (f"not annealed: its last checkpoint (row {rows[i]}) is at lr = "
                       f"{lr[i]:.3g}, {lr[i] / peak[i]:.2f} x its peak_lr {peak[i]:.3g}, on a "
                       f"decaying schedule ({evidence}); before its LR decay a run's loss is "
                       f"above its final loss, so this is not a final loss")
    return out
