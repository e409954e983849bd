"""tickq's routes as Django URL patterns: ``urlpatterns += q.django_urls()``."""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from .http import Request, Response
from .routing import Route, answer


def urls(routes: list[Route]) -> list[Any]:
    """``django.urls`` entries, named ``tickq-tick``, ``tickq-health``,
    ``tickq-webhook_<job>`` and ``tickq-dashboard`` (every path below the dashboard's)."""
    from django.urls import path, re_path

    patterns = []
    for route in routes:
        name, where = f"tickq-{route.name}", route.path.lstrip("/")
        if route.below:
            patterns.append(re_path(f"^{where}/(?P<rest>.*)$", view(route), name=name))
        else:
            patterns.append(path(where, view(route), name=name))
    return patterns


def view(route: Route) -> Any:
    """A CSRF-exempt Django view for one route (the bearer token, the webhook's signature
    or the dashboard's own CSRF token is the protection)."""
    from django.http import HttpRequest, HttpResponse
    from django.views.decorators.csrf import csrf_exempt

    def tickq_view(request: HttpRequest, rest: str | None = None) -> HttpResponse:
        tickq_request = Request.from_environ(request.META, request)
        if route.below:
            at = replace(tickq_request, base="", path=request.path)
            tickq_request = at.mounted(f"{route.path}/{rest or ''}")
        return django_response(answer(route, tickq_request, request.read))

    tickq_view.__name__ = f"tickq_{route.name}"
    return csrf_exempt(tickq_view)


def django_response(response: Response) -> Any:
    from django.http import HttpResponse

    out = HttpResponse(response.body, status=response.status)  # none for HEAD
    for name, value in response.all_headers():
        if name.lower() == "set-cookie":
            set_cookie(out, value)
        else:
            out[name] = value
    return out


def set_cookie(out: Any, header: str) -> None:
    """Django keeps cookies apart from headers: one Set-Cookie each, attributes kept."""
    from http.cookies import SimpleCookie

    jar: SimpleCookie = SimpleCookie()
    jar.load(header)
    for name, morsel in jar.items():
        out.cookies[name] = morsel.value
        for attr in ("path", "max-age", "samesite", "httponly", "secure"):
            if morsel[attr]:
                out.cookies[name][attr] = morsel[attr]
