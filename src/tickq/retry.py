"""Backoff policies: pure functions from the attempt that failed to the delay before the next.

A policy is any callable ``(attempt: int) -> float | None`` giving seconds to wait after
attempt ``attempt`` (1-based) failed; ``None`` means "do not retry".
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Sequence

    Backoff = Callable[[int], float | None]

__all__ = ["exponential", "steps"]
DEFAULT_STEPS: tuple[float, ...] = (60, 300, 1800)
"""The guide's schedule: retry after 1, then 5, then 30 minutes."""


def steps(delays: Sequence[float]) -> Backoff:
    """Wait ``delays[n-1]`` after attempt n; past the end keep the last delay."""
    if not delays:
        raise ValueError("backoff needs at least one delay, got an empty sequence")
    if any(d < 0 for d in delays):
        raise ValueError(f"backoff delays must be >= 0 seconds, got {tuple(delays)}")
    fixed = tuple(float(d) for d in delays)

    def policy(attempt: int) -> float:
        return fixed[min(attempt, len(fixed)) - 1]

    return policy


def exponential(
    base: float = 15.0, factor: float = 2.0, maximum: float = 3600.0, jitter: float = 0.1
) -> Backoff:
    """``base * factor**(attempt-1)`` seconds, capped at ``maximum``, +/- ``jitter`` share."""
    if base <= 0 or factor < 1 or maximum <= 0:
        raise ValueError(
            f"exponential backoff needs base > 0, factor >= 1, maximum > 0; "
            f"got base={base}, factor={factor}, maximum={maximum}"
        )
    if not 0 <= jitter < 1:
        raise ValueError(f"jitter must be in [0, 1), got {jitter}")

    import random

    def policy(attempt: int) -> float:
        delay = min(maximum, base * factor ** (attempt - 1))
        return delay * (1 + random.uniform(-jitter, jitter))

    return policy


def as_backoff(spec: Sequence[float] | Backoff | None) -> Backoff:
    """Accept a sequence of seconds, a policy callable, or None for the default."""
    if spec is None:
        return steps(DEFAULT_STEPS)
    if callable(spec):
        return spec
    return steps(spec)
