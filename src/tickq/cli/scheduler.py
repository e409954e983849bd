"""``tickq scheduler TARGET``: write the configuration that makes a scheduler call the tick."""

from __future__ import annotations

import argparse
import os
import sys
from datetime import timedelta
from typing import TYPE_CHECKING

from ..errors import ConfigurationError

if TYPE_CHECKING:
    from pathlib import Path

    from ..schedulers import Generated, SchedulerOptions, Timing

# The same names as tickq.schedulers.TARGETS, listed here so that building the parser (on
# every `tickq tick` too) doesn't import the generators.
TARGETS = (
    "github-actions",
    "vercel",
    "cloud-scheduler",
    "kubernetes",
    "systemd",
    "crontab",
    "render",
    "railway",
    "cloudflare",
    "supabase",
)
DEFAULT_EVERY = "15m"
SECRET_VARIABLES = ("CRON_SECRET", "CRON_SECRET_PREVIOUS", "TICKQ_TICK_URL")


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = subparsers.add_parser(
        "scheduler",
        help="write a scheduler's configuration that calls the tick",
        description="Write a ready configuration that calls your app's tick endpoint on a "
        "schedule, with the URL and token taken from the platform's secret store.",
    )
    p.add_argument("target", choices=TARGETS, metavar="TARGET", help=", ".join(TARGETS))
    when = p.add_mutually_exclusive_group()
    when.add_argument(
        "--every", metavar="INTERVAL",
        help=f"how often, e.g. 15m, 1h, 1d (default {DEFAULT_EVERY}); pick the slowest that "
        "meets your needs: on a sleeping host every call wakes and bills the app",
    )  # fmt: skip
    when.add_argument("--cron", metavar="EXPR", help="a 5-field cron expression, in UTC")
    when.add_argument(
        "--plan", metavar="APP",
        help="call as `tickq plan APP` recommends: the slowest schedule that meets its job "
        "types' and schedules' max_delay",
    )  # fmt: skip
    p.add_argument(
        "--url-secret", default="TICKQ_TICK_URL", metavar="NAME",
        help="name of the secret holding the app's base URL (default TICKQ_TICK_URL)",
    )  # fmt: skip
    p.add_argument(
        "--token-secret", default="CRON_SECRET", metavar="NAME",
        help="name of the secret holding the bearer token (default CRON_SECRET)",
    )  # fmt: skip
    p.add_argument("--path", default="/api/cron/tick", help="the tick endpoint's path")
    p.add_argument("--name", default="tickq-tick", help="name of the job, workflow or unit")
    p.add_argument("--out", metavar="PATH", help="write here instead of stdout (systemd: a folder)")
    p.add_argument("--force", action="store_true", help="overwrite files that exist")
    local = p.add_argument_group(
        "running the tick on the app's own machine (crontab, systemd, render, railway)"
    )
    local.add_argument("--local", metavar="APP", help="run `tickq tick APP` instead of curl")
    local.add_argument("--tickq", metavar="COMMAND", help="how to run tickq there")
    local.add_argument("--workdir", metavar="DIR", help="folder to run in (default: this one)")
    local.add_argument(
        "--env-file", default="/etc/tickq/tick.env", metavar="PATH",
        help="KEY=value file with the secrets or the app's settings (crontab, systemd)",
    )  # fmt: skip
    local.add_argument("--user", metavar="NAME", help="systemd: user to run as (default: you)")
    p.set_defaults(handler=run_scheduler)


def run_scheduler(args: argparse.Namespace) -> int:
    from pathlib import Path

    from ..schedulers import SchedulerOptions

    options = SchedulerOptions(
        timing=timing(args),
        url_secret=args.url_secret,
        token_secret=args.token_secret,
        path=args.path,
        name=args.name,
        local_app=args.local,
        tickq=args.tickq,
        workdir=args.workdir,
        env_file=args.env_file,
        user=args.user,
    )
    refuse_secret_values(args)
    result = generated(args.target, options, args.out)
    if args.out:
        for path in write(result, Path(args.out), args.force, merge=args.target == "vercel"):
            print(f"wrote {path}", file=sys.stderr)
    else:
        sys.stdout.write(result.text)
    for note in result.notes:
        print(f"note: {note}", file=sys.stderr)
    return 0


