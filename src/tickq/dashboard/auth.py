"""Who may see the dashboard: a signed session cookie, CSRF tokens, a bounded login rate."""

from __future__ import annotations

import hashlib
import hmac
import os
import secrets
import threading
import time
from collections.abc import Callable

SESSION_COOKIE = "tickq_session"
CSRF_COOKIE = "tickq_csrf"
CSRF_FIELD = "csrf_token"
SESSION_SECONDS = 12 * 3600


def derive_key(password: str | None, secret: str | None) -> bytes:
    """The signing key: from ``secret`` when given, else from the password (changing it
    logs everyone out), else random for this process (sessions and forms then last only
    as long as the process)."""
    if secret:
        material = b"secret:" + secret.encode()
    elif password:
        material = b"password:" + password.encode()
    else:
        return secrets.token_bytes(32)
    return hashlib.sha256(b"tickq-dashboard-key\x00" + material).digest()


def sign(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def new_session(key: bytes, now: float) -> str:
    expires = str(int(now) + SESSION_SECONDS)
    return f"{expires}.{sign(key, 'session:' + expires)}"


def valid_session(key: bytes, value: str | None, now: float) -> bool:
    if not value or "." not in value:
        return False
    expires, _, signature = value.partition(".")
    if not expires.isdigit() or int(expires) < now:
        return False
    return hmac.compare_digest(signature, sign(key, "session:" + expires))


def new_nonce() -> str:
    return secrets.token_hex(16)


def csrf_token(key: bytes, nonce: str) -> str:
    return sign(key, "csrf:" + nonce)


def valid_csrf(key: bytes, nonce: str | None, token: str | None) -> bool:
    if not nonce or not token:
        return False
    return hmac.compare_digest(token, csrf_token(key, nonce))


def same_password(given: str, expected: str) -> bool:
    digest = hashlib.sha256
    return hmac.compare_digest(digest(given.encode()).digest(), digest(expected.encode()).digest())


class LoginLimiter:
    """At most ``per_client`` failed logins per client and ``overall`` in all, per
    ``window`` seconds (in this process); a successful login clears the client's count."""

    def __init__(
        self,
        per_client: int = 5,
        overall: int = 50,
        window: float = 60.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.per_client, self.overall, self.window, self.clock = per_client, overall, window, clock
        self._failures: dict[str, list[float]] = {}
        self._lock = threading.Lock()

    def wait(self, client: str) -> float:
        """Seconds before ``client`` may try again; 0: it may try now."""
        with self._lock:
            now = self.clock()
            self._forget(now)
            mine = self._failures.get(client, [])
            everyone = [t for times in self._failures.values() for t in times]
            waits = [0.0]
            if len(mine) >= self.per_client:
                waits.append(mine[-self.per_client] + self.window - now)
            if len(everyone) >= self.overall:
                waits.append(sorted(everyone)[-self.overall] + self.window - now)
            return max(waits)

    def failed(self, client: str) -> None:
        with self._lock:
            self._failures.setdefault(client, []).append(self.clock())

    def succeeded(self, client: str) -> None:
        with self._lock:
            self._failures.pop(client, None)

    def _forget(self, now: float) -> None:
        for client in list(self._failures):
            kept = [t for t in self._failures[client] if t > now - self.window]
            if kept:
                self._failures[client] = kept
            else:
                del self._failures[client]


def env_password() -> str | None:
    return os.environ.get("TICKQ_DASHBOARD_PASSWORD") or None


def env_secret() -> str | None:
    return os.environ.get("TICKQ_DASHBOARD_SECRET") or None
