"""Internal: the signature checks of incoming webhooks, pure functions of the request's
headers, its raw body and the time (public as ``tickq.webhooks``).

Each verifier takes the secret, or a list of secrets while one is being rotated, and never
shows it: not in its ``repr``, not in an error, not in a log line.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
from datetime import timedelta

from ..errors import ConfigurationError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence
    from typing import Any

    Secrets = str | Sequence[str]

DEFAULT_TOLERANCE = timedelta(minutes=5)
MAX_EVENT_ID = 200
"""An event id longer than this is refused (400): it becomes part of a unique key."""
ALGORITHMS = ("sha1", "sha256", "sha384", "sha512")


class WebhookRejected(Exception):
    """A request the endpoint refuses: ``status`` (401 or 400) and what is wrong."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def unauthorized(message: str) -> WebhookRejected:
    return WebhookRejected(401, message)


class Verifier:
    """Checks that a request comes from the provider, and names the event it carries.

    Subclasses set ``signature_headers`` (lower case; kept out of the job's meta) and
    ``signed_headers`` (lower case: the headers the signature covers, which the job sees
    in ``ctx.meta["webhook"]["headers"]``; every other header is in
    ``ctx.meta["webhook"]["unsigned_headers"]``), and implement ``check`` and
    ``event_id``. The event id is the job's unique key: it must come from what the
    signature covers (``self.body_event_id(body)`` when the provider signs no id), or a
    captured request sent again under a new id would run again.
    """

    signature_headers: tuple[str, ...] = ()
    signed_headers: tuple[str, ...] = ()
    delivery_header: str | None = None
    """A header naming each delivery that the signature does not cover (GitHub's
    ``X-GitHub-Delivery``): a known event under a new one is logged at INFO."""

    def __init__(self, secret: Secrets) -> None:
        self._secrets = secrets_of(type(self).__name__, secret)

    def check(self, headers: Mapping[str, str], body: bytes, now: float) -> None:
        """Raise ``WebhookRejected`` unless ``body`` is signed and fresh at ``now``."""
        raise NotImplementedError

    def event_id(self, headers: Mapping[str, str], event: dict[str, Any], body: bytes) -> str:
        """The id of this event, the same on every redelivery, covered by the signature."""
        raise NotImplementedError

    @staticmethod
    def body_event_id(body: bytes) -> str:
        """The event id of a provider that signs the body but no id: ``sha256:`` + the raw
        body's SHA-256, so a byte-identical body is the same event, whatever its headers
        say."""
        return "sha256:" + hashlib.sha256(body).hexdigest()

    def __repr__(self) -> str:
        count = len(self._secrets)
        return f"{type(self).__name__}(<{count} secret{'s' if count > 1 else ''} hidden>)"


def secrets_of(kind: str, secret: Any) -> tuple[str, ...]:
    """``secret`` (one, or a list while rotating) as a tuple; ConfigurationError if unusable."""
    values = (secret,) if isinstance(secret, str) else secret
    try:
        values = tuple(values)
    except TypeError:
        values = (secret,)
    if not values:
        raise ConfigurationError(f"{kind}() needs a secret, got an empty list")
    for i, value in enumerate(values, 1):
        if not isinstance(value, str):
            raise ConfigurationError(
                f"{kind}() secret #{i} must be a str, got {type(value).__name__}"
            )
        if not value.strip():
            raise ConfigurationError(
                f"{kind}() secret #{i} is empty: is the environment variable holding it set?"
            )
    return values


def fresh(timestamp: str, now: float, tolerance: timedelta, where: str) -> None:
    """Refuse a timestamp that is not whole Unix seconds, or more than ``tolerance`` off."""
    if not (timestamp.isascii() and timestamp.isdigit()) or len(timestamp) > 12:
        raise unauthorized(f"{where} must be Unix seconds, got {timestamp[:20]!r}")
    skew = now - int(timestamp)
    limit = tolerance.total_seconds()
    if skew > limit:
        raise unauthorized(
            f"{where} is {skew:.0f} s old, past the {limit:.0f} s tolerance: a replayed "
            "request, or this server's clock is wrong"
        )
    if -skew > limit:
        raise unauthorized(
            f"{where} is {-skew:.0f} s in the future, past the {limit:.0f} s tolerance: "
            "this server's clock (or the sender's) is wrong"
        )


def any_matches(received: Sequence[bytes], expected: Sequence[bytes]) -> bool:
    """Constant-time: every pair is compared, so timing says nothing about which matched."""
    matched = False
    for candidate in received:
        for digest in expected:
            matched |= hmac.compare_digest(candidate, digest)
    return matched


def check_tolerance(tolerance: Any) -> timedelta:
    if not isinstance(tolerance, timedelta) or tolerance <= timedelta(0):
        raise ConfigurationError(f"tolerance must be a positive timedelta, got {tolerance!r}")
    return tolerance


