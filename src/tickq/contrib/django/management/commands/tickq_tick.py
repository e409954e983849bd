"""``manage.py tickq_tick``: one tick (due schedule slots, then a batch of jobs) as JSON."""

from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandParser


class Command(BaseCommand):
    help = "Enqueue due schedule slots and run up to --limit due tasks once; print the report."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--limit", type=int, default=100, metavar="N",
                            help="tasks to run at most (default: 100)")  # fmt: skip
        parser.add_argument("--time-budget", type=float, default=20.0, metavar="SECONDS",
                            help="start no task after this many seconds (default: 20)")  # fmt: skip
        parser.add_argument("--backend", default="default", metavar="ALIAS",
                            help="the TASKS alias (default: default)")  # fmt: skip

    def handle(self, *args: Any, **options: Any) -> None:
        from tickq.contrib.django.management import queue_of

        q = queue_of(options["backend"])
        report = q.tick(limit=options["limit"], time_budget=options["time_budget"])
        self.stdout.write(json.dumps(report, default=str))
