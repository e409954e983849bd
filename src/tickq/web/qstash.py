"""Upstash QStash as the scheduler: its signed ``Upstash-Signature`` accepted in place of
the bearer token, verified with the standard library.

QStash signs each call with a JWT (HS256, keyed with the current or the next signing key)
whose claims name the issuer (``iss`` = ``Upstash``), the URL called (``sub``), its
validity (``nbf`` .. ``exp``, five minutes by default), an id (``jti``) and the base64url
SHA-256 of the body (``body``). With ``$QSTASH_CURRENT_SIGNING_KEY`` or
``$QSTASH_NEXT_SIGNING_KEY`` set, a tick carrying that header is let in when all of them
check out, and only once: the ``jti`` is remembered in the database until the token
expires, so a captured call replayed is refused.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import os
from dataclasses import dataclass
from urllib.parse import urlsplit

from ..webhooks.verifiers import any_matches

CURRENT_KEY_ENV = "QSTASH_CURRENT_SIGNING_KEY"
NEXT_KEY_ENV = "QSTASH_NEXT_SIGNING_KEY"
URL_ENV = "TICKQ_QSTASH_URL"
HEADER = "upstash-signature"
ISSUER = "Upstash"
LEEWAY_SECONDS = 5.0
"""Clock difference tolerated between QStash and this host, on ``nbf`` and ``exp``."""
MAX_TOKEN = 4096


class Refused(Exception):
    """Why a signed call is refused: one line, for the 401's body."""


@dataclass(frozen=True, slots=True)
class Claims:
    """What the tick needs of a verified token once the body has been read."""

    jti: str
    expires_at: float
    body_hash: str


def signing_keys() -> list[str]:
    """The signing keys set in the environment, current first (read on each call, as
    ``$CRON_SECRET`` is, so a rotation needs no restart)."""
    found = (os.environ.get(name, "").strip() for name in (CURRENT_KEY_ENV, NEXT_KEY_ENV))
    return [key for key in found if key]


def check_token(token: str, keys: list[str], host: str | None, path: str, query: str,
                now: float) -> Claims:  # fmt: skip
    """The claims of ``token`` when it is signed with one of ``keys``, issued by QStash for
    this URL (``host`` + a path ending in ``path`` + ``query``) and valid at ``now``."""
    if len(token) > MAX_TOKEN or not token.isascii() or token.count(".") != 2:
        raise Refused("the Upstash-Signature header is not a JWT")
    head, payload, signature = token.split(".")
    if _json(head, "header").get("alg") != "HS256":
        raise Refused("the token is not signed with HS256, as QStash signs")
    message = f"{head}.{payload}".encode("ascii")
    expected = [hmac.new(key.encode(), message, hashlib.sha256).digest() for key in keys]
    if not any_matches([_b64(signature)], expected):
        raise Refused(f"the signature matches neither {CURRENT_KEY_ENV} nor {NEXT_KEY_ENV}")
    claims = _json(payload, "payload")
    _check_times(claims, now)
    if claims.get("iss") != ISSUER:
        raise Refused(f"the token's issuer is {claims.get('iss')!r}, not {ISSUER!r}")
    _check_url(str(claims.get("sub", "")), host, path, query)
    jti, body = claims.get("jti"), claims.get("body")
    if not isinstance(jti, str) or not jti or not isinstance(body, str):
        raise Refused("the token has no jti or no body claim")
    return Claims(jti, float(claims["exp"]) + LEEWAY_SECONDS, body)  # type: ignore[arg-type]


def check_body(claims: Claims, body: bytes) -> None:
    """Refuse a body other than the one QStash signed (compared without padding)."""
    digest = base64.urlsafe_b64encode(hashlib.sha256(body).digest()).decode().rstrip("=")
    if not hmac.compare_digest(digest, claims.body_hash.rstrip("=")):
        raise Refused("the body is not the one the token was signed for")


def _check_times(claims: dict[str, object], now: float) -> None:
    exp, nbf = claims.get("exp"), claims.get("nbf")
    if not isinstance(exp, int | float) or not isinstance(nbf, int | float):
        raise Refused("the token has no exp or nbf claim")
    if now > exp + LEEWAY_SECONDS:
        raise Refused(f"the token expired {int(now - exp)} s ago")
    if now + LEEWAY_SECONDS < nbf:
        raise Refused(f"the token is not valid for another {int(nbf - now)} s")


def _check_url(sub: str, host: str | None, path: str, query: str) -> None:
    expected = os.environ.get(URL_ENV, "").strip()
    if expected:
        if sub != expected:
            raise Refused(f"the token was signed for {sub!r}, not {URL_ENV}={expected!r}")
        return
    url = urlsplit(sub)
    same_host = host is not None and url.netloc.lower() == host.lower()
    if url.scheme not in ("http", "https") or not same_host or not url.path.endswith(path) \
            or url.query != query:  # fmt: skip
        raise Refused(
            f"the token was signed for {sub!r}, not this endpoint ({host}{path}); behind a "
            f"proxy that rewrites the URL set {URL_ENV} to the URL QStash calls"
        )


def _b64(text: str) -> bytes:
    try:
        return base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError):
        raise Refused("the Upstash-Signature header is not a JWT") from None


def _json(part: str, name: str) -> dict[str, object]:
    try:
        value = json.loads(_b64(part))
    except ValueError:
        raise Refused(f"the token's {name} is not JSON") from None
    if not isinstance(value, dict):
        raise Refused(f"the token's {name} is not a JSON object")
    return value
