"""The store's side of retention (see ``tickq.retention``): the shared row that gives one
process the pruning pass per interval, and one bounded batch of pruning."""

from __future__ import annotations

from .plumbing import Plumbing

TYPE_CHECKING = False
if TYPE_CHECKING:
    from datetime import datetime, timedelta
    from typing import Any

    from ..retention import Retention


class RetentionQueries(Plumbing):
    """Claim the pass, prune a batch, end the pass, read its state."""

    _retention_owner: str = ""

    def claim_retention(self, owner: str, hold: float) -> datetime | None:
        """The pruning pass, when it is due: now (what the cutoffs count from), or None
        when another process holds it or it is not due yet."""
        params = {"owner": owner, "now": self._now(), "hold": hold,
                  "hold_until": self._in(hold)}  # fmt: skip
        rows = self._query("claim_retention", **params)
        if not rows:
            return None
        self._retention_owner = owner
        return self._decode_ts(rows[0][0])

    def end_retention_pass(self, pruned: int, behind: bool, interval: float) -> None:
        """Record the pass: due again at once while ``behind``, else after ``interval``."""
        self._query("end_retention_pass", owner=self._retention_owner, now=self._now(),
                    next=self._in(interval), interval=interval, behind=behind,
                    pruned=pruned)  # fmt: skip

    def retention_state(self) -> dict[str, Any]:
        """When the next pass is due, when one last ended, what it pruned, whether behind."""
        rows = self._query("retention_state")
        if not rows:
            return {"next_due_at": None, "last_pruned_at": None, "pruned_last_pass": 0,
                    "behind": False}  # fmt: skip
        due, _owner, last, pruned, behind = rows[0]
        last_at = self._decode_ts(last)
        return {"next_due_at": self._iso(self._decode_ts(due)),
                "last_pruned_at": self._iso(last_at),
                "pruned_last_pass": int(pruned), "behind": bool(behind)}  # fmt: skip

    @staticmethod
    def _iso(value: datetime | None) -> str | None:
        return None if value is None else value.isoformat()

    def prune_retained(self, retention: Retention, now: datetime, batch: int) -> tuple[int, bool]:
        """Delete up to ``batch`` finished jobs past their retention per rule (the queues
        with rules of their own, then all others), and a batch of ended workflow runs.
        Returns the jobs deleted and whether any rule left more behind."""
        pruned, behind = 0, False
        others = list(retention.queues)
        rules: list[tuple[Retention, str | None, list[str] | None]] = [
            (rule, name, None) for name, rule in retention.queues.items()
        ]
        rules.append((retention, None, others or None))
        for rule, queue, excluded in rules:
            cutoffs = self._cutoffs(rule, now)
            if cutoffs is None:
                continue
            params = {**cutoffs, "queue": queue, "others": self._queues_param(excluded),
                      "batch": batch}  # fmt: skip
            deleted = self._prune_retained_batch(params)
            pruned, behind = pruned + deleted, behind or deleted >= batch
        cutoffs = self._cutoffs(retention, now)
        if cutoffs is not None:
            runs = {k: v for k, v in cutoffs.items() if k != "oldest"}
            self._query_many([("wf_prune_retained_steps", {**runs, "batch": batch}),
                              ("wf_prune_retained_runs", {**runs, "batch": batch}),
                              ("wf_forget_events", {"now": self._now()})])  # fmt: skip
        if pruned:
            self._give_space_back(pruned)
        return pruned, behind

    def _cutoffs(self, rule: Retention, now: datetime) -> dict[str, Any] | None:
        ages: dict[str, timedelta | None] = rule.ages()
        cut = {k: None if v is None else now - v for k, v in ages.items()}
        known = [c for c in cut.values() if c is not None]
        if not known:
            return None
        return {**{k: self._ts(v) for k, v in cut.items()}, "oldest": self._ts(max(known))}

    def _prune_retained_batch(self, params: dict[str, Any]) -> int:
        return len(self._query("prune_retained", **params))

    def _give_space_back(self, pruned: int) -> None:
        """After a batch: give the freed pages back to the file system (SQLite); Postgres's
        autovacuum reuses them."""
