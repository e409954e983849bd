"""``manage.py tickq_worker``: run Django tasks with tickq on an always-on host."""

from __future__ import annotations

from typing import Any

from django.core.management.base import BaseCommand, CommandParser

from tickq.logger import Fallback


class Command(BaseCommand):
    help = (
        "Run due Django tasks until SIGTERM/SIGINT (running tasks finish first); "
        "--burst: run until nothing is due, then exit 0."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--queues", nargs="+", metavar="QUEUE",
                            help="queues to run (default: all); also comma-separated")  # fmt: skip
        parser.add_argument("--concurrency", type=int, default=10, metavar="N",
                            help="tasks at a time (default: 10)")  # fmt: skip
        parser.add_argument("--burst", action="store_true",
                            help="run every due task, then exit 0")  # fmt: skip
        parser.add_argument("--backend", default="default", metavar="ALIAS",
                            help="the TASKS alias (default: default)")  # fmt: skip

    def handle(self, *args: Any, **options: Any) -> None:
        from django.core.management.base import CommandError

        from tickq.contrib.django.management import queue_of

        if options["concurrency"] < 1:
            raise CommandError(f"--concurrency must be >= 1, got {options['concurrency']}")
        q = queue_of(options["backend"])
        queues = _queues(options["queues"])
        if not options["burst"]:
            q.run_worker(queues=queues, concurrency=options["concurrency"],
                         log_format=Fallback.log_format or "text")  # fmt: skip
            return
        q.enqueue_schedules()
        totals: dict[str, int] = {}
        while (report := q.process_jobs(limit=options["concurrency"], queues=queues))["claimed"]:
            for key in ("claimed", "succeeded", "retried", "failed"):
                totals[key] = totals.get(key, 0) + report[key]
        self.stdout.write(" ".join(f"{k}={v}" for k, v in totals.items()) or "nothing was due")


def _queues(given: list[str] | None) -> list[str] | None:
    if not given:
        return None
    return [name for item in given for name in item.split(",") if name]
