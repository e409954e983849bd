"""Who may see the dashboard: the password (kept as a salted scrypt hash), sessions kept in
the database, CSRF tokens bound to them, and a login limit every process shares.

Nothing handed to a browser before it logs in depends on the password: tokens are signed
with a random key of this install (stored in ``tickq_dashboard_keys``), salted with the
explicit secret when one is set, so a captured page lets nobody test guesses offline.
"""

from __future__ import annotations

import hashlib
import hmac
import ipaddress
import os
import secrets
import threading
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ..errors import ConfigurationError

if TYPE_CHECKING:
    from ..store import SqlStore

SESSION_COOKIE = "tickq_session"
DEVICE_COOKIE = "tickq_device"
DEVICE_SECONDS = 400 * 86400  # the longest a browser keeps a cookie
CSRF_COOKIE = "tickq_csrf"
CSRF_FIELD = "csrf_token"
SESSION_SECONDS = 12 * 3600
MIN_PASSWORD = 12
MAKE_ONE = 'python -c "import secrets; print(secrets.token_urlsafe(24))"'
SCRYPT_COST = {"n": 2**14, "r": 8, "p": 1, "dklen": 32}
"""Tens of milliseconds and 16 MB a guess: what one login costs the server, and an attacker
who stole the hash, each guess."""
KEY_NAME = "signing"


def check_password(password: str, source: str) -> None:
    """Refuse a password too short to stand against guessing (its value is never shown)."""
    if len(password) < MIN_PASSWORD:
        raise ConfigurationError(
            f"the dashboard password ({source}) has {len(password)} characters; it needs at "
            f"least {MIN_PASSWORD}: make a random one with {MAKE_ONE} and set it as "
            "TICKQ_DASHBOARD_PASSWORD"
        )


Network = ipaddress.IPv4Network | ipaddress.IPv6Network
Address = ipaddress.IPv4Address | ipaddress.IPv6Address
KNOWN_DEVICE = "device:"
"""How the login limit's count names a browser that logged in before (its device cookie)."""


def check_proxies(proxies: Sequence[str]) -> tuple[Network, ...]:
    """The addresses or networks (``10.0.0.0/8``) of ``trusted_proxies``, each checked."""
    if isinstance(proxies, str):
        proxies = [proxies]
    networks = []
    for text in proxies:
        try:
            network = ipaddress.ip_network(str(text).strip())
        except ValueError:
            raise ConfigurationError(
                "trusted_proxies must be IP addresses or networks of your reverse proxies "
                f"(like 10.0.0.5 or 10.0.0.0/8), got {text!r}"
            ) from None
        networks.append(_unmapped(network))
    return tuple(networks)


def _unmapped(network: Network) -> Network:
    """An IPv4-mapped IPv6 network as the IPv4 one: ``::ffff:10.0.0.0/104`` is 10.0.0.0/8."""
    if isinstance(network, ipaddress.IPv6Network) and network.prefixlen >= 96:
        mapped = network.network_address.ipv4_mapped
        if mapped is not None:
            return ipaddress.IPv4Network((mapped, network.prefixlen - 96))
    return network


def ip_of(text: str) -> Address | None:
    """``text`` as an IP address, an IPv4-mapped IPv6 one (``::ffff:1.2.3.4``) as the IPv4
    address it is; None if it is no address."""
    try:
        address = ipaddress.ip_address(text.strip())
    except ValueError:
        return None
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def client_address(peer: str, forwarded_for: str, trusted: Sequence[Network]) -> str:
    """Who is asking: the peer, unless it is a trusted proxy; then the nearest address in
    ``X-Forwarded-For`` that is not one (addresses further left are the client's say)."""

    def is_trusted(text: str) -> bool:
        address = ip_of(text)
        return address is not None and any(address in network for network in trusted)

    chosen = peer
    if is_trusted(peer):
        hops = [h.strip() for h in forwarded_for.split(",") if h.strip()]
        chosen = next((hop for hop in reversed(hops) if not is_trusted(hop)), peer)
    address = ip_of(chosen)
    return str(address) if address is not None else chosen[:100]


