"""``tickq plan APP``: how often a scheduler should call the tick, why, and what it costs."""

from __future__ import annotations

import argparse
import json
from typing import TYPE_CHECKING

from .app import add_app_argument, load_app
from .scheduler import DEFAULT_EVERY, TARGETS

if TYPE_CHECKING:
    from ..plan import Plan
    from ..plan.costs import Cost
    from ..plan.hosts import HostCost
    from ..plan.retries import Retries

DEFAULT_AWAKE_SECONDS = 10.0  # the same as tickq.plan's, without importing it for --help


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "plan",
        help="the slowest tick schedule that meets your jobs' and schedules' max_delay",
        description="Read the job types and schedules APP declares, each with how late its "
        "work may start (max_delay=, default 15 minutes), and print the slowest tick "
        "schedule that meets them all and why, what candidate schedules cost on a host "
        "that sleeps, and how the ticks stretch each job's retries. "
        "`tickq scheduler TARGET --plan APP` writes the plan into a scheduler's config.",
    )
    add_app_argument(p)
    p.add_argument(
        "--awake-seconds", type=positive, default=DEFAULT_AWAKE_SECONDS, metavar="SECONDS",
        help="how long one call keeps the app (and its database) awake, including the "
        f"host's idle time before it sleeps again (default {DEFAULT_AWAKE_SECONDS:g})",
    )  # fmt: skip
    p.add_argument(
        "--price-per-hour", type=price, metavar="PRICE",
        help="what an hour awake costs, to show a cost per month (any currency)",
    )  # fmt: skip
    p.add_argument(
        "--current-interval", type=interval, metavar="INTERVAL",
        help="how often your scheduler calls the tick now (e.g. 1m, 15m, 1h): prints, for "
        "each host of the scheduler recipes, the wake-ups per month now and as planned",
    )  # fmt: skip
    p.add_argument(
        "--scheduler", choices=TARGETS, metavar="TARGET",
        help="compare only on this `tickq scheduler` target's host(s); without "
        f"--current-interval, its default ({DEFAULT_EVERY}) is the calls now",
    )  # fmt: skip
    p.add_argument("--json", action="store_true", help="print the plan as JSON")
    p.set_defaults(handler=run_plan)


def interval(text: str) -> int:
    """``--current-interval``: minutes, from ``15m``, ``2h``, ``1d`` (any number of them)."""
    from ..schedulers.timing import EVERY, UNITS

    match = EVERY.fullmatch(text)
    minutes = int(match[1]) * UNITS[match[2].lower()] if match else 0
    if not minutes:
        raise argparse.ArgumentTypeError(
            f"expected an interval such as 1m, 15m, 2h or 1d, got {text!r}"
        )
    return minutes


def positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not value > 0 or value == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text!r}")
    return value


def price(text: str) -> float:
    return 0.0 if text.strip() in ("0", "0.0") else positive(text)


def run_plan(args: argparse.Namespace) -> int:
    from ..plan import make_plan

    plan = make_plan(
        load_app(args.app), awake_seconds=args.awake_seconds, price_per_hour=args.price_per_hour
    )
    hosts = compared(plan, args.current_interval, args.scheduler)
    if args.json:
        extra = {} if hosts is None else {"hosts": [h.to_dict() for h in hosts]}
        print(json.dumps({"app": args.app, **plan.to_dict(), **extra}, indent=2))
    else:
        print(render(plan, args.app, hosts))
    return 0


def compared(plan: Plan, current: int | None, target: str | None) -> list[HostCost] | None:
    """The hosts' rows when the calls made now are known (given, or a target's default)."""
    from ..plan.hosts import HOSTS, host_costs

    if current is None and target is None:
        return None
    if current is None:
        current = interval(DEFAULT_EVERY)
    hosts = tuple(h for h in HOSTS if target is None or h.target == target)
    return host_costs(plan, current, hosts)


def render(plan: Plan, app: str, hosts: list[HostCost] | None = None) -> str:
    """The plan as text for people."""
    parts = [needs_text(plan), recommendation(plan, app), costs_text(plan),
             hosts_text(hosts), retries_text(plan)]  # fmt: skip
    return "\n\n".join(p for p in parts if p)


def hosts_text(hosts: list[HostCost] | None) -> str:
    from .tables import table

    if not hosts:
        return ""
    priced = any(h.now_cost is not None for h in hosts)
    headers = ["host", "now", "wake-ups/month", "planned", "wake-ups/month", "saved/month"]
    if priced:
        headers.append("cost saved/month")
    rows = []
    for h in hosts:
        row = [h.host, h.now, number(h.now_per_month),
               h.planned + ("" if h.meets else " (its fastest: too slow)"),
               number(h.planned_per_month), signed(h.saved_per_month)]  # fmt: skip
        if priced and h.now_cost is not None and h.planned_cost is not None:
            row.append(f"{h.now_cost - h.planned_cost:.2f}")
        rows.append(row)
    return (
        "Now and planned on each host of the scheduler recipes (wake-ups per 30-day month; "
        "each host's shortest interval respected):\n" + indent(table(headers, rows))
    )


