"""A web dashboard over a Queue: jobs, failures, schedules and tick health in the browser.

``q.asgi_app(dashboard=True)`` serves it under ``/tickq/`` next to the tick endpoint;
``tickq dashboard APP`` serves it alone. Rendering needs ``pip install 'tickq[dashboard]'``
(Jinja2); ``import tickq`` never imports this package.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from ..errors import ConfigurationError
from ..web.http import Request, Response
from .app import Dashboard
from .auth import LoginLimiter

if TYPE_CHECKING:
    from .host import Queue

__all__ = ["Dashboard", "LoginLimiter", "Request", "Response", "as_dashboard"]


def as_dashboard(queue: Queue, option: Any) -> Dashboard:
    """The ``dashboard=`` option of ``q.asgi_app()`` and friends as a ``Dashboard``: True,
    a dict of ``Dashboard`` keyword options (``{"prefix": "/admin/jobs"}``) or one built."""
    if isinstance(option, Dashboard):
        return option
    if option is True:
        return Dashboard(queue)
    if isinstance(option, Mapping):
        return Dashboard(queue, **option)
    raise ConfigurationError(
        "dashboard must be True, a dict of Dashboard options (e.g. {'read_only': True}) "
        f"or a tickq.dashboard.Dashboard, got {option!r}"
    )