def checked_id(value: Any, where: str) -> str:
    if isinstance(value, int) and not isinstance(value, bool):
        value = str(value)
    if not isinstance(value, str) or not value:
        raise WebhookRejected(400, f"{where} must be a non-empty string, got {value!r:.40}")
    if len(value) > MAX_EVENT_ID:
        raise WebhookRejected(400, f"{where} is longer than {MAX_EVENT_ID} characters")
    return value


def header(headers: Mapping[str, str], name: str, shown: str) -> str:
    value = headers.get(name)
    if not value:
        raise unauthorized(f"missing {shown} header: this endpoint takes signed requests only")
    return value


class StandardWebhooks(Verifier):
    """The Standard Webhooks spec (Svix, Resend, Clerk, ...): ``webhook-id``,
    ``webhook-timestamp`` and ``webhook-signature`` (``v1,<base64>``, space-separated).

    ``secret`` is ``whsec_`` followed by base64, as the provider shows it. Requests whose
    timestamp is more than ``tolerance`` off are refused; the event id is ``webhook-id``
    (signed, with the timestamp).
    """

    signature_headers = ("webhook-signature",)
    signed_headers = ("webhook-id", "webhook-timestamp")

    def __init__(self, secret: Secrets, *, tolerance: timedelta = DEFAULT_TOLERANCE) -> None:
        super().__init__(secret)
        self.tolerance = check_tolerance(tolerance)
        self._keys = [key_of(value, i) for i, value in enumerate(self._secrets, 1)]

    def check(self, headers: Mapping[str, str], body: bytes, now: float) -> None:
        msg_id = header(headers, "webhook-id", "webhook-id")
        timestamp = header(headers, "webhook-timestamp", "webhook-timestamp")
        signatures = header(headers, "webhook-signature", "webhook-signature")
        fresh(timestamp, now, self.tolerance, "webhook-timestamp")
        signed = f"{msg_id}.{timestamp}.".encode("latin-1") + body
        expected = [hmac.new(key, signed, hashlib.sha256).digest() for key in self._keys]
        if not any_matches(v1_signatures(signatures), expected):
            raise unauthorized("no v1 signature in webhook-signature matches the body")

    def event_id(self, headers: Mapping[str, str], event: dict[str, Any], body: bytes) -> str:
        return checked_id(headers.get("webhook-id"), "webhook-id")


def key_of(secret: str, index: int) -> bytes:
    """The HMAC key of a ``whsec_<base64>`` secret (the prefix is optional)."""
    text = secret.strip().removeprefix("whsec_")
    try:
        key = base64.b64decode(text + "=" * (-len(text) % 4), validate=True)
    except (binascii.Error, ValueError):
        key = b""
    if not key:
        raise ConfigurationError(
            f"StandardWebhooks() secret #{index} is not 'whsec_' followed by base64: copy "
            "the signing secret exactly as the provider shows it (the value is not shown here)"
        )
    return key


def v1_signatures(header_value: str) -> list[bytes]:
    found = []
    for entry in header_value.split():
        version, _, value = entry.partition(",")
        if version == "v1":
            try:
                found.append(base64.b64decode(value, validate=True))
            except (binascii.Error, ValueError):
                continue
    return found


class Stripe(Verifier):
    """Stripe's ``Stripe-Signature: t=<unix seconds>,v1=<hex>[,v1=<hex>...]``.

    The signed payload is ``<t>.<raw body>``, HMAC-SHA256 with the endpoint's signing
    secret (``whsec_...``, used as is). Requests whose ``t`` is more than ``tolerance`` off
    are refused; the event id is the body's ``id`` (``evt_...``, signed with the body).
    """

    signature_headers = ("stripe-signature",)

    def __init__(self, secret: Secrets, *, tolerance: timedelta = DEFAULT_TOLERANCE) -> None:
        super().__init__(secret)
        self.tolerance = check_tolerance(tolerance)

    def check(self, headers: Mapping[str, str], body: bytes, now: float) -> None:
        fields = parse_pairs(header(headers, "stripe-signature", "Stripe-Signature"))
        timestamps, signatures = fields.get("t", []), fields.get("v1", [])
        if not timestamps or not signatures:
            raise unauthorized("Stripe-Signature needs t= and at least one v1= signature")
        fresh(timestamps[0], now, self.tolerance, "Stripe-Signature t=")
        signed = timestamps[0].encode("latin-1") + b"." + body
        expected = [hex_hmac(s.encode(), signed, "sha256") for s in self._secrets]
        if not any_matches([s.lower().encode("latin-1") for s in signatures], expected):
            raise unauthorized("no v1 signature in Stripe-Signature matches the body")

    def event_id(self, headers: Mapping[str, str], event: dict[str, Any], body: bytes) -> str:
        return checked_id(event.get("id"), "the event's 'id'")


def parse_pairs(header_value: str) -> dict[str, list[str]]:
    fields: dict[str, list[str]] = {}
    for item in header_value.split(","):
        key, _, value = item.strip().partition("=")
        fields.setdefault(key, []).append(value.strip())
    return fields


