"""HTTP endpoints for hosts that sleep: ``POST /api/cron/tick`` and ``GET /api/cron/health``,
and the one request/response and adapters that also serve the webhooks and the dashboard.

``q.asgi_app()`` needs nothing beyond the standard library; the Flask, Django and FastAPI
adapters import their framework only when asked for.
"""

from __future__ import annotations

from .endpoint import Endpoint
from .http import Request, Response
from .options import EndpointOptions, EndpointSettings
from .routing import Route

__all__ = ["Endpoint", "EndpointOptions", "EndpointSettings", "Request", "Response", "Route"]
