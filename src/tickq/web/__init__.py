"""HTTP endpoints for hosts that sleep: ``POST /api/cron/tick`` and ``GET /api/cron/health``.

``q.asgi_app()`` needs nothing beyond the standard library; the Flask and Django adapters
import their framework only when asked for.
"""

from __future__ import annotations

from .endpoint import Endpoint, Request, Response, Route
from .options import EndpointOptions, EndpointSettings

__all__ = ["Endpoint", "EndpointOptions", "EndpointSettings", "Request", "Response", "Route"]
