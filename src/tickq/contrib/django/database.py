"""The tickq database URL of a Django database alias (tickq opens its own connections to it)."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote

from ...errors import ConfigurationError

ENGINES = {
    "django.db.backends.sqlite3": "sqlite",
    "django.db.backends.postgresql": "postgres",
}


def database_url(alias: str) -> str:
    """``sqlite:///path`` or ``postgresql://...`` for ``DATABASES[alias]`` as Django uses it
    now (a test run's test database included)."""
    from django.db import connections

    if alias not in connections.settings:
        raise ConfigurationError(
            f"TASKS OPTIONS DATABASE {alias!r} is not in DATABASES "
            f"(known: {', '.join(connections.settings)})"
        )
    settings = connections[alias].settings_dict
    kind = ENGINES.get(settings["ENGINE"])
    if kind == "sqlite":
        return _sqlite_url(alias, str(settings["NAME"]))
    if kind == "postgres":
        return _postgres_url(settings)
    raise ConfigurationError(
        f"DATABASES[{alias!r}] uses {settings['ENGINE']}; tickq stores jobs in SQLite or "
        "PostgreSQL (django.db.backends.sqlite3 or django.db.backends.postgresql)"
    )


def _sqlite_url(alias: str, name: str) -> str:
    if name == ":memory:" or "mode=memory" in name or name.startswith("file:"):
        raise ConfigurationError(
            f"DATABASES[{alias!r}] is an in-memory SQLite database, which tickq's worker can't "
            "share; use a file (for tests: DATABASES[...]['TEST'] = {'NAME': 'test.db'})"
        )
    return f"sqlite:///{name}"


def _postgres_url(settings: dict[str, Any]) -> str:
    user = quote(settings.get("USER") or "", safe="")
    password = settings.get("PASSWORD") or ""
    auth = f"{user}:{quote(password, safe='')}@" if password else (f"{user}@" if user else "")
    host = settings.get("HOST") or ""
    port = f":{settings['PORT']}" if settings.get("PORT") else ""
    url = f"postgresql://{auth}{host}{port}/{quote(settings.get('NAME') or '', safe='')}"
    options = settings.get("OPTIONS") or {}
    extra = [f"{k}={quote(str(options[k]), safe='')}" for k in ("options", "sslmode")
             if options.get(k)]  # fmt: skip
    return f"{url}?{'&'.join(extra)}" if extra else url
