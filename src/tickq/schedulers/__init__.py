"""Ready configurations for the schedulers that call tickq's tick (``tickq scheduler``).

Each target is a pure function of :class:`SchedulerOptions`::

    from tickq.schedulers import SchedulerOptions, Timing, render

    print(render("github-actions", SchedulerOptions(timing=Timing.every(15))))

Secrets are referenced by name through each platform's secret store, never written out.
"""

from __future__ import annotations

from collections.abc import Callable

from ..errors import ConfigurationError
from . import (
    cloud_scheduler,
    cloudflare,
    crontab,
    github,
    kubernetes,
    railway,
    render_com,
    supabase,
    systemd,
    vercel,
)
from .options import SchedulerOptions
from .text import Generated, GeneratedFile
from .timing import Timing

TARGETS: dict[str, Callable[[SchedulerOptions], Generated]] = {
    "github-actions": github.generate,
    "vercel": vercel.generate,
    "cloud-scheduler": cloud_scheduler.generate,
    "kubernetes": kubernetes.generate,
    "systemd": systemd.generate,
    "crontab": crontab.generate,
    "render": render_com.generate,
    "railway": railway.generate,
    "cloudflare": cloudflare.generate,
    "supabase": supabase.generate,
}

__all__ = [
    "TARGETS",
    "Generated",
    "GeneratedFile",
    "SchedulerOptions",
    "Timing",
    "generate",
    "render",
]


def generate(target: str, options: SchedulerOptions) -> Generated:
    """The files (with suggested names) and notes for ``target``."""
    try:
        make = TARGETS[target]
    except KeyError:
        raise ConfigurationError(
            f"unknown scheduler {target!r}; choose one of {', '.join(TARGETS)}"
        ) from None
    return make(options)


def render(target: str, options: SchedulerOptions) -> str:
    """The configuration text for ``target`` (several files are separated by headers)."""
    return generate(target, options).text
