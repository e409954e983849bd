"""Prometheus metrics, read from the jobs table at scrape time.

Because every figure comes from the database (``q.stats()``), one scrape of any process
is right for all of them: no per-process counters to add up, nothing lost on restart.
Processed totals and the duration histogram count pruned jobs too (pruning rolls them
up first), so they only ever go up.

>>> text = render(q)                      # the exposition text
>>> app = q.asgi_app(metrics=True)        # GET /metrics, bearer TICKQ_METRICS_TOKEN

Needs ``pip install 'tickq[metrics]'`` (``prometheus_client``), imported only when used.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .exposition import CONTENT_TYPE, TickqCollector, families, render

if TYPE_CHECKING:
    from .web.endpoint import TickTarget

__all__ = ["CONTENT_TYPE", "MetricsApp", "TickqCollector", "families", "render"]


def MetricsApp(queue: TickTarget, token: str | None = None, path: str = "/metrics") -> Any:
    """An ASGI app serving only ``GET /metrics``, to mount where you like.

    The same route ``q.asgi_app(metrics=True)`` adds beside the tick: bearer token from
    ``token=`` or ``TICKQ_METRICS_TOKEN`` (503 while unset, 401 when missing or wrong).
    """
    from .web.asgi import AsgiApp
    from .web.endpoint import Endpoint
    from .web.options import EndpointOptions

    endpoint = Endpoint(queue, EndpointOptions(metrics=True, metrics_path=path,
                                               metrics_token=token))  # fmt: skip
    endpoint.routes = [r for r in endpoint.routes if r.name == "metrics"]
    return AsgiApp(endpoint)
