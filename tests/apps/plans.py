"""Small apps with known plans, for ``tickq plan apps.plans:NAME`` (nothing touches a database)."""

from __future__ import annotations

from datetime import timedelta

from tickq import Queue

URL = "sqlite:///never-opened.db"  # planning reads declarations only

# A job that may wait an hour and a half-hourly schedule: the schedule binds at 30 minutes.
mixed = Queue(URL)


@mixed.job(max_delay=timedelta(hours=1))
def send_email(to: str) -> None: ...


@mixed.schedule("*/30 * * * *")
def cleanup() -> None: ...


# A job that must start within 5 minutes.
five = Queue(URL)


@five.job(max_delay=timedelta(minutes=5))
def resize_image(path: str) -> None: ...


# A job that must start within a minute: faster than GitHub Actions can call.
minute = Queue(URL)


@minute.job(max_delay=timedelta(minutes=1))
def charge(order_id: int) -> None: ...


# Only a daily schedule at 09:00 Berlin time (08:00 UTC in winter, 07:00 UTC in summer), and
# tickq's own alert jobs, which need no tick of their own.
berlin = Queue(URL, alerts=[print])


@berlin.schedule("0 9 * * *", tz="Europe/Berlin")
def send_digest() -> None: ...


# Only UTC schedules: exact cron lines.
utc = Queue(URL)


@utc.schedule("0 6 * * 1-5")
def morning_report() -> None: ...


@utc.schedule("30 18 * * *")
def evening_sync() -> None: ...
