"""The dashboard: routes, who may see it, and the actions people take from it."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import timedelta
from functools import cached_property
from time import monotonic
from typing import TYPE_CHECKING, Any
from urllib.parse import quote, urlencode

import tickq.dashboard.auth as access
import tickq.dashboard.views as views

from ..errors import (
    ConfigurationError,
    DatabaseUnavailable,
    InvalidTransition,
    JobNotFound,
    SchemaMissing,
)
from ..job_options import check_queue, check_text
from ..logger import library_logger
from ..web.http import Request, Response, redirect, text_response
from ..web.options import MISCONFIGURED, RETRY_AFTER_SECONDS, SCHEMA_MISSING, database_trouble
from ..web.routing import Route
from .render import render, static_file

if TYPE_CHECKING:
    from .host import Queue

AuthHook = Callable[[Request], bool]
log = library_logger("tickq")
MAX_BODY = 64 * 1024
"""The most bytes of a form the dashboard reads (its forms are a few hundred)."""
CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
ACTIONS = ("retry", "cancel", "delete")
DONE_MESSAGES = {
    "retry": "Put back to pending, due now. A job that had used all its attempts is allowed "
    "one more.",
    "cancel": "Cancelled.",
    "cancel_requested": "Asked the running job to stop: it ends cancelled once its worker "
    "hears (within about a second; if its worker is gone, when its lease runs out).",
}
RUN_MESSAGES = {
    "cancel": "Cancelled: its open steps are cancelled (a running one is asked to stop).",
    "retry": "The step's job is back to pending, due now; the run goes on once it ends.",
}
NO_AUTH = (
    "the tickq dashboard is closed: set TICKQ_DASHBOARD_PASSWORD (a long random value) "
    "or pass auth= (a function deciding from the host app's own login) to open it"
)


class Dashboard:
    """A web dashboard over ``queue``: jobs, failures, schedules and tick health.

    Never open by default: it needs ``password`` (default ``$TICKQ_DASHBOARD_PASSWORD``,
    at least 12 characters), which opens a login form, or ``auth``, a function given the
    ``Request`` (its ``native`` is the framework's own request) that returns True for
    people allowed in. With neither it answers 503 saying why. ``read_only`` hides and
    refuses every action.

    Sessions, the signing key and failed logins live in tickq's tables (migration 12), so
    every process serving the dashboard shares them; logging out ends the session for
    good, ``logout_everywhere()`` ends them all. ``secret_key`` (default
    ``$TICKQ_DASHBOARD_SECRET``) salts the install's random signing key: changing it
    invalidates every session and form. ``trusted_proxies`` lists the addresses or
    networks (``10.0.0.0/8``) of reverse proxies whose ``X-Forwarded-For`` names the
    client (default none: the peer address is the client the login limit counts).
    """

    def __init__(
        self,
        queue: Queue,
        *,
        prefix: str = "/tickq",
        password: str | None = None,
        auth: AuthHook | None = None,
        read_only: bool = False,
        secret_key: str | None = None,
        refresh_seconds: float = 5.0,
        expected_interval: timedelta = timedelta(minutes=15),
        login_limiter: access.LoginLimiter | None = None,
        trusted_proxies: Sequence[str] = (),
    ) -> None:
        if not prefix.startswith("/") or prefix.endswith("/"):
            raise ConfigurationError(
                f"prefix must start with '/' and not end with one, got {prefix!r}"
            )
        if refresh_seconds < 0:
            raise ConfigurationError(f"refresh_seconds must be >= 0, got {refresh_seconds}")
        if password:
            access.check_password(password, "password=")
        elif auth is None and (password := access.env_password()) is not None:
            access.check_password(password, "TICKQ_DASHBOARD_PASSWORD")  # auth=: not ours
        self.queue, self.prefix, self.read_only, self.auth = queue, prefix, read_only, auth
        self.refresh_seconds, self.expected_interval = refresh_seconds, expected_interval
        self.limiter = login_limiter or access.LoginLimiter()
        self.proxies = access.check_proxies(trusted_proxies)
        secret = secret_key or access.env_secret()
        self.guard = access.Access(queue._store, password or None, secret, self.now)
        self._held: tuple[float, list[dict[str, Any]]] | None = None

    # -- where it answers ---------------------------------------------------------------
    @cached_property
    def web_route(self) -> Route:
        """The dashboard's one route: its prefix and every path below it, each method
        answered by the dashboard itself (a form's body read, within ``MAX_BODY``)."""
        return Route("dashboard", self.prefix, (), self.serve, max_body=MAX_BODY,
                     body_methods=("POST",), below=True,
                     router_methods=("GET", "HEAD", "POST"), too_large_hint="")  # fmt: skip

    def find(self, path: str) -> Route | None:
        return self.web_route if self.web_route.matches(path) else None

    def all_routes(self) -> list[Route]:
        return [self.web_route]

    def not_found(self, request: Request) -> Response:
        """Served alone (``tickq dashboard``): ``/`` leads to the dashboard."""
        if request.path == "/":
            return redirect(request.url(self.prefix + "/"))
        return text_response(404, "not found")

    def serve(self, request: Request) -> Response:
        """Answer ``request`` for a path at or below the prefix."""
        sub = request.path[len(self.prefix) :]
        if not sub:
            return redirect(request.url(self.prefix + "/"))
        return self.handle(replace(request, path=sub, base=request.url(self.prefix)))

    # -- who may come in ----------------------------------------------------------------
    def now(self) -> float:
        """The dashboard's time (the queue's clock), in seconds since 1970."""
        return self.queue._store.clock.now().timestamp()

    def problem(self) -> str | None:
        """Why the dashboard refuses to open, or None."""
        return None if self.auth or self.guard.has_password else NO_AUTH

    def allowed(self, request: Request) -> bool:
        if self.auth is not None:
            return bool(self.auth(request))
        return self.guard.session_ok(request.cookies.get(access.SESSION_COOKIE))

    @property
    def own_login(self) -> bool:
        """Whether tickq's login form and sessions open this dashboard (not an ``auth``)."""
        return self.auth is None and self.guard.has_password

    def logout_everywhere(self) -> int:
        """End every session of this dashboard (every browser must log in again); returns
        how many there were. ``tickq dashboard APP --logout-everywhere`` does the same."""
        return self.guard.close_all()

    def client(self, request: Request) -> str:
        """Who is asking: the peer, or what a trusted proxy says it is."""
        forwarded = request.headers.get("x-forwarded-for", "")
        return access.client_address(request.client, forwarded, self.proxies)

    def counted(self, request: Request) -> str:
        """Whom the login limit counts: a browser that logged in before, by its device
        cookie; anyone else by address (an IPv6 client by its /64)."""
        device = self.guard.known_device(request.cookies.get(access.DEVICE_COOKIE))
        if device is not None:
            return access.KNOWN_DEVICE + device
        return access.limit_key(self.client(request))

    # -- requests -----------------------------------------------------------------------
    def handle(self, request: Request) -> Response:
        """Answer one request; never raises for bad input."""
        if request.path.startswith("/static/"):
            return self.static(request.path.removeprefix("/static/"))
        if (why := self.problem()) is not None:
            return self.page(request, "closed.html", 503, message=why)
        if request.problem:
            return self.page(request, "error.html", 400, message=request.problem)
        had = request.cookies.get(access.CSRF_COOKIE)
        if not access.good_nonce(had):  # the first visit: forms carry a token for a new nonce
            had = None
            request.cookies[access.CSRF_COOKIE] = access.new_nonce()
        try:
            response = self.route(request)
        except (DatabaseUnavailable, SchemaMissing, ConfigurationError) as exc:
            response = self.trouble(request, exc)  # the store's: the input was checked
        if not had:
            nonce = request.cookies[access.CSRF_COOKIE]
            response.headers.append(("Set-Cookie", self.cookie(request, access.CSRF_COOKIE, nonce)))
        return response

    def route(self, request: Request) -> Response:
        if request.path == "/login":
            return self.login(request)
        if not self.allowed(request):
            return self.refuse(request)
        if request.method == "POST":
            return self.post(request)
        if request.method not in ("GET", "HEAD"):
            return self.page(request, "error.html", 405, message="use GET or POST")
        return self.get(request)

    def get(self, request: Request) -> Response:
        path = request.path.rstrip("/") or "/"
        try:
            if path == "/":
                return self.page(request, "overview.html", data=views.overview(
                    self.queue, self.expected_interval), nav="overview")  # fmt: skip
            if path == "/jobs":
                return self.page(request, "jobs.html", data=views.jobs(self.queue, request.query),
                                 nav="jobs", statuses=views.STATUSES)  # fmt: skip
            if path == "/schedules":
                now = self.queue._store.now()
                return self.page(request, "schedules.html", nav="schedules", now=now,
                                 rows=views.schedules(self.queue, now))  # fmt: skip
            if path.startswith("/jobs/") and (job_id := _job_id(path[6:])) is not None:
                return self.detail(request, job_id)
            if path == "/workflows":
                return self.page(request, "workflows.html", nav="workflows",
                                 data=views.workflows(self.queue, request.query),
                                 statuses=views.WORKFLOW_STATUSES)  # fmt: skip
            if path.startswith("/workflows/") and (run_id := _job_id(path[11:])) is not None:
                return self.run_detail(request, run_id)
        except ConfigurationError:
            raise  # the store's (a database that does not exist): not the request's fault
        except ValueError as exc:
            return self.page(request, "error.html", 400, message=str(exc))
        return self.page(request, "error.html", 404, message=f"no page at {request.path}")

    def detail(self, request: Request, job_id: int, status: int = 200,
               error: str | None = None) -> Response:  # fmt: skip
        data = views.job_detail(self.queue, job_id)
        if data is None:
            return self.page(request, "error.html", 404, message=f"job {job_id} does not exist")
        done = DONE_MESSAGES.get(request.query.get("did", ""))
        return self.page(request, "job.html", status, data=data, nav="jobs", error=error,
                         done=done, now=self.queue._store.now())  # fmt: skip

    def run_detail(self, request: Request, run_id: int, status: int = 200,
                   error: str | None = None) -> Response:  # fmt: skip
        data = views.workflow_detail(self.queue, run_id)
        if data is None:
            return self.page(request, "error.html", 404,
                             message=f"workflow run {run_id} does not exist")  # fmt: skip
        done = RUN_MESSAGES.get(request.query.get("did", ""))
        return self.page(request, "workflow.html", status, data=data, nav="workflows",
                         error=error, done=done, now=self.queue._store.now())  # fmt: skip

    def act_on_run(self, request: Request, run_id: int, action: str, seq: int = 0) -> Response:
        """Cancel a workflow run, or retry a failed run's failed step."""
        try:
            if action == "cancel":
                self.queue.cancel_workflow(run_id)
            else:
                self.queue.retry_workflow_step(run_id, seq)
        except JobNotFound as exc:
            return self.page(request, "error.html", 404, message=str(exc))
        except InvalidTransition as exc:
            return self.run_detail(request, run_id, 409, error=str(exc))
        return redirect(request.url(f"/workflows/{run_id}?did={action}"))

    # -- actions ------------------------------------------------------------------------
    def post(self, request: Request) -> Response:
        if request.path == "/logout":
            return self.logout(request)
        if request.path == "/logout-everywhere":
            if not self.own_login or self.read_only:
                why = "read-only" if self.read_only else "opened by the host app's own login"
                return self.page(request, "error.html", 403, message=(
                    f"this dashboard is {why}: it cannot log anyone out everywhere"))  # fmt: skip
            return self.logout(request, everywhere=True)
        if self.read_only:
            return self.page(request, "error.html", 403, message="this dashboard is read-only")
        if not self.csrf_ok(request):
            return self.page(request, "error.html", 403, message=CSRF_PROBLEM)
        if request.path == "/jobs/retry-failed":
            return self.retry_failed(request)
        if request.path in ("/queues/pause", "/queues/resume"):
            return self.control(request, request.path.rsplit("/", 1)[1])
        parts = request.path.strip("/").split("/")
        if parts[0] == "workflows" and (run_id := _job_id(parts[1] if len(parts) > 1 else "")):
            if len(parts) == 3 and parts[2] == "cancel":
                return self.act_on_run(request, run_id, "cancel")
            if len(parts) == 5 and parts[2] == "steps" and parts[4] == "retry":
                seq = _job_id(parts[3])
                if seq is not None:
                    return self.act_on_run(request, run_id, "retry", seq)
        if len(parts) == 3 and parts[0] == "jobs" and parts[2] in ACTIONS:
            job_id = _job_id(parts[1])
            if job_id is not None:
                return self.act(request, job_id, parts[2])
        return self.page(request, "error.html", 404, message=f"no action at {request.path}")

    def act(self, request: Request, job_id: int, action: str) -> Response:
        try:
            job = getattr(self.queue, action)(job_id)
        except JobNotFound as exc:
            return self.page(request, "error.html", 404, message=str(exc))
        except InvalidTransition as exc:
            return self.detail(request, job_id, 409, error=str(exc))
        if action == "delete":
            return redirect(request.url(f"/jobs?{urlencode({'deleted': job_id})}"))
        if action == "cancel" and job.status == "running":
            action = "cancel_requested"
        return redirect(request.url(f"/jobs/{job_id}?did={action}"))

    def retry_failed(self, request: Request) -> Response:
        job_type = request.form.get("type") or None
        try:
            check_text("type", job_type or "")
        except ConfigurationError as exc:
            return self.page(request, "error.html", 400, message=str(exc))
        count = self.queue.retry_failed(job_type)
        query = {"status": "failed", **({"type": job_type} if job_type else {}),
                 "retried": count}  # fmt: skip
        return redirect(request.url(f"/jobs?{urlencode(query)}"))

    def control(self, request: Request, verb: str) -> Response:
        """Pause or resume the queue named in the form, then show the overview."""
        queue = request.form.get("queue") or ""
        try:
            check_queue(queue, bounded=verb == "pause")
        except ConfigurationError as exc:
            return self.page(request, "error.html", 400, message=str(exc))
        getattr(self.queue, verb)(queue)
        return redirect(request.url("/"))

    def csrf_ok(self, request: Request) -> bool:
        return access.same(request.form.get(access.CSRF_FIELD), self.csrf(request))

    def csrf(self, request: Request, template: str = "") -> str:
        """The token the forms of this page carry: the login form's is bound to the nonce
        cookie; once logged in, each session has its own."""
        nonce = request.cookies.get(access.CSRF_COOKIE) or ""
        if template == "login.html" or request.path == "/login":
            return self.guard.login_token(nonce) if nonce else ""
        if self.auth is not None:
            return self.guard.nonce_token(nonce) if nonce else ""
        session = request.cookies.get(access.SESSION_COOKIE)
        return self.guard.session_token(session) if session else ""

    # -- logging in and out -------------------------------------------------------------
    def login(self, request: Request) -> Response:
        if self.auth is not None and not self.guard.has_password:
            return redirect(request.url("/"))
        if request.method != "POST":
            return self.login_form(request)
        if not self.csrf_ok(request):
            return self.login_form(request, 403, CSRF_PROBLEM)
        client, now = self.counted(request), self.limiter.clock or self.now
        wait = self.limiter.start(self.queue._store, client, now())
        if wait > 0:
            response = self.login_form(request, 429, "Too many failed logins: wait a minute.")
            response.headers.append(("Retry-After", str(int(wait) + 1)))
            return response
        if not self.guard.password_ok(request.form.get("password", "")):
            return self.login_form(request, 401, "Wrong password.")
        self.limiter.succeeded(self.queue._store, client)
        return self.logged_in(request, known=client.startswith(access.KNOWN_DEVICE))

    def logged_in(self, request: Request, known: bool = False) -> Response:
        """A new session, a new nonce for the next login form, and a device cookie that
        lets this browser log in during a flood of failed logins from elsewhere."""
        response = redirect(_safe_next(request))
        session = self.guard.open_session()
        response.headers.append(
            ("Set-Cookie", self.cookie(request, access.SESSION_COOKIE, session))
        )
        if not known:
            device = self.guard.new_device()
            response.headers.append(("Set-Cookie", self.cookie(
                request, access.DEVICE_COOKIE, device, access.DEVICE_SECONDS)))  # fmt: skip
        nonce = access.new_nonce()
        request.cookies[access.CSRF_COOKIE] = nonce
        response.headers.append(("Set-Cookie", self.cookie(request, access.CSRF_COOKIE, nonce)))
        return response

    def login_form(self, request: Request, status: int = 200, error: str | None = None) -> Response:
        target = request.query.get("next") or request.form.get("next") or ""
        return self.page(request, "login.html", status, error=error, next=target)

    def logout(self, request: Request, everywhere: bool = False) -> Response:
        if not self.csrf_ok(request):
            return self.page(request, "error.html", 403, message=CSRF_PROBLEM)
        if everywhere:
            self.logout_everywhere()
        else:
            self.guard.close_session(request.cookies.get(access.SESSION_COOKIE))
        response = redirect(request.url("/login"))
        response.headers.append(("Set-Cookie", self.cookie(request, access.SESSION_COOKIE, "", 0)))
        return response

    def refuse(self, request: Request) -> Response:
        if self.auth is None and request.method == "GET" and not _is_refresh(request):
            target = request.url(request.path) + _query_suffix(request)
            return redirect(request.url(f"/login?{urlencode({'next': target})}"))
        message = "log in first" if self.auth is None else "the host app did not let you in"
        return self.page(request, "error.html", 401, message=message)

    def cookie(self, request: Request, name: str, value: str, max_age: int | None = None) -> str:
        parts = [f"{name}={value}", f"Path={request.base or '/'}", "HttpOnly", "SameSite=Lax"]
        if max_age is not None:
            parts.append(f"Max-Age={max_age}")
        elif name == access.SESSION_COOKIE:
            parts.append(f"Max-Age={access.SESSION_SECONDS}")
        if request.https:
            parts.append("Secure")
        return "; ".join(parts)

    # -- responses ----------------------------------------------------------------------
    def trouble(
        self, request: Request, exc: DatabaseUnavailable | SchemaMissing | ConfigurationError
    ) -> Response:
        """A 503 saying what is wrong with the database and what to do; where it lives
        (host, port, name, path) goes to the log only."""
        log.warning("tickq dashboard: %s", exc)
        if not isinstance(exc, DatabaseUnavailable):
            message = SCHEMA_MISSING if isinstance(exc, SchemaMissing) else MISCONFIGURED
            return self.page(request, "error.html", 503, message=message)
        response = self.page(request, "error.html", 503, message=database_trouble(exc.reason))
        response.headers.append(("Retry-After", str(RETRY_AFTER_SECONDS)))
        return response

    def held_horizon(self) -> list[dict[str, Any]]:
        """The transactions held open long that hold vacuum's horizon (Postgres), for the
        banner on every page: looked up at most once per ``HELD_EVERY`` seconds per
        dashboard (one small query), never on SQLite; a failed look shows none."""
        store = self.queue._store
        if not store.watches_horizon:
            return []
        now = monotonic()
        if self._held is None or now - self._held[0] >= HELD_EVERY:
            try:
                found = [t for t in store.long_transactions() if t["holds_snapshot"]]
            except Exception as exc:
                log.warning("tickq dashboard: could not look for long transactions: %s", exc)
                found = []
            self._held = (now, found)
        return self._held[1]

    def page(self, request: Request, template: str, status: int = 200, **context: Any) -> Response:
        forms = template not in ("error.html", "closed.html")  # these have none
        nav = context.pop("nav", "")
        body = render(
            template, url=request.url, base=request.base, path=request.path,
            query=request.query, read_only=self.read_only,
            csrf=self.csrf(request, template) if forms else "",
            can_logout=self.own_login,
            refresh=self.refresh_seconds, status=status, nav=nav,
            held=self.held_horizon() if nav else [],
            **context,
        )  # fmt: skip
        return Response(status, body, [("Content-Type", "text/html; charset=utf-8"),
                                       *SECURITY_HEADERS])  # fmt: skip

    def static(self, name: str) -> Response:
        found = static_file(name)
        if found is None:
            return text_response(404, "not found")
        content, kind = found
        return Response(200, content, [("Content-Type", kind), ("Cache-Control", "max-age=300"),
                                       ("X-Content-Type-Options", "nosniff")])  # fmt: skip


HELD_EVERY = 10.0
"""Seconds a dashboard reuses its last look for transactions held open long."""
CSRF_PROBLEM = "the form's CSRF token is missing or stale: reload the page and try again"
SECURITY_HEADERS = (
    ("Cache-Control", "no-store"),
    ("Content-Security-Policy", CSP),
    ("X-Content-Type-Options", "nosniff"),
    ("X-Frame-Options", "DENY"),
    ("Referrer-Policy", "same-origin"),
)


def _job_id(text: str) -> int | None:
    return int(text) if text.isdigit() and len(text) < 19 else None


def _is_refresh(request: Request) -> bool:
    return request.headers.get("x-tickq-refresh") == "1"


def _query_suffix(request: Request) -> str:
    return f"?{urlencode(request.query)}" if request.query else ""


def _safe_next(request: Request) -> str:
    """Where to go after logging in: only a page of this dashboard."""
    target = request.form.get("next", "")
    inside = target.startswith(request.base + "/") and "//" not in target and "\\" not in target
    return quote(target, safe="/?=&%:#") if inside else request.url("/")
