"""Signed calls already accepted (a QStash token's ``jti``), so a replay is refused."""

from __future__ import annotations

from .plumbing import Plumbing

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .plumbing import Statement


class TokenQueries(Plumbing):
    """The one write of replay protection: remember a token id until it expires."""

    def remember_token(self, jti: str, expires_at: float) -> bool:
        """Record ``jti`` until ``expires_at`` (epoch seconds); False when it was already
        recorded (a replay). Expired ids are forgotten in the same transaction."""
        now = self.now().timestamp()
        forget: Statement = ("forget_tokens", {"now_epoch": now})
        remember: Statement = ("remember_token", {"jti": jti, "expires_at": float(expires_at)})
        return bool(self._query_many([forget, remember])[1])
