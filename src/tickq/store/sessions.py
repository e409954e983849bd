"""What the dashboard keeps in the database: the install's signing key, the sessions of
people logged in, and the login attempts its limiter counts, so every process serving
the dashboard agrees (migration 12)."""

from __future__ import annotations

from .plumbing import Plumbing


class SessionQueries(Plumbing):
    """Keys, sessions and login attempts of the dashboard (see ``tickq.dashboard.auth``)."""

    def dashboard_key(self, name: str, candidate: str, now: float) -> str:
        """The stored value of key ``name``; ``candidate`` becomes it if there is none yet
        (the first process to ask wins, every other one reads the winner's)."""
        params = {"name": name, "value": candidate, "now": now}
        rows = self._query_many([("dashboard_key_add", params), ("dashboard_key", params)])
        return str(rows[-1][0][0])

    def open_dashboard_session(self, id_: str, tag: str, now: float, expires: float) -> None:
        """Record a new session (and forget the expired ones)."""
        params = {"id": id_, "tag": tag, "now": now, "expires": expires}
        self._query_many([("dashboard_sessions_expired", params),
                          ("dashboard_session_open", params)])  # fmt: skip

    def dashboard_session_alive(self, id_: str, tag: str, now: float) -> bool:
        """Whether session ``id_`` exists, logged in with the password ``tag`` stands for,
        and has not expired at ``now``."""
        return bool(self._query("dashboard_session_alive", id=id_, tag=tag, now=now))

    def close_dashboard_session(self, id_: str) -> None:
        self._query("dashboard_session_close", id=id_)

    def close_dashboard_sessions(self) -> int:
        """End every dashboard session; returns how many there were."""
        return len(self._query("dashboard_sessions_close"))

    def login_counts(self, client: str, since: float) -> tuple[int, float | None, int]:
        """Read only: ``client``'s attempts since ``since``, when the oldest of them was
        made (None: none), and the attempts of every client not known by a device cookie."""
        mine, oldest, everyone = self._query("dashboard_login_counts", client=client,
                                             since=since)[0]  # fmt: skip
        return int(mine), (float(oldest) if oldest is not None else None), int(everyone)

    def start_login(
        self, id_: str, client: str, now: float, since: float
    ) -> tuple[int, float | None, int]:
        """Record login attempt ``id_`` of ``client`` (forgetting attempts older than
        ``since``), then count as ``login_counts`` does, this attempt included."""
        params = {"id": id_, "client": client, "now": now, "since": since}
        self._query_many([("dashboard_logins_old", params), ("dashboard_login_start", params)])
        # Counted after the attempt is committed, never in its transaction: of attempts
        # made at once, the last to count sees all the others, so they can't all slip
        # under the limit unseen (Postgres hides rows of transactions not yet committed).
        return self.login_counts(client, since)

    def forget_login(self, id_: str) -> None:
        """Forget one attempt (it was refused before its password was checked)."""
        self._query("dashboard_login_forget", id=id_)

    def clear_logins(self, client: str) -> None:
        """Forget ``client``'s attempts (it logged in)."""
        self._query("dashboard_login_clear", client=client)
