"""Internal: the ``Queue`` methods that build its web endpoints (a mixin of the facade).

Each adapter is imported when its method is first called, so ``import tickq`` stays light.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any, TypeAlias, Unpack

    from .dashboard import Dashboard
    from .dashboard.adapters import DashboardAsgi, DashboardWsgi
    from .dashboard.host import Queue as DashboardHost
    from .web.asgi import AsgiApp
    from .web.endpoint import Endpoint, TickTarget
    from .web.options import EndpointSettings
    from .web.wsgi import WsgiApp

    DashboardOption: TypeAlias = bool | Mapping[str, Any] | Dashboard


class WebFactories:
    """``q.endpoint()``, ``q.asgi_app()``, ``q.wsgi_app()``, ``q.flask_blueprint()``,
    ``q.fastapi_router()`` and ``q.django_urls()``: the tick and health endpoints for each
    kind of web app, with the dashboard beside them when asked for."""

    __slots__ = ()

    def endpoint(self, **options: Unpack[EndpointSettings]) -> Endpoint:
        """The framework-free tick and health endpoints behind every adapter below."""
        from .web.endpoint import Endpoint
        from .web.options import EndpointOptions

        return Endpoint(self._tick_target(), EndpointOptions(**options))

    def asgi_app(
        self, *, dashboard: DashboardOption = False, **options: Unpack[EndpointSettings]
    ) -> AsgiApp | DashboardAsgi:
        """An ASGI app with ``POST /api/cron/tick`` and ``GET /api/cron/health``.

        The tick needs ``Authorization: Bearer $CRON_SECRET`` (``$CRON_SECRET_PREVIOUS`` is
        accepted too, for rotation); without a secret configured it answers 503 and runs
        nothing. Options: ``path``, ``health_path``, ``secret``, ``previous_secret``,
        ``allow_get`` (Vercel Cron calls with GET), ``limit``, ``max_limit`` (cap of
        ``?limit=``), ``time_budget``, ``expected_interval`` (health fails after twice
        that), ``max_wait`` (``?strict=1`` answers 500 past it, or on new failures) and
        ``heartbeat_url`` (default ``$TICKQ_HEARTBEAT_URL``).

        ``dashboard=True`` also serves the web dashboard under ``/tickq/`` (a dict of
        ``tickq.dashboard.Dashboard`` options, e.g. ``{"prefix": "/admin/jobs"}``, or a
        ``Dashboard`` also work); it needs ``pip install 'tickq[dashboard]'`` and
        ``$TICKQ_DASHBOARD_PASSWORD`` or an ``auth`` hook, else it answers 503.
        """
        from .web.asgi import AsgiApp

        app = AsgiApp(self.endpoint(**options))
        if dashboard is False:
            return app
        from .dashboard import as_dashboard
        from .dashboard.adapters import DashboardAsgi

        return DashboardAsgi(as_dashboard(self._dashboard_host(), dashboard), app)

    def wsgi_app(
        self, *, dashboard: DashboardOption = False, **options: Unpack[EndpointSettings]
    ) -> WsgiApp | DashboardWsgi:
        """The same endpoints as a WSGI app; options as for ``asgi_app``."""
        from .web.wsgi import WsgiApp

        app = WsgiApp(self.endpoint(**options))
        if dashboard is False:
            return app
        from .dashboard import as_dashboard
        from .dashboard.adapters import DashboardWsgi

        return DashboardWsgi(as_dashboard(self._dashboard_host(), dashboard), app)

    def flask_blueprint(
        self,
        name: str = "tickq",
        *,
        dashboard: DashboardOption = False,
        **options: Unpack[EndpointSettings],
    ) -> Any:
        """The same endpoints as a Flask blueprint; options as for ``asgi_app``."""
        from .web.flask import blueprint

        bp = blueprint(self.endpoint(**options), name)
        if dashboard is False:
            return bp
        from .dashboard import as_dashboard
        from .dashboard.adapters import add_flask_rules

        return add_flask_rules(bp, as_dashboard(self._dashboard_host(), dashboard))

    def fastapi_router(self, **options: Unpack[EndpointSettings]) -> Any:
        """The same endpoints as a FastAPI router: ``app.include_router(q.fastapi_router())``
        adds ``POST /api/cron/tick`` and ``GET /api/cron/health`` beside the app's own
        routes (``prefix=`` moves them). Options as for ``asgi_app``."""
        from .web.fastapi import router

        return router(self.endpoint(**options))

    def django_urls(
        self, *, dashboard: DashboardOption = False, **options: Unpack[EndpointSettings]
    ) -> list[Any]:
        """The same endpoints as Django URL patterns: ``urlpatterns += q.django_urls()``."""
        from .web.django import urls

        patterns = urls(self.endpoint(**options))
        if dashboard is False:
            return patterns
        from .dashboard import as_dashboard
        from .dashboard.adapters import django_urls

        return patterns + django_urls(as_dashboard(self._dashboard_host(), dashboard))

    def _dashboard_host(self) -> DashboardHost:
        return self  # type: ignore[return-value]  # the Queue this mixin is part of

    def _tick_target(self) -> TickTarget:
        return self  # type: ignore[return-value]  # the Queue this mixin is part of
