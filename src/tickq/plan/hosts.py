"""What the plan saves on each host of the scheduler recipes, against the calls made now (pure).

Each host in ``tickq scheduler`` and docs/schedulers.md calls at most so often (GitHub
Actions and Railway every 5 minutes) or only at a few fixed intervals (Heroku Scheduler
every 10 minutes, hour or day). On each, the calls made now and the recommended ones are
both the nearest the host can make, and their difference is counted in wake-ups per month::

    from tickq.plan import make_plan
    from tickq.plan.hosts import host_costs

    for row in host_costs(make_plan(q), current=1):  # the scheduler calls every minute now
        print(row.host, row.now_per_month, row.planned_per_month, row.saved_per_month)
"""

from __future__ import annotations

from dataclasses import dataclass
from itertools import pairwise
from typing import TYPE_CHECKING

from .costs import grid_cost, label
from .cronlines import DAY_MINUTES
from .grid import CANDIDATES, phases_meeting

if TYPE_CHECKING:
    from . import Plan

__all__ = ["HostCost", "host_costs"]


@dataclass(frozen=True)
class Host:
    """A host of the recipes: the intervals (minutes) its scheduler can call at."""

    name: str
    target: str | None
    """Its ``tickq scheduler`` target, or None (set up in its console, docs/schedulers.md)."""
    shortest: int
    """Its shortest interval in minutes."""
    only: tuple[int, ...] = ()
    """Its only intervals, when it offers a few fixed ones instead of cron."""

    def intervals(self) -> tuple[int, ...]:
        """What it can call at, slowest first."""
        return self.only or tuple(i for i in CANDIDATES if i >= self.shortest)

    @property
    def takes_cron(self) -> bool:
        return not self.only


HOSTS = (
    Host("GitHub Actions", "github-actions", 5),
    Host("Vercel Cron (Pro)", "vercel", 1),
    Host("Vercel Cron (Hobby)", "vercel", DAY_MINUTES, (DAY_MINUTES,)),
    Host("Google Cloud Scheduler", "cloud-scheduler", 1),
    Host("Kubernetes CronJob", "kubernetes", 1),
    Host("systemd timer", "systemd", 1),
    Host("crontab", "crontab", 1),
    Host("Render cron job", "render", 1),
    Host("Railway cron service", "railway", 5),
    Host("Cloudflare Cron Triggers", "cloudflare", 1),
    Host("Supabase pg_cron", "supabase", 1),
    Host("Fly.io scheduled Machines", None, 60, (DAY_MINUTES, 60)),
    Host("Heroku Scheduler", None, 10, (DAY_MINUTES, 60, 10)),
    Host("cron-job.org / EasyCron", None, 1),
    Host("Upstash QStash", None, 1),
)
"""The hosts of the recipes (docs/schedulers.md), with their schedulers' limits."""


@dataclass(frozen=True)
class HostCost:
    """One host: the calls now and as planned there, per 30-day month."""

    host: str
    target: str | None
    now: str
    """The calls made now on this host: the given interval, or where the host can't call
    so, its nearest that calls less often (its fastest when all call more often)."""
    now_per_month: float
    planned: str
    planned_per_month: float
    meets: bool
    """False when the host can't call often enough for the plan (its fastest is shown)."""
    now_cost: float | None
    planned_cost: float | None

    @property
    def saved_per_month(self) -> float:
        """Wake-ups per month the plan saves here (negative: it needs more calls)."""
        return self.now_per_month - self.planned_per_month

    def to_dict(self) -> dict[str, object]:
        saved_cost = None
        if self.now_cost is not None and self.planned_cost is not None:
            saved_cost = round(self.now_cost - self.planned_cost, 6)
        return {
            "host": self.host,
            "scheduler_target": self.target,
            "now": self.now,
            "now_wakeups_per_month": self.now_per_month,
            "planned": self.planned,
            "planned_wakeups_per_month": self.planned_per_month,
            "saved_wakeups_per_month": self.saved_per_month,
            "meets_needs": self.meets,
            "saved_cost_per_month": saved_cost,
        }


def host_costs(plan: Plan, current: int, hosts: tuple[Host, ...] = HOSTS) -> list[HostCost]:
    """For each of ``hosts``: the calls every ``current`` minutes (or as near as it can)
    against the plan's calls there (the slowest it can make that meet the needs)."""
    return [host_cost(plan, current, host) for host in hosts]


def host_cost(plan: Plan, current: int, host: Host) -> HostCost:
    now = nearest(host, current)
    now_row = grid_cost(now, plan.awake_seconds, plan.price_per_hour, meets=True,
                        recommended=False)  # fmt: skip
    lines = plan.lines
    if plan.use_lines and lines is not None and host.takes_cron and lines_fit(plan, host):
        from .costs import lines_cost

        row = lines_cost(lines, plan.awake_seconds, plan.price_per_hour, recommended=True)
        meets = True
    else:
        needs = list(plan.needs)
        meeting = [i for i in host.intervals() if phases_meeting(needs, i)]
        interval = meeting[0] if meeting else host.intervals()[-1]
        meets = bool(meeting)
        row = grid_cost(interval, plan.awake_seconds, plan.price_per_hour, meets=meets,
                        recommended=True)  # fmt: skip
    now_text = now_row.label
    if now != current:
        now_text += f" (not every {label(current)}: the host can't)"
    return HostCost(host.name, host.target, now_text, now_row.per_month, row.label,
                    row.per_month, meets, now_row.cost, row.cost)  # fmt: skip


def nearest(host: Host, minutes: int) -> int:
    """``minutes`` where the host can call so, else its nearest that calls less often."""
    if host.takes_cron and minutes >= host.shortest:
        return minutes
    slower = [i for i in host.intervals() if i >= minutes]
    return min(slower) if slower else max(host.intervals())


def lines_fit(plan: Plan, host: Host) -> bool:
    """The plan's cron lines never call closer together than the host allows."""
    assert plan.lines is not None
    calls = plan.lines.calls
    return all(b - a >= host.shortest for a, b in pairwise(calls))
