"""Internal: the ``Queue`` methods that build its web endpoints (a mixin of the facade).

Each adapter is imported when its method is first called, so ``import tickq`` stays light.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Unpack

    from .web.asgi import AsgiApp
    from .web.endpoint import Endpoint, TickTarget
    from .web.options import EndpointSettings
    from .web.wsgi import WsgiApp


class WebFactories:
    """``q.endpoint()``, ``q.asgi_app()``, ``q.wsgi_app()``, ``q.flask_blueprint()`` and
    ``q.django_urls()``: the tick and health endpoints for each kind of web app."""

    __slots__ = ()

    def endpoint(self, **options: Unpack[EndpointSettings]) -> Endpoint:
        """The framework-free tick and health endpoints behind every adapter below."""
        from .web.endpoint import Endpoint, EndpointOptions

        return Endpoint(self._tick_target(), EndpointOptions(**options))

    def asgi_app(self, **options: Unpack[EndpointSettings]) -> AsgiApp:
        """An ASGI app with ``POST /api/cron/tick`` and ``GET /api/cron/health``.

        The tick needs ``Authorization: Bearer $CRON_SECRET`` (``$CRON_SECRET_PREVIOUS`` is
        accepted too, for rotation); without a secret configured it answers 503 and runs
        nothing. Options: ``path``, ``health_path``, ``secret``, ``previous_secret``,
        ``allow_get`` (Vercel Cron calls with GET), ``limit``, ``max_limit`` (cap of
        ``?limit=``), ``time_budget``, ``expected_interval`` (health fails after twice
        that), ``max_wait`` (``?strict=1`` answers 500 past it, or on new failures) and
        ``heartbeat_url`` (default ``$TICKQ_HEARTBEAT_URL``).
        """
        from .web.asgi import AsgiApp

        return AsgiApp(self.endpoint(**options))

    def wsgi_app(self, **options: Unpack[EndpointSettings]) -> WsgiApp:
        """The same endpoints as a WSGI app; options as for ``asgi_app``."""
        from .web.wsgi import WsgiApp

        return WsgiApp(self.endpoint(**options))

    def flask_blueprint(self, name: str = "tickq", **options: Unpack[EndpointSettings]) -> Any:
        """The same endpoints as a Flask blueprint; options as for ``asgi_app``."""
        from .web.flask import blueprint

        return blueprint(self.endpoint(**options), name)

    def django_urls(self, **options: Unpack[EndpointSettings]) -> list[Any]:
        """The same endpoints as Django URL patterns: ``urlpatterns += q.django_urls()``."""
        from .web.django import urls

        return urls(self.endpoint(**options))

    def _tick_target(self) -> TickTarget:
        return self  # type: ignore[return-value]  # the Queue this mixin is part of