def limit_key(address: str) -> str:
    """What the login limit counts for a client address: an IPv4 address as it is, an IPv6
    one as its /64 (one subscriber holds a whole /64, and may use any address in it)."""
    ip = ip_of(address)
    if isinstance(ip, ipaddress.IPv6Address):
        return str(ipaddress.IPv6Network((int(ip) >> 64 << 64, 64)))
    return str(ip) if ip is not None else address[:100]


def sign(key: bytes, text: str) -> str:
    return hmac.new(key, text.encode(), hashlib.sha256).hexdigest()


def same(given: str | None, expected: str) -> bool:
    return bool(given) and hmac.compare_digest(str(given).encode(), expected.encode())


def new_nonce() -> str:
    return secrets.token_hex(16)


def good_nonce(value: str | None) -> bool:
    return value is not None and len(value) == 32 and all(c in "0123456789abcdef" for c in value)


def session_id(token: str) -> str:
    """What the database keeps of a session cookie: its SHA-256, never the token."""
    return hashlib.sha256(b"tickq-session\x00" + token.encode()).hexdigest()


class Access:
    """The install's signing key, the password's hash and the sessions, for one dashboard.

    The key and the password's hash are made on first use (the first request), since they
    need the database: until then the password is held as given, then only as its scrypt
    hash salted with this install's key.
    """

    def __init__(
        self, store: SqlStore, password: str | None, secret: str | None,
        now: Callable[[], float],
    ) -> None:  # fmt: skip
        self.store, self.now = store, now
        self._password, self._secret = password, secret
        self._key: bytes | None = None
        self._hash, self._salt, self._tag = b"", b"", ""
        self._lock = threading.Lock()

    @property
    def has_password(self) -> bool:
        return self._password is not None or bool(self._hash)

    def key(self) -> bytes:
        """The signing key: this install's random key, salted with the secret if set."""
        if self._key is None:
            with self._lock:
                if self._key is None:
                    self._key = self._load_key()
        return self._key

    def _load_key(self) -> bytes:
        made = secrets.token_hex(32)
        stored = bytes.fromhex(self.store.dashboard_key(KEY_NAME, made, self.now()))
        key = stored
        if self._secret:  # salted with the install's key: staging's sessions fail on production
            key = hmac.new(
                self._secret.encode(), b"tickq-dashboard\x00" + stored, "sha256"
            ).digest()
        if self._password is not None:
            self._salt = _salt(stored)
            self._hash = _slow_hash(self._password, self._salt)
            self._tag = sign(key, "password:" + self._hash.hex())
            self._password = None
        return key

    def password_ok(self, given: str) -> bool:
        self.key()
        if not self._hash:
            return False
        return hmac.compare_digest(_slow_hash(given, self._salt), self._hash)

    # -- sessions -----------------------------------------------------------------------
    def open_session(self) -> str:
        """A new session's cookie value (a random token; the database keeps its hash)."""
        self.key()
        token, now = secrets.token_urlsafe(32), self.now()
        self.store.open_dashboard_session(session_id(token), self._tag, now, now + SESSION_SECONDS)
        return token

    def session_ok(self, token: str | None) -> bool:
        if not token or len(token) > 100:
            return False
        self.key()
        return self.store.dashboard_session_alive(session_id(token), self._tag, self.now())

    def close_session(self, token: str | None) -> None:
        if token and len(token) <= 100:
            self.store.close_dashboard_session(session_id(token))

    def close_all(self) -> int:
        return self.store.close_dashboard_sessions()

    # -- known devices --------------------------------------------------------------------
    def new_device(self) -> str:
        """A cookie value naming a browser that logged in: a random id signed for the
        password it logged in with (a new password, or a new secret, forgets every one)."""
        device = secrets.token_hex(16)
        return f"{device}.{sign(self.key(), self._device_text(device))}"

    def known_device(self, value: str | None) -> str | None:
        """The id of the device cookie ``value`` if this dashboard issued it, else None."""
        device, _, mac = (value or "").partition(".")
        if len(device) != 32 or not good_nonce(device):
            return None
        return device if same(mac, sign(self.key(), self._device_text(device))) else None

    def _device_text(self, device: str) -> str:
        return f"device:{self._tag}:{device}"

    # -- CSRF ---------------------------------------------------------------------------
    def login_token(self, nonce: str) -> str:
        """The login form's token: bound to the browser's nonce cookie, not the password."""
        return sign(self.key(), "login:" + nonce)

    def session_token(self, token: str) -> str:
        """The forms' token of one session: changes with every login."""
        return sign(self.key(), "csrf:" + session_id(token))

    def nonce_token(self, nonce: str) -> str:
        """The forms' token when the host app's ``auth`` hook decides (no session of ours)."""
        return sign(self.key(), "form:" + nonce)


