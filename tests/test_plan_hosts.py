"""``tickq plan --current-interval``: wake-ups per month now and as planned, on each host of
the scheduler recipes, each host's shortest (or only) intervals respected. Pure planning
on small apps, and the command line in a subprocess."""

from __future__ import annotations

import json
from typing import Any

from apps import plans
from conftest import run_tickq
from tickq.plan import make_plan
from tickq.plan.hosts import HOSTS, Host, host_costs
from tickq.schedulers import TARGETS

MONTH = 30 * 1440  # minutes in the plan's 30-day month
YEAR = 2025


def by_host(rows: list[Any]) -> dict[str, Any]:
    return {row.host: row for row in rows}


def test_every_scheduler_target_has_a_host() -> None:
    assert {h.target for h in HOSTS if h.target} == set(TARGETS)


def test_from_every_minute_to_the_plan_saves_the_difference_on_each_host() -> None:
    plan = make_plan(plans.five, year=YEAR)  # needs a call every 5 minutes
    rows = by_host(host_costs(plan, current=1))
    crontab = rows["crontab"]
    assert (crontab.now, crontab.now_per_month) == ("every 1 min", MONTH)
    assert (crontab.planned, crontab.planned_per_month) == ("every 5 min", MONTH / 5)
    assert crontab.saved_per_month == MONTH - MONTH / 5 and crontab.meets
    # GitHub can't call every minute: the calls now are its fastest, as planned.
    github = rows["GitHub Actions"]
    assert github.now == "every 5 min (not every 1 min: the host can't)"
    assert github.saved_per_month == 0 and github.meets
    # Heroku Scheduler offers 10 minutes, an hour, a day: none is often enough.
    heroku = rows["Heroku Scheduler"]
    assert heroku.planned == "every 10 min" and not heroku.meets
    assert heroku.now_per_month == heroku.planned_per_month == MONTH / 10


def test_a_slower_plan_on_fixed_intervals_takes_the_slowest_that_meets() -> None:
    plan = make_plan(plans.mixed, year=YEAR)  # every 30 minutes is enough
    rows = by_host(host_costs(plan, current=15))
    heroku = rows["Heroku Scheduler"]
    # 15 minutes isn't Heroku's: the nearest that calls less often is hourly, and the plan
    # needs more than hourly.
    assert heroku.now == "every 1 hour (not every 15 min: the host can't)"
    assert heroku.planned == "every 10 min" and heroku.meets
    railway = rows["Railway cron service"]
    assert (railway.now_per_month, railway.planned_per_month) == (MONTH / 15, MONTH / 30)
    assert railway.saved_per_month == MONTH / 30


def test_a_current_interval_slower_than_the_plan_costs_more_calls() -> None:
    plan = make_plan(plans.five, year=YEAR)
    [row] = host_costs(plan, current=60, hosts=(Host("somewhere", None, 1),))
    assert row.now_per_month == MONTH / 60 and row.planned_per_month == MONTH / 5
    assert row.saved_per_month == MONTH / 60 - MONTH / 5 < 0  # the plan needs more calls


def test_cron_lines_where_the_host_takes_cron_and_the_grid_where_it_doesnt() -> None:
    plan = make_plan(plans.berlin, year=YEAR)  # cron lines: 2 calls a day
    assert plan.use_lines
    rows = by_host(host_costs(plan, current=15))
    assert rows["Supabase pg_cron"].planned == "cron lines"
    assert rows["Supabase pg_cron"].planned_per_month == 60
    fly = rows["Fly.io scheduled Machines"]  # hourly or daily, never at a fixed minute
    assert fly.planned in ("every 1 hour", "every 1 day")
    assert fly.planned_per_month >= 30


def test_prices_give_the_cost_difference() -> None:
    plan = make_plan(plans.five, awake_seconds=60, price_per_hour=0.5, year=YEAR)
    [row] = host_costs(plan, current=1, hosts=(Host("x", None, 1),))
    # every minute: 720 h awake a month; every 5: 144 h; at 0.5 an hour, 288 saved
    assert row.to_dict()["saved_cost_per_month"] == 288.0


def test_cli_prints_now_and_planned_per_host() -> None:
    result = run_tickq("plan", "apps.plans:five", "--current-interval", "1m")
    assert result.returncode == 0, result.stderr
    out = result.stdout
    assert "Now and planned on each host of the scheduler recipes" in out
    line = next(ln for ln in out.splitlines() if ln.strip().startswith("crontab"))
    assert line.split()[1:] == ["every", "1", "min", "43200", "every", "5", "min", "8640",
                                "+34560"]  # fmt: skip
    assert "Heroku Scheduler" in out and "(its fastest: too slow)" in out
    assert "Now and planned" not in run_tickq("plan", "apps.plans:five").stdout  # as before


def test_cli_scheduler_target_default_is_the_calls_now() -> None:
    result = run_tickq("plan", "apps.plans:five", "--scheduler", "railway", "--json")
    assert result.returncode == 0, result.stderr
    [row] = json.loads(result.stdout)["hosts"]
    assert row == {"host": "Railway cron service", "scheduler_target": "railway",
                   "now": "every 15 min", "now_wakeups_per_month": 2880.0,
                   "planned": "every 5 min", "planned_wakeups_per_month": 8640.0,
                   "saved_wakeups_per_month": -5760.0, "meets_needs": True,
                   "saved_cost_per_month": None}  # fmt: skip


def test_cli_refuses_a_bad_interval_in_one_line() -> None:
    for bad in ("0m", "90s", "soon"):
        result = run_tickq("plan", "apps.plans:five", "--current-interval", bad)
        assert result.returncode == 2 and result.stdout == ""
        assert f"expected an interval such as 1m, 15m, 2h or 1d, got {bad!r}" in result.stderr