def signed(value: float) -> str:
    return ("+" if value > 0 else "") + number(value)


def needs_text(plan: Plan) -> str:
    from ..plan.needs import span
    from .tables import table

    if not plan.needs:
        return "Nothing in the app needs the tick (no job types or schedules besides tickq's)."
    rows = [
        [
            f"{need.kind} {need.name}",
            need.describe(),
            span(need.max_delay) + ("" if need.declared else " (default)"),
            span(plan.worst_wait(need)),
        ]
        for need in plan.needs
    ]
    headers = ["needs the tick", "when", "may start after", "waits at most"]
    return (
        f"What needs the tick (schedules checked on every day of {plan.year} in their own "
        "time zone):\n" + indent(table(headers, rows))
    )


def recommendation(plan: Plan, app: str) -> str:
    from ..plan.costs import label

    grid = f"every {label(plan.grid.interval)}, cron '{plan.grid_timing.cron}' (UTC)"
    why = "\n".join(f"  - {reason}" for reason in plan.why)
    command = f"`tickq scheduler TARGET --plan {app}` writes it for your scheduler."
    if plan.use_lines and plan.lines is not None:
        several = len(plan.lines.lines) > 1
        if several:
            command = (
                "`tickq scheduler --plan` takes one expression, so it writes the grid below; "
                "add these lines by hand where your scheduler takes several."
            )
        return (
            "Recommended: call only when a schedule is due, with "
            f"{'these cron lines' if several else 'this cron line'} (UTC):\n"
            f"{lines_text(plan)}\n"
            f"  The slowest grid makes {plan.lines.days * 1440 // plan.grid.interval} calls "
            f"in {plan.year}; but retries and tickq's alerts wait for the next call (see "
            "Retries).\n"
            f"  {command}\n\n"
            f"Slowest grid instead: {grid}. Not slower, because:\n{why}"
        )
    text = f"Recommended: tick {grid}.\nNot slower, because:\n{why}\n{command}"
    if plan.lines is not None:
        text += (
            "\n\nCron lines (UTC) that call only when a schedule is due (no fewer calls "
            f"than the grid):\n{lines_text(plan)}"
        )
    elif plan.no_lines:
        text += f"\n\nNo cron lines that call only when a schedule is due: {plan.no_lines}."
    return text


def lines_text(plan: Plan) -> str:
    assert plan.lines is not None
    lines = plan.lines
    out = [f"    {line}" for line in lines.lines]
    out += [f"  {note[0].upper()}{note[1:]}." for note in lines.notes]
    idle = "" if lines.exact else f", {len(lines.calls) - lines.slots} of them finding nothing due"
    out.append(f"  {len(lines.calls)} calls in {plan.year} for {lines.slots} slots{idle}.")
    return "\n".join(out)


def costs_text(plan: Plan) -> str:
    from .tables import table

    price = (
        f"at {plan.price_per_hour:g} per hour awake"
        if plan.price_per_hour is not None
        else "give --price-per-hour for a cost"
    )
    head = (
        f"What the calls cost (30-day month; each call keeps the app awake "
        f"{plan.awake_seconds:g} s, --awake-seconds; {price}):"
    )
    headers = ["calls", "meets needs", "wake-ups/day", "wake-ups/month", "awake/month",
               "cost/month"]  # fmt: skip
    return head + "\n" + indent(table(headers, [cost_row(c) for c in plan.costs]))


def cost_row(cost: Cost) -> list[str]:
    return [
        cost.label + ("  <- recommended" if cost.recommended else ""),
        "yes" if cost.meets else "no",
        number(cost.per_day),
        number(cost.per_month),
        f"{cost.awake_hours:.1f} h",
        "—" if cost.cost is None else f"{cost.cost:.2f}",
    ]


def retries_text(plan: Plan) -> str:
    from .tables import table

    if not plan.retries:
        return ""
    rows = [retry_row(r) for r in plan.retries]
    headers = ["job", "attempts", "each retry: backoff -> with the calls, at most",
               "last attempt at most"]  # fmt: skip
    return "Retries (a retry runs at the first call after its backoff delay):\n" + indent(
        table(headers, rows)
    )


def retry_row(retries: Retries) -> list[str]:
    from datetime import timedelta

    from ..plan.needs import span

    def s(seconds: float) -> str:
        return span(timedelta(seconds=round(seconds)))

    approx = "~" if retries.jitter else ""
    steps = ", ".join(
        f"{approx}{s(n)} -> {s(e)}" for n, e in zip(retries.nominal, retries.effective, strict=True)
    )
    last = (
        f"{s(sum(retries.effective))} after the first (backoff alone: "
        f"{approx}{s(sum(retries.nominal))})"
        if retries.nominal
        else "-"
    )
    return [retries.job, str(retries.max_attempts), steps or "no retries", last]


def number(value: float) -> str:
    return f"{value:.0f}" if value == round(value) else f"{value:.1f}"


def indent(text: str) -> str:
    return "\n".join(f"  {line}" for line in text.splitlines())