def _salt(stored_key: bytes) -> bytes:
    return hashlib.sha256(b"tickq-dashboard-password-salt\x00" + stored_key).digest()


def _slow_hash(password: str, salt: bytes) -> bytes:
    return hashlib.scrypt(password.encode(), salt=salt, maxmem=64 * 1024 * 1024, **SCRYPT_COST)


class LoginLimiter:
    """At most ``per_client`` failed logins per client per ``window`` seconds, counted in
    the database so every process serving the dashboard shares the count; a successful
    login clears the client's count. A client is an IPv4 address, an IPv6 /64, or a
    browser that logged in before (its signed device cookie, whatever its address).

    Past ``overall`` attempts in a window from clients not known (a flood), a client that
    already failed in the window must wait, and the ones that have not share a budget of
    ``overall`` more attempts, after which they wait too; a known browser is never held up
    by the flood, so the flood cannot lock out the people who use the dashboard. At most
    ``2 * overall`` passwords from unknown clients are checked per window, whatever number
    of addresses they come from. ``clock`` (epoch seconds) defaults to the queue's clock.
    """

    def __init__(
        self,
        per_client: int = 5,
        overall: int = 50,
        window: float = 60.0,
        clock: Callable[[], float] | None = None,
    ) -> None:
        for name, value in (("per_client", per_client), ("overall", overall), ("window", window)):
            if value <= 0:
                raise ConfigurationError(f"LoginLimiter {name} must be positive, got {value}")
        self.per_client, self.overall, self.window, self.clock = per_client, overall, window, clock

    def start(self, store: SqlStore, client: str, now: float) -> float:
        """Record an attempt of ``client`` (a ``limit_key``, or ``KNOWN_DEVICE`` and the
        device's id) about to be checked; the seconds it must wait first (then nothing is
        written), or 0. A failed attempt stays counted."""
        since = now - self.window
        mine, oldest, everyone = store.login_counts(client, since)  # a refusal writes nothing
        if wait := self._wait(client, mine + 1, everyone + 1, oldest, now):
            return wait
        attempt = secrets.token_hex(16)
        mine, oldest, everyone = store.start_login(attempt, client, now, since)
        if wait := self._wait(client, mine, everyone, oldest, now):  # others came at once
            store.forget_login(attempt)
        return wait

    def _wait(
        self, client: str, mine: int, everyone: int, oldest: float | None, now: float
    ) -> float:
        """The seconds ``client`` must wait, counts including its attempt at hand (0: none)."""
        refused = mine > self.per_client
        if not client.startswith(KNOWN_DEVICE) and everyone > self.overall:
            refused = refused or mine > 1 or everyone > 2 * self.overall
        if not refused:
            return 0.0
        return max((oldest if oldest is not None else now) + self.window - now, 1.0)

    def succeeded(self, store: SqlStore, client: str) -> None:
        store.clear_logins(client)


def env_password() -> str | None:
    return os.environ.get("TICKQ_DASHBOARD_PASSWORD") or None


def env_secret() -> str | None:
    return os.environ.get("TICKQ_DASHBOARD_SECRET") or None
