"""Internal: which database a ``Queue`` uses when given no URL (and never an empty one)."""

from __future__ import annotations

import os

from .errors import ConfigurationError
from .logger import log
from .redact import redact_url

DEFAULT_URL = "sqlite:///tickq.db"
DATABASE_ENV = "TICKQ_DATABASE_URL"


def database_url(url: str | None) -> str:
    """The URL given, else ``$TICKQ_DATABASE_URL``, else ``sqlite:///tickq.db``; never ''."""
    if url is not None:
        if not isinstance(url, str):
            raise ConfigurationError(
                f"the database URL must be a str like 'sqlite:///app.db', got {type(url).__name__}"
            )
        if not url.strip():
            raise ConfigurationError(
                f"the database URL is empty ({url!r}): pass one, e.g. Queue('sqlite:///app.db') "
                f"or Queue('postgresql://user@host:5432/db'), or call Queue() to read "
                f"${DATABASE_ENV} (else {DEFAULT_URL})"
            )
        return url.strip()
    found = os.environ.get(DATABASE_ENV)
    if found is not None and not found.strip():
        raise ConfigurationError(
            f"${DATABASE_ENV} is set but empty: set it to the database URL, or unset it to "
            f"use {DEFAULT_URL}"
        )
    if found:
        log.info("tickq uses the database in $%s: %s", DATABASE_ENV, redact_url(found.strip()))
        return found.strip()
    log.info("tickq uses %s (./tickq.db in %s): no URL given and $%s is not set",
             DEFAULT_URL, os.getcwd(), DATABASE_ENV)  # fmt: skip
    return DEFAULT_URL