def timing(args: argparse.Namespace) -> Timing:
    """When to call: ``--cron``, ``--every`` or what ``tickq plan`` recommends (``--plan``)."""
    from ..schedulers import Timing

    if args.cron:
        return Timing.from_cron(args.cron)
    if args.plan:
        return planned(args.plan, args.target)
    return Timing.parse_every(args.every or DEFAULT_EVERY)


def planned(app: str, target: str) -> Timing:
    """The plan's calls, if ``target`` can make them; else a one-line refusal saying why."""
    from ..plan import make_plan, why_not
    from ..schedulers.github import MIN_GAP
    from .app import load_app

    plan = make_plan(load_app(app))
    chosen = plan.timing
    if target == "github-actions" and chosen.shortest_gap() < MIN_GAP:
        chosen = plan.grid_timing
        if chosen.shortest_gap() < MIN_GAP:
            shortest = MIN_GAP // timedelta(minutes=1)
            raise ConfigurationError(
                f"github-actions calls at most every {shortest} minutes, but {app} needs a "
                f"tick every {plan.grid.interval} minute(s): "
                f"{'; '.join(why_not(list(plan.needs), shortest))}. Raise that max_delay to "
                f"{shortest} minutes or more, or use a scheduler that calls every minute "
                "(cloud-scheduler, kubernetes, systemd, crontab, render, cloudflare, supabase)"
            )
    note = f"note: planned from {app}: {chosen.describe()} (`tickq plan {app}` says why)"
    if plan.use_lines and plan.lines and chosen == plan.grid_timing:
        note += (
            f"; calling only when a schedule is due takes {len(plan.lines.lines)} cron lines "
            f"({', '.join(plan.lines.lines)}), which {target} can't take in one entry"
            if len(plan.lines.lines) > 1
            else f"; its cron line ({plan.lines.lines[0]}) has runs closer than {target} allows"
        )
    print(note, file=sys.stderr)
    return chosen


def refuse_secret_values(args: argparse.Namespace) -> None:
    """Catch ``--token-secret "$CRON_SECRET"``: the shell handed us the value, not the name."""
    for option in ("url_secret", "token_secret"):
        value = getattr(args, option)
        for variable in {*SECRET_VARIABLES, args.url_secret, args.token_secret}:
            if os.environ.get(variable) == value and variable != value:
                raise ConfigurationError(
                    f"--{option.replace('_', '-')} is the value of ${variable}, not a name: "
                    f"pass the name itself, e.g. --{option.replace('_', '-')} {variable}"
                )


def generated(target: str, options: SchedulerOptions, out: str | None) -> Generated:
    from pathlib import Path

    from ..schedulers import generate, vercel

    if target == "vercel" and out and (existing := vercel_file(Path(out))).is_file():
        return vercel.generate(options, existing.read_text(encoding="utf-8"))
    return generate(target, options)


def vercel_file(out: Path) -> Path:
    return out / "vercel.json" if out.is_dir() else out


def write(result: Generated, out: Path, force: bool, merge: bool) -> list[Path]:
    """Write each file; a folder (or several files) puts them in it by their usual names."""
    folder = out.is_dir() or len(result.files) > 1
    targets = [(out / f.name.rsplit("/", 1)[-1] if folder else out, f.text) for f in result.files]
    for path, _ in targets:
        if path.exists() and not (force or merge):
            raise ConfigurationError(f"{path} exists: pass --force to overwrite it")
    for path, text in targets:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        if text.startswith("#!"):
            path.chmod(0o755)
    return [path for path, _ in targets]
