"""Where alerts go: a webhook (JSON or Slack), email over SMTP, or any callable.

Sinks are plain callables taking an ``Alert``; raising means "not delivered, try again".
They use only the standard library (``urllib``, ``smtplib``), imported when first used.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping, Sequence

from ..errors import ConfigurationError
from .alert import Alert

TYPE_CHECKING = False  # typing and urllib.parse cost a waking host milliseconds of import
if TYPE_CHECKING:
    from typing import Any

Sink = Callable[[Alert], object]
WEBHOOK_FORMATS = ("json", "slack")
TRUE_WORDS = ("1", "true", "yes", "on")
FALSE_WORDS = ("0", "false", "no", "off")


class Webhook:
    """POST each alert to ``url``: ``format="json"`` sends the alert's fields plus ``text``;
    ``format="slack"`` sends ``{"text": ...}`` for a Slack (or compatible) incoming webhook.

    Any 2xx answer is delivered; anything else, or no answer within ``timeout`` seconds,
    is retried. The sink's ``name`` shows only the host: webhook URLs often embed a secret.
    """

    def __init__(
        self,
        url: str,
        format: str = "json",
        *,
        timeout: float = 10.0,
        headers: Mapping[str, str] | None = None,
        name: str | None = None,
    ) -> None:
        from urllib.parse import urlsplit

        parts = urlsplit(url)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            raise ConfigurationError(
                f"webhook URL must be http(s)://host/path, got {_redact(url)!r}"
            )
        if format not in WEBHOOK_FORMATS:
            raise ConfigurationError(f"webhook format must be 'json' or 'slack', got {format!r}")
        if timeout <= 0:
            raise ConfigurationError(f"webhook timeout must be positive seconds, got {timeout}")
        self.url, self.format, self.timeout = url, format, float(timeout)
        self.headers = dict(headers or {})
        import hashlib

        # The host, and a short hash telling two URLs on one host apart: the path is secret.
        digest = hashlib.sha256(url.encode()).hexdigest()[:8]
        self.name = name or f"webhook:{parts.hostname}#{digest}"

    def __repr__(self) -> str:
        return f"Webhook({self.name!r}, format={self.format!r})"

    def body(self, alert: Alert) -> dict[str, Any]:
        if self.format == "slack":
            return {"text": f"*{alert.title}*\n{alert.text}"}
        return alert.to_dict()

    def __call__(self, alert: Alert) -> None:
        import urllib.error
        import urllib.request

        from .._version import __version__

        request = urllib.request.Request(
            self.url, data=json.dumps(self.body(alert)).encode(), method="POST",
            headers={"Content-Type": "application/json", "User-Agent": f"tickq/{__version__}",
                     **self.headers},
        )  # fmt: skip
        try:
            with urllib.request.urlopen(request, timeout=self.timeout) as response:
                response.read(1024)
        except urllib.error.HTTPError as exc:
            raise DeliveryError(f"{self.name} answered HTTP {exc.code} {exc.reason}") from None
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise DeliveryError(f"{self.name} could not be reached: {reason}") from None


class Email:
    """Send each alert as a plain-text email through an SMTP server.

    Port 465 (or an ``smtps://`` URL) means TLS from the start; otherwise ``starttls=True``
    upgrades the connection before logging in. The server's certificate is verified
    (``ssl_context=`` to trust another CA). ``to`` is one address or a list.
    """

    def __init__(
        self,
        host: str,
        port: int = 587,
        sender: str | None = None,
        to: str | Sequence[str] = (),
        username: str | None = None,
        password: str | None = None,
        starttls: bool = True,
        *,
        timeout: float = 10.0,
        ssl_context: Any = None,
        name: str | None = None,
    ) -> None:
        recipients = [to] if isinstance(to, str) else list(to)
        recipients = [r.strip() for r in recipients if r and r.strip()]
        if not host:
            raise ConfigurationError("Email needs the SMTP server's host, got ''")
        if not recipients or any("@" not in r for r in recipients):
            raise ConfigurationError(
                f"Email needs at least one recipient address in to=, got {to!r}"
            )
        if not 0 < int(port) < 65536:
            raise ConfigurationError(f"SMTP port must be 1-65535, got {port}")
        self.host, self.port, self.to = host, int(port), recipients
        self.sender = sender or (username if username and "@" in username else f"tickq@{host}")
        self.username, self.password = username, password
        self.starttls, self.timeout = starttls, float(timeout)
        self.ssl_context = ssl_context
        self.name = name or f"email:{','.join(recipients)}"

    def __repr__(self) -> str:
        return f"Email({self.host}:{self.port}, to={self.to!r})"

    @classmethod
    def from_url(cls, url: str, to: str | Sequence[str], sender: str | None = None) -> Email:
        """``smtp://user:pass@host:587?starttls=1`` (or ``smtps://...:465``) to an Email."""
        from urllib.parse import parse_qs, unquote, urlsplit

        parts = urlsplit(url)
        if parts.scheme not in ("smtp", "smtps") or not parts.hostname:
            raise ConfigurationError(
                f"SMTP URL must look like smtp://user:pass@host:587?starttls=1, "
                f"got {_redact(url)!r}"
            )
        options = {k: v[-1] for k, v in parse_qs(parts.query).items()}
        secure = parts.scheme == "smtps"
        try:
            port = parts.port or (465 if secure else 587)
        except ValueError:
            raise ConfigurationError(f"SMTP URL has a bad port: {_redact(url)!r}") from None
        return cls(
            parts.hostname, port, sender or options.get("from"), to,
            unquote(parts.username) if parts.username else None,
            unquote(parts.password) if parts.password else None,
            starttls=_flag(options.get("starttls", "1"), "starttls") and not secure,
            timeout=float(options.get("timeout", 10)),
        )  # fmt: skip

    def message(self, alert: Alert) -> Any:
        from email.message import EmailMessage

        msg = EmailMessage()
        msg["Subject"], msg["From"], msg["To"] = alert.title, self.sender, ", ".join(self.to)
        msg.set_content(alert.text + "\n")
        return msg

    def __call__(self, alert: Alert) -> None:
        import smtplib

        try:
            with self._connect(smtplib) as smtp:
                if self.starttls and self.port != 465:
                    smtp.starttls(context=self._tls())
                if self.username:
                    smtp.login(self.username, self.password or "")
                smtp.send_message(self.message(alert))
        except (smtplib.SMTPException, OSError) as exc:
            raise DeliveryError(f"{self.name} via {self.host}:{self.port} failed: {exc}") from None

    def _connect(self, smtplib: Any) -> Any:
        if self.port == 465:
            return smtplib.SMTP_SSL(self.host, self.port, timeout=self.timeout, context=self._tls())
        return smtplib.SMTP(self.host, self.port, timeout=self.timeout)

    def _tls(self) -> Any:
        # smtplib's own default context does not check the certificate: ours does.
        import ssl

        return self.ssl_context or ssl.create_default_context()


class DeliveryError(Exception):
    """A sink could not deliver an alert; the delivery job retries it."""


def sink_name(sink: Sink) -> str:
    """A sink's stable name: its ``name``, else the callable's module and qualified name."""
    name = getattr(sink, "name", None)
    if isinstance(name, str) and name:
        return name
    target = getattr(sink, "__func__", sink)
    module = getattr(target, "__module__", None) or "?"
    return f"{module}.{getattr(target, '__qualname__', type(sink).__name__)}"


def sinks_from_env(environ: Mapping[str, str] | None = None) -> list[Sink]:
    """Sinks named by the environment: ``TICKQ_ALERT_WEBHOOK_URL`` (with optional
    ``TICKQ_ALERT_WEBHOOK_FORMAT``), and ``TICKQ_ALERT_EMAIL_TO`` (comma-separated) with
    ``TICKQ_SMTP_URL`` (and optional ``TICKQ_ALERT_EMAIL_FROM``)."""
    env = os.environ if environ is None else environ
    sinks: list[Sink] = []
    if url := env.get("TICKQ_ALERT_WEBHOOK_URL", "").strip():
        from urllib.parse import urlsplit

        host = urlsplit(url).hostname or ""
        default = "slack" if host.endswith("hooks.slack.com") else "json"
        fmt = env.get("TICKQ_ALERT_WEBHOOK_FORMAT", "").strip().lower() or default
        if fmt not in WEBHOOK_FORMATS:
            raise ConfigurationError(
                f"TICKQ_ALERT_WEBHOOK_FORMAT must be 'json' or 'slack', got {fmt!r}"
            )
        sinks.append(Webhook(url, fmt))
    if to := env.get("TICKQ_ALERT_EMAIL_TO", "").strip():
        smtp_url = env.get("TICKQ_SMTP_URL", "").strip()
        if not smtp_url:
            raise ConfigurationError(
                "TICKQ_ALERT_EMAIL_TO is set but TICKQ_SMTP_URL is not; set it to your mail "
                "server, e.g. smtp://user:password@smtp.example.com:587?starttls=1"
            )
        sender = env.get("TICKQ_ALERT_EMAIL_FROM", "").strip() or None
        sinks.append(Email.from_url(smtp_url, to.split(","), sender))
    return sinks


def _flag(value: str, name: str) -> bool:
    if value.lower() in TRUE_WORDS:
        return True
    if value.lower() in FALSE_WORDS:
        return False
    raise ConfigurationError(f"SMTP URL option {name} must be 1 or 0, got {value!r}")


def _redact(url: str) -> str:
    """The URL without its password or path (either may be a secret)."""
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}{':' + str(parts.port) if _safe_port(parts) else ''}/..."


def _safe_port(parts: Any) -> int | None:
    try:
        return parts.port  # type: ignore[no-any-return]
    except ValueError:
        return None
