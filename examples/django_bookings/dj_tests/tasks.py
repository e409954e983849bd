"""Tasks the tests need besides the example's own."""

import asyncio
import dataclasses
import sys
import time
from datetime import date, datetime, timedelta
from decimal import Decimal

from tickq import Snooze

try:
    from django.tasks import task
except ImportError:
    from django_tasks import task


class PaymentDeclined(Exception):
    pass


@task(max_attempts=2, backoff=(0,))
def always_fails(amount: int) -> None:
    raise PaymentDeclined(f"card declined for {amount}")


@task(takes_context=True)
def knows_its_context(context, label: str) -> dict:
    return {"id": context.task_result.id, "attempt": context.attempt, "label": label}


@task()
async def adds_later(a: int, b: int) -> int:
    await asyncio.sleep(0)
    return a + b


@task(priority=-100)
def low(n: int) -> int:
    return n


@task(priority=100)
def high(n: int) -> int:
    return n


@task()
def returns_a_tuple() -> tuple:
    return (1, "two")


@task(max_attempts=1, timeout=0.1)
def too_slow() -> None:
    time.sleep(0.5)


@task(max_attempts=1, max_snooze=timedelta(hours=1), takes_context=True)
def waits_twice(context) -> int:
    """Snoozes twice (Snooze(0): due again at once), then returns its attempt number."""
    from tickq import current_job

    if current_job().snoozes < 2:
        raise Snooze(0)
    return context.attempt


@task(max_attempts=1)
def exits(code: int) -> None:
    """A library deep inside calls sys.exit(): the attempt fails, the process carries on."""
    sys.exit(code)


@task(max_attempts=1)
def interrupts() -> None:
    raise KeyboardInterrupt


@task(max_attempts=1, timeout=0.1)
async def too_slow_async() -> None:
    await asyncio.sleep(5)  # cancelled by its timeout: it fails with JobTimeout


class Held:
    """Something a failing task holds in a local variable (weak-referenceable)."""


HELD = []


@task(max_attempts=2, backoff=(0,))
def holds_then_fails() -> None:
    import weakref

    big = Held()
    HELD.append(weakref.ref(big))
    raise PaymentDeclined("declined while holding a big local")


@dataclasses.dataclass
class Stay:
    nights: int
    arrival: date


@task(takes_context=True)
def books_a_stay(context, stay: Stay, price: Decimal, at: datetime) -> dict:
    """Typed arguments: rebuilt from their JSON forms before the task runs."""
    return {"stay": repr(stay), "price": repr(price), "at": repr(at), "id": context.task_result.id}
