"""Internal: the webhook endpoints, one per ``@q.webhook``: verify, store, answer.

All of it happens before any work runs: the signature is checked over the raw body, the
event is stored as a job whose unique key is the event id the signature covers (kept for
as long as the job is, so a redelivery finds it and is acknowledged without a second run),
and only then does the endpoint answer 200. A database that is down answers 503 with
``Retry-After`` so the provider delivers again; nothing else answers 5xx.
"""

from __future__ import annotations

import hashlib
import re

from ..job_options import EnqueueOptions
from ..logger import library_logger
from ..runtime import watching
from ..webhooks.verifiers import WebhookRejected, parse_event
from .http import Request, Response, error, json_response
from .options import RETRY_AFTER_SECONDS
from .routing import Route

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

    from ..runtime import Runtime
    from ..webhooks.definition import WebhookDefinition
    from ..webhooks.verifiers import Verifier

log = library_logger("tickq")
HIDDEN_HEADERS = ("authorization", "proxy-authorization", "cookie")
NOT_STORED = (
    "the event was not stored (the database is unreachable or refused the write); "
    "deliver it again later. The app's log (logger 'tickq') has the details"
)


class WebhookRoutes:
    """The routes of a Queue's webhooks, read from its registry on each request, so a
    webhook declared after ``q.asgi_app()`` is served too."""

    def __init__(self, runtime: Runtime) -> None:
        self.runtime = runtime
        self._routes: dict[str, tuple[WebhookDefinition, Route]] = {}

    def find(self, path: str) -> Route | None:
        definition = self.runtime.webhooks.get(path)
        if definition is None:
            return None
        cached = self._routes.get(path)
        if cached is None or cached[0] is not definition:
            cached = (definition, self._route(definition))
            self._routes[path] = cached
        return cached[1]

    def routes(self) -> list[Route]:
        return [route for path in self.runtime.webhooks if (route := self.find(path))]

    def _route(self, definition: WebhookDefinition) -> Route:
        name = "webhook_" + re.sub(r"\W", "_", definition.job)
        receiver = Receiver(self.runtime, definition)
        return Route(name, definition.path, ("POST",), receiver, max_body=definition.max_body)


class Receiver:
    """The handler of one webhook route."""

    def __init__(self, runtime: Runtime, definition: WebhookDefinition) -> None:
        self.runtime, self.definition = runtime, definition

    def __call__(self, request: Request) -> Response:
        headers = dict(reversed(request.headers.pairs))  # the first value of a repeated header wins
        try:
            job, sent = self.new_job(headers, request.body)
        except WebhookRejected as refused:
            log.warning("tickq webhook %s refused (%s): %s", request.path, refused.status,
                        refused.message)  # fmt: skip
            return error(refused.status, refused.message)
        try:
            job_id, new = self.insert(job)
        except Exception as exc:
            log.error("tickq webhook %s: the event was not stored: %s", request.path,
                      type(exc).__name__, exc_info=exc)  # fmt: skip
            return error(503, NOT_STORED, [("retry-after", str(RETRY_AFTER_SECONDS))])
        if not new:  # a known event: read the stored one back only then
            self.compare_with_stored(job_id, sent)
        return json_response(200, {"received": True, "job_id": job_id})

    def insert(self, job: Any) -> tuple[int, bool]:
        """The event's job stored: its id and True, or a known event's job id and False;
        inside each watcher's ``sending`` scope (the PRODUCER span) when watched."""
        watchers = watching()
        if not watchers:
            return self.runtime.store.insert_one(job)
        from ..observe import sent

        stored: list[tuple[int, bool]] = []

        def insert(rows: Any) -> list[int]:
            stored.append(self.runtime.store.insert_one(rows[0]))
            return [stored[0][0]]

        sent(watchers, [job], insert)
        return stored[0]

    def compare_with_stored(self, job_id: int, sent: Mapping[str, Any]) -> None:
        """For an event id already stored: log at WARNING when the stored job holds another
        body (a sender reusing an id, or one whose signing secret is known to someone
        else), at INFO when the same body came under another unsigned delivery id (the
        provider delivering again, or a captured request replayed)."""
        try:
            stored = self.runtime.store.get(job_id)
        except Exception as exc:  # the event is stored: the answer stays 200
            log.warning("tickq webhook %s: job %s stored, but reading it back to compare "
                        "bodies failed: %s", sent["path"], job_id, type(exc).__name__)  # fmt: skip
            return
        first = (stored.meta.get("webhook") or {}) if stored else {}
        if first.get("body_sha256") not in (None, sent["body_sha256"]):
            log.warning(
                "tickq webhook %s: event %r was delivered again with a different body "
                "(this delivery's sha256 %s; job %s was stored with sha256 %s): the stored "
                "job is kept and this delivery is not run",
                sent["path"], sent["event_id"], sent["body_sha256"], job_id,
                first["body_sha256"],
            )  # fmt: skip
            return
        name = self.definition.verifier.delivery_header
        was = (first.get("unsigned_headers") or {}).get(name) if name else None
        now = sent["unsigned_headers"].get(name) if name else None
        if was != now:
            log.info(
                "tickq webhook %s: event %r (job %s) arrived again under %s %r (stored "
                "under %r), same body: acknowledged, not run (the provider redelivering, "
                "or a captured request replayed)",
                sent["path"], sent["event_id"], job_id, name, now, was,
            )  # fmt: skip

    def new_job(self, headers: dict[str, str], body: bytes) -> tuple[Any, dict[str, Any]]:
        """The job to store for this request and its ``webhook`` meta, or
        ``WebhookRejected`` (401/400)."""
        definition, verifier = self.definition, self.definition.verifier
        verifier.check(headers, body, self.runtime.clock.now().timestamp())
        event = parse_event(body)
        event_id = verifier.event_id(headers, event, body)
        meta = {"webhook": webhook_meta(definition.path, verifier, event_id, headers, body)}
        try:
            once = EnqueueOptions(unique_key=definition.unique_key(event_id), unique_scope="all")
            job = self.runtime.new_job(
                definition.job, {definition.param: event}, once, meta, external=True
            )
        except (TypeError, ValueError) as exc:
            raise WebhookRejected(400, f"the event can't be stored as a job: {exc}") from None
        return job, meta["webhook"]


def webhook_meta(
    path: str, verifier: Verifier, event_id: str, headers: Mapping[str, str], body: bytes
) -> dict[str, Any]:
    """What the job reads in ``ctx.meta["webhook"]``: the headers the signature covers
    apart from the ones it does not (a sender, or anyone replaying, chooses those)."""
    kept = kept_headers(headers, verifier.signature_headers)
    signed = {name: value for name, value in kept.items() if name in verifier.signed_headers}
    return {
        "path": path,
        "event_id": event_id,
        "body_sha256": hashlib.sha256(body).hexdigest(),
        "headers": signed,
        "unsigned_headers": {name: value for name, value in kept.items() if name not in signed},
    }


def kept_headers(headers: Mapping[str, str], signatures: tuple[str, ...]) -> dict[str, str]:
    """The headers a job may read: not credentials, cookies or the signatures."""
    dropped = (*HIDDEN_HEADERS, *signatures)
    return {name: value for name, value in headers.items() if name not in dropped}
