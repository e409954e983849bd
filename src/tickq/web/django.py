"""The endpoints as Django URL patterns: ``urlpatterns += q.django_urls()``."""

from __future__ import annotations

from typing import Any

from .endpoint import Endpoint, Request, Route


def urls(endpoint: Endpoint, tick: bool = True) -> list[Any]:
    """``django.urls.path`` entries, named ``tickq-tick``, ``tickq-health`` and
    ``tickq-webhook_<job>``; with ``tick=False`` the webhooks only."""
    from django.urls import path

    routes = endpoint.all_routes() if tick else endpoint.all_routes()[len(endpoint.routes) :]
    return [
        path(route.path.lstrip("/"), view(endpoint, route), name=f"tickq-{route.name}")
        for route in routes
    ]


def view(endpoint: Endpoint, route: Route) -> Any:
    """A CSRF-exempt Django view for one route (the bearer token or the webhook's signature
    is the protection)."""
    from django.http import HttpRequest, HttpResponse
    from django.views.decorators.csrf import csrf_exempt

    def tickq_view(request: HttpRequest) -> HttpResponse:
        response = endpoint.handle(Request.from_environ(request.META), route, request.read)
        out = HttpResponse(response.body, status=response.status)  # none for HEAD
        for name, value in response.all_headers():
            out[name] = value
        return out

    tickq_view.__name__ = f"tickq_{route.name}"
    return csrf_exempt(tickq_view)