def hex_hmac(key: bytes, data: bytes, algorithm: str) -> bytes:
    return hmac.new(key, data, algorithm).hexdigest().encode("ascii")


class GitHub(Verifier):
    """GitHub's ``X-Hub-Signature-256: sha256=<hex>`` over the raw body.

    GitHub signs neither a timestamp nor its ``X-GitHub-Delivery`` id, so the event id is
    the body's digest (``sha256:<hex>``): a captured request sent again, with any delivery
    id, is acknowledged and not run. The event's type is the unsigned ``X-GitHub-Event``
    header, in the job's ``ctx.meta["webhook"]["unsigned_headers"]`` with the delivery id.
    """

    signature_headers = ("x-hub-signature-256", "x-hub-signature")
    delivery_header = "x-github-delivery"

    def check(self, headers: Mapping[str, str], body: bytes, now: float) -> None:
        value = header(headers, "x-hub-signature-256", "X-Hub-Signature-256")
        scheme, _, received = value.strip().partition("=")
        if scheme.lower() != "sha256":
            raise unauthorized("X-Hub-Signature-256 must be 'sha256=<hex>'")
        expected = [hex_hmac(s.encode(), body, "sha256") for s in self._secrets]
        if not any_matches([received.lower().encode("latin-1")], expected):
            raise unauthorized("X-Hub-Signature-256 does not match the body")

    def event_id(self, headers: Mapping[str, str], event: dict[str, Any], body: bytes) -> str:
        return self.body_event_id(body)


class HMAC(Verifier):
    """A provider's own HMAC scheme: ``header`` carries ``prefix`` + the HMAC of the raw
    body (``algorithm``: sha1, sha256, sha384 or sha512), as ``encoding`` "hex" or "base64".

    The event id is the body's top-level ``id_field`` (signed with the body), else
    ``sha256:`` + the body's SHA-256: a byte-identical body is then the same event. The
    signature does not cover the ``id_header`` header: it must be present, and the job
    sees it in ``ctx.meta["webhook"]["unsigned_headers"]``, but it is not the event id (a
    captured request sent again under a new id would run again). No timestamp is checked.
    """

    def __init__(
        self,
        secret: Secrets,
        *,
        header: str,
        algorithm: str = "sha256",
        encoding: str = "hex",
        prefix: str = "",
        id_header: str | None = None,
        id_field: str | None = None,
    ) -> None:
        super().__init__(secret)
        if algorithm not in ALGORITHMS:
            raise ConfigurationError(f"algorithm must be one of {ALGORITHMS}, got {algorithm!r}")
        if encoding not in ("hex", "base64"):
            raise ConfigurationError(f"encoding must be 'hex' or 'base64', got {encoding!r}")
        for option, value in (("header", header), ("id_header", id_header)):
            if value is not None and (not isinstance(value, str) or not value.strip()):
                raise ConfigurationError(f"{option} must be a header name, got {value!r}")
        if id_header is not None and id_field is not None:
            raise ConfigurationError("give id_header= or id_field=, not both")
        self.header, self.algorithm, self.encoding = header.lower(), algorithm, encoding
        self.prefix, self.id_field = prefix, id_field
        self.id_header = id_header.lower() if id_header else None
        self.signature_headers, self.delivery_header = (self.header,), self.id_header

    def check(self, headers: Mapping[str, str], body: bytes, now: float) -> None:
        value = header(headers, self.header, self.header).strip()
        if not value.lower().startswith(self.prefix.lower()):
            raise unauthorized(f"{self.header} must start with {self.prefix!r}")
        received = self.decode(value[len(self.prefix) :])
        keys = [s.encode() for s in self._secrets]
        expected = [hmac.new(key, body, self.algorithm).digest() for key in keys]
        if received is None or not any_matches([received], expected):
            raise unauthorized(f"{self.header} does not match the body")

    def decode(self, text: str) -> bytes | None:
        try:
            if self.encoding == "hex":
                return bytes.fromhex(text)
            return base64.b64decode(text, validate=True)
        except (binascii.Error, ValueError):
            return None

    def event_id(self, headers: Mapping[str, str], event: dict[str, Any], body: bytes) -> str:
        if self.id_header is not None:
            checked_id(headers.get(self.id_header), f"the {self.id_header} header")
        if self.id_field is not None:
            return checked_id(event.get(self.id_field), f"the event's {self.id_field!r}")
        return self.body_event_id(body)


def parse_event(body: bytes) -> dict[str, Any]:
    """The body as a JSON object, or ``WebhookRejected(400)`` saying what is wrong."""
    try:
        event = json.loads(body)
    except RecursionError:
        raise WebhookRejected(400, "the body's JSON is nested too deeply") from None
    except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError included
        raise WebhookRejected(400, f"the body is not valid JSON: {exc}") from None
    if type(event) is not dict:
        raise WebhookRejected(400, f"the body must be a JSON object, got {type(event).__name__}")
    return event
