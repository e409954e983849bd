"""Internal: one registered webhook (``@q.webhook``) and the checks made when it is declared."""

from __future__ import annotations

from ..errors import ConfigurationError
from .verifiers import Verifier

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterable
    from typing import Any

DEFAULT_MAX_BODY = 1024 * 1024
TICKQ_PATHS = {
    "/api/cron/tick": "the tick",
    "/api/cron/health": "the health check",
    "/metrics": "the metrics",
}
DASHBOARD_PREFIX = "/tickq"
UNSAFE_IN_PATH = ("?", "#", "%", "\\", "<", ">", '"')


class WebhookDefinition:
    """A webhook endpoint: where it answers, how it verifies, which job it stores."""

    __slots__ = ("job", "max_body", "param", "path", "verifier")

    def __init__(self, path: str, verifier: Verifier, job: str, param: str, max_body: int):
        self.path, self.verifier, self.job = path, verifier, job
        self.param, self.max_body = param, max_body

    def unique_key(self, event_id: str) -> str:
        """Jobs of one webhook are unique per event id, for as long as the job is kept."""
        return f"webhook:{self.job}:{event_id}"

    def __repr__(self) -> str:
        return f"<tickq webhook {self.path} -> {self.job!r} {self.verifier!r}>"


def check_webhook(path: Any, verify: Any, max_body: Any, taken: dict[str, Any]) -> None:
    """Raise ``ConfigurationError`` saying what is wrong with a ``@q.webhook(...)``."""
    if not isinstance(path, str) or not path.startswith("/"):
        raise ConfigurationError(f"a webhook path must start with '/', got {path!r}")
    if any(c in path for c in UNSAFE_IN_PATH) or not path.isprintable() or " " in path:
        raise ConfigurationError(
            f"webhook path {path!r} must be a plain URL path (no query, fragment, spaces "
            "or escapes)"
        )
    if path in taken:
        raise ConfigurationError(
            f"a webhook is already registered at {path!r} (job {taken[path].job!r}); "
            "give each webhook its own path"
        )
    if path in TICKQ_PATHS:
        raise ConfigurationError(
            f"webhook path {path!r} is where {TICKQ_PATHS[path]} answers; pick another path"
        )
    if path == DASHBOARD_PREFIX or path.startswith(DASHBOARD_PREFIX + "/"):
        raise ConfigurationError(
            f"webhook path {path!r} is under the dashboard's {DASHBOARD_PREFIX}/; pick another"
        )
    if not isinstance(verify, Verifier):
        raise ConfigurationError(
            "verify= must be a verifier from tickq.webhooks (StandardWebhooks, Stripe, GitHub "
            f"or HMAC), got {type(verify).__name__}: every webhook checks a signature"
        )
    if type(max_body) is not int or max_body < 1:
        raise ConfigurationError(f"max_body must be a positive number of bytes, got {max_body!r}")


def check_dashboard_prefix(prefix: str, paths: Iterable[str]) -> None:
    """Raise ``ConfigurationError`` if a webhook path is under the dashboard's ``prefix``."""
    for path in paths:
        if path == prefix or path.startswith(prefix.rstrip("/") + "/"):
            raise ConfigurationError(
                f"webhook path {path!r} is under the dashboard's prefix {prefix!r}, which "
                "would answer it instead; move one of them"
            )


def event_parameter(job: str, accepted: frozenset[str] | None, required: frozenset[str]) -> str:
    """The one parameter of a webhook job that receives the event."""
    if accepted is None or len(accepted) != 1 or not required <= accepted:
        raise ConfigurationError(
            f"webhook job {job!r} must take exactly one parameter, the event (a dict), "
            "besides an optional JobContext; e.g. def handle(event: dict) -> None"
        )
    return next(iter(accepted))
