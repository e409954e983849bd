"""Internal: the ``Queue`` methods that build its web endpoints (a mixin of the facade).

Each adapter is imported when its method is first called, so ``import tickq`` stays light.
"""

from __future__ import annotations

from .job_options import DEFAULT_MAX_SNOOZE, JobOptions

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from datetime import timedelta
    from typing import Any, TypeAlias, Unpack

    from .dashboard import Dashboard
    from .dashboard.host import Queue as DashboardHost
    from .registry import JobFunction
    from .retry import Backoff
    from .runtime import Runtime
    from .web.asgi import AsgiApp
    from .web.endpoint import Endpoint, TickTarget
    from .web.options import EndpointSettings
    from .web.routing import Route, Site
    from .web.wsgi import WsgiApp
    from .webhooks import Verifier

    DashboardOption: TypeAlias = bool | Mapping[str, Any] | Dashboard


class WebFactories:
    """``q.endpoint()``, ``q.asgi_app()``, ``q.wsgi_app()``, ``q.flask_blueprint()``,
    ``q.fastapi_router()`` and ``q.django_urls()``: the tick and health endpoints for each
    kind of web app, with the dashboard beside them when asked for."""

    __slots__ = ()
    if TYPE_CHECKING:
        _runtime: Runtime

    def endpoint(self, **options: Unpack[EndpointSettings]) -> Endpoint:
        """The framework-free tick and health endpoints (and the webhooks) behind every
        adapter below."""
        return self._endpoint(options, warn=True)

    def _endpoint(self, options: EndpointSettings, warn: bool) -> Endpoint:
        """The endpoint; with ``warn``, a tick that would answer 503 for want of a secret
        is said once now, at start-up, instead of at the scheduler's first call."""
        from .web.endpoint import Endpoint, warn_at_start_up
        from .web.options import EndpointOptions, unprotected_problem
        from .web.webhook import WebhookRoutes

        checked = EndpointOptions(**options)
        if warn and (problem := unprotected_problem(checked)):
            warn_at_start_up(problem)
        return Endpoint(self._tick_target(), checked, WebhookRoutes(self._runtime))

    def webhook(
        self,
        path: str,
        *,
        verify: Verifier,
        max_body: int = 1024 * 1024,
        name: str | None = None,
        max_attempts: int = 4,
        backoff: Sequence[float] | Backoff | None = None,
        queue: str = "default",
        priority: int = 0,
        timeout: float | None = None,
        max_delay: timedelta | None = None,
        max_snooze: timedelta | None = DEFAULT_MAX_SNOOZE,
        concurrency: int | None = None,
        rate_limit: str | None = None,
        concurrency_key: str | Callable[[dict[str, Any]], str] | None = None,
    ) -> Callable[[Callable[..., Any]], JobFunction[Any, Any]]:
        """Receive a provider's webhooks at ``path`` as jobs of the decorated function.

        >>> @q.webhook("/hooks/github", verify=GitHub(os.environ["GITHUB_WEBHOOK_SECRET"]))
        ... def github_event(event: dict) -> None: ...

        The endpoint (``POST path`` on ``q.asgi_app()``, ``q.wsgi_app()``,
        ``q.flask_blueprint()``, ``q.fastapi_router()`` and ``q.django_urls()``) checks the
        signature over the raw body with ``verify`` (``tickq.webhooks``: StandardWebhooks,
        Stripe, GitHub, HMAC), stores a job with the parsed event under the provider's event
        id, and answers 200 before the job runs. A redelivered event gets 200 and is not run
        again while its job is kept (until pruned). 401: bad or missing signature or a
        stale timestamp; 413: body over ``max_body`` bytes; 400: not a JSON object; 503
        with Retry-After: the event could not be stored. The job options are ``@q.job``'s;
        the function takes one parameter, the event, besides an optional ``JobContext``
        (whose ``meta["webhook"]`` has the event id and the request's headers).
        """
        from .registry import define
        from .webhooks.definition import WebhookDefinition, check_webhook, event_parameter

        check_webhook(path, verify, max_body, self._runtime.webhooks)
        options = JobOptions(
            name=name, max_attempts=max_attempts, backoff=backoff, queue=queue,
            priority=priority, timeout=timeout, max_delay=max_delay, max_snooze=max_snooze,
            concurrency=concurrency, rate_limit=rate_limit, concurrency_key=concurrency_key,
        )  # fmt: skip
        facade: Any = self  # the Queue this mixin is part of

        def register(fn: Callable[..., Any]) -> JobFunction[Any, Any]:
            definition = define(fn, options)
            param = event_parameter(definition.name, definition.accepted, definition.required)
            job: JobFunction[Any, Any] = facade._add_job(definition)
            self._runtime.webhooks[path] = WebhookDefinition(path, verify, job.name, param,
                                                            max_body)  # fmt: skip
            return job

        return register

    def asgi_app(
        self, *, dashboard: DashboardOption = False, **options: Unpack[EndpointSettings]
    ) -> AsgiApp:
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

        return AsgiApp(self._site(self.endpoint(**options), dashboard))

    def wsgi_app(
        self, *, dashboard: DashboardOption = False, **options: Unpack[EndpointSettings]
    ) -> WsgiApp:
        """The same endpoints as a WSGI app; options as for ``asgi_app``."""
        from .web.wsgi import WsgiApp

        return WsgiApp(self._site(self.endpoint(**options), dashboard))

    def flask_blueprint(
        self,
        name: str = "tickq",
        *,
        dashboard: DashboardOption = False,
        **options: Unpack[EndpointSettings],
    ) -> Any:
        """The same endpoints as a Flask blueprint; options as for ``asgi_app``."""
        from .web.flask import blueprint

        return blueprint(self._routes(self.endpoint(**options).all_routes(), dashboard), name)

    def fastapi_router(
        self, *, dashboard: DashboardOption = False, **options: Unpack[EndpointSettings]
    ) -> Any:
        """The same endpoints as a FastAPI router: ``app.include_router(q.fastapi_router())``
        adds ``POST /api/cron/tick`` and ``GET /api/cron/health`` beside the app's own
        routes (``prefix=`` moves them). Options as for ``asgi_app``; ``dashboard=True``
        adds the dashboard under ``/tickq/`` (below the same ``prefix=``)."""
        from .web.fastapi import router

        return router(self._routes(self.endpoint(**options).all_routes(), dashboard))

    def django_urls(
        self,
        *,
        dashboard: DashboardOption = False,
        tick: bool = True,
        **options: Unpack[EndpointSettings],
    ) -> list[Any]:
        """The same endpoints as Django URL patterns: ``urlpatterns += q.django_urls()``.

        ``tick=False`` leaves out the tick and health routes, e.g. for the webhooks alone
        beside ``include("tickq.contrib.django.urls")``.
        """
        from .web.django import urls

        endpoint = self._endpoint(options, warn=tick)
        routes = endpoint.all_routes() if tick else endpoint.all_routes()[len(endpoint.routes) :]
        return urls(self._routes(routes, dashboard))

    def _site(self, endpoint: Endpoint, dashboard: DashboardOption) -> Site:
        """The endpoint, with the dashboard in front of it when asked for."""
        if dashboard is False:
            return endpoint
        from .web.routing import Combined

        return Combined(self._dashboard(dashboard), endpoint)

    def _routes(self, routes: list[Route], dashboard: DashboardOption) -> list[Route]:
        """``routes``, with the dashboard's after them when asked for (a framework's URL
        table)."""
        return routes if dashboard is False else routes + self._dashboard(dashboard).all_routes()

    def _dashboard(self, option: DashboardOption) -> Dashboard:
        """The dashboard asked for, once no webhook path is under its prefix."""
        from .dashboard import as_dashboard
        from .webhooks.definition import check_dashboard_prefix

        dashboard = as_dashboard(self._dashboard_host(), option)
        check_dashboard_prefix(dashboard.prefix, self._runtime.webhooks)
        return dashboard

    def _dashboard_host(self) -> DashboardHost:
        return self  # type: ignore[return-value]  # the Queue this mixin is part of

    def _tick_target(self) -> TickTarget:
        return self  # type: ignore[return-value]  # the Queue this mixin is part of
