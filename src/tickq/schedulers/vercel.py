"""Vercel Cron: a ``crons`` entry in ``vercel.json`` (merged into an existing file)."""

from __future__ import annotations

import json
from typing import Any

from ..errors import ConfigurationError
from .options import SchedulerOptions
from .text import Generated, GeneratedFile
from .timing import DAY

SCHEMA = "https://openapi.vercel.sh/vercel.json"


def generate(options: SchedulerOptions, existing: str | None = None) -> Generated:
    """The ``vercel.json`` text; with ``existing``, that file with the tick's entry set."""
    check(options)
    config = merged(options, existing)
    notes = [
        "Vercel calls the path with GET and sends the project's CRON_SECRET environment "
        "variable as the bearer token: build the endpoint with q.asgi_app(allow_get=True) "
        "and set CRON_SECRET in the project's settings. Cron jobs run on production "
        "deployments only, in UTC, and a failed call is not retried.",
    ]
    if options.timing.shortest_gap().total_seconds() < DAY * 60:
        notes.append(
            "the Hobby plan runs cron jobs at most once a day (a deployment with this "
            "schedule fails there): this schedule needs the Pro plan, or use --every 1d"
        )
    if options.url_secret != "TICKQ_TICK_URL":
        notes.append("--url-secret is not used: Vercel calls its own deployment")
    return Generated([GeneratedFile("vercel.json", json.dumps(config, indent=2) + "\n")], notes)


def merged(options: SchedulerOptions, existing: str | None) -> dict[str, Any]:
    entry = {"path": options.tick_path, "schedule": options.timing.cron}
    config: dict[str, Any] = {"$schema": SCHEMA} if existing is None else parse(existing)
    crons = [c for c in config.get("crons", []) if not same_path(c, options.path)]
    config["crons"] = [*crons, entry]
    return config


def parse(existing: str) -> dict[str, Any]:
    try:
        config = json.loads(existing)
    except ValueError as exc:
        raise ConfigurationError(f"the existing vercel.json is not valid JSON: {exc}") from None
    if not isinstance(config, dict) or not isinstance(config.get("crons", []), list):
        raise ConfigurationError(
            "the existing vercel.json must be a JSON object whose crons is a list"
        )
    return config


def same_path(cron: object, path: str) -> bool:
    return isinstance(cron, dict) and str(cron.get("path", "")).split("?")[0] == path


def check(options: SchedulerOptions) -> None:
    if options.local_app is not None:
        raise ConfigurationError(
            "--local does not apply to vercel: Vercel Cron can only call a path of your "
            "deployment; drop --local"
        )
    if options.token_secret != "CRON_SECRET":
        raise ConfigurationError(
            f"--token-secret {options.token_secret}: Vercel sends only the CRON_SECRET "
            "environment variable as the bearer token; keep the default CRON_SECRET"
        )
