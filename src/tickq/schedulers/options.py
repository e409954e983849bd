"""What every target needs to know, checked once, with messages that name the value at fault.

Secrets are referenced by NAME only. A value that looks like the secret itself (a token, a
URL) is refused without being echoed back, so it doesn't end up in a file or a log either.
"""

from __future__ import annotations

import math
import posixpath
import re
from collections import Counter
from dataclasses import dataclass, field

from ..errors import ConfigurationError
from .timing import Timing

SECRET_NAME = re.compile(r"[A-Z][A-Z0-9_]*")
APP_SPEC = re.compile(r"[A-Za-z_][\w.]*:[A-Za-z_][\w.]*")
JOB_NAME = re.compile(r"[a-z0-9]([-a-z0-9]{0,50}[a-z0-9])?")
# Paths and commands are written into shell, unit and YAML text: allow no quoting tricks.
SAFE_WORD = re.compile(r"[\w./@+-]+")
URL_PATH = re.compile(r"/[\w./~-]*")
MIN_TOKEN_LENGTH = 16


@dataclass(frozen=True)
class SchedulerOptions:
    """Everything a target's configuration depends on.

    ``timing`` says when to call; ``url_secret`` and ``token_secret`` name the secrets that
    hold the app's base URL and the bearer token; ``path`` is the tick endpoint's path;
    ``name`` names the job, unit or workflow. ``local_app`` (``module:attr``) makes
    crontab, systemd and render run ``tickq tick APP`` on the machine instead of calling
    over HTTP; ``tickq``, ``workdir``, ``env_file`` and ``user`` say how.
    """

    timing: Timing = field(default_factory=lambda: Timing.every(15))
    url_secret: str = "TICKQ_TICK_URL"
    token_secret: str = "CRON_SECRET"
    path: str = "/api/cron/tick"
    name: str = "tickq-tick"
    local_app: str | None = None
    tickq: str | None = None
    workdir: str | None = None
    env_file: str = "/etc/tickq/tick.env"
    user: str | None = None

    def __post_init__(self) -> None:
        check_secret_name("--url-secret", self.url_secret)
        check_secret_name("--token-secret", self.token_secret)
        check_path(self.path)
        if not JOB_NAME.fullmatch(self.name):
            raise ConfigurationError(
                f"--name {self.name!r} must be lower-case letters, digits and dashes "
                "(at most 52, e.g. tickq-tick): it names a workflow, job or unit"
            )
        if self.local_app is not None and not APP_SPEC.fullmatch(self.local_app):
            raise ConfigurationError(
                f"--local {self.local_app!r} must name your Queue as module:attribute, "
                "e.g. myapp.jobs:q"
            )
        for option in ("tickq", "workdir", "user"):
            if getattr(self, option) is not None and self.local_app is None:
                raise ConfigurationError(f"--{option} only applies with --local APP")
        check_words("--tickq", self.tickq)
        check_words("--workdir", self.workdir, single=True)
        check_words("--env-file", self.env_file, single=True)
        check_words("--user", self.user, single=True)

    @property
    def tick_path(self) -> str:
        """The path a scheduler calls: strict, so a failed tick is a failed call."""
        return f"{self.path}?strict=1"

    @property
    def health_path(self) -> str:
        """The health endpoint beside the tick (``/api/cron/tick`` -> ``/api/cron/health``)."""
        return posixpath.join(posixpath.dirname(self.path), "health")


def check_secret_name(option: str, value: str) -> None:
    """Refuse anything but a secret's NAME, explaining why when it looks like a value."""
    looks_like = literal_kind(value)
    if looks_like:
        raise ConfigurationError(
            f"{option} got what looks like {looks_like} ({redacted(value)}), not the NAME "
            "of a secret: never write a secret's value into a configuration file. Store the "
            "value in the platform's secret store and pass its name, e.g. "
            f"{option} {'TICKQ_TICK_URL' if option == '--url-secret' else 'CRON_SECRET'}"
        )
    if not SECRET_NAME.fullmatch(value):
        # Not echoed either: a short token can fail this test rather than look like one.
        raise ConfigurationError(
            f"{option} is not a secret name ({redacted(value)}): use upper-case letters, "
            f"digits and underscores, starting with a letter, e.g. "
            f"{'TICKQ_TICK_URL' if option == '--url-secret' else 'CRON_SECRET'}"
            if value
            else f"{option} is empty: give the name of a secret, e.g. CRON_SECRET"
        )


def literal_kind(value: str) -> str | None:
    """Describe ``value`` if it looks like a secret's value rather than a name, else None."""
    if "://" in value or value.startswith("www."):
        return "a URL"
    if value.lower().startswith("bearer "):
        return "a bearer token"
    if re.search(r"[:/=+.@\s]", value) and len(value) >= 8:
        return "a token or credential"
    if len(value) >= MIN_TOKEN_LENGTH and re.search(r"[a-z]", value) and re.search(r"\d", value):
        return "a token (long, mixed letters and digits)"
    if any(random_looking(part) for part in value.split("_")):
        return "a random token"
    return None


def random_looking(part: str) -> bool:
    """A long name segment full of digits, or with the entropy of random characters."""
    if len(part) < MIN_TOKEN_LENGTH:
        return False
    digits = sum(c.isdigit() for c in part)
    return digits >= 3 or (digits >= 1 and entropy(part) >= 3.5)


def entropy(text: str) -> float:
    counts = Counter(text)
    return -sum(n / len(text) * math.log2(n / len(text)) for n in counts.values())


def redacted(value: str) -> str:
    """How a refused value is shown: its length only, never any of its characters."""
    return f"{len(value)} characters, not shown"


def check_path(path: str) -> None:
    if "?" in path or "#" in path:
        raise ConfigurationError(
            f"--path {path!r} must be a bare path like /api/cron/tick: tickq adds ?strict=1 "
            "itself, and the token travels in the Authorization header, never in the URL"
        )
    if not URL_PATH.fullmatch(path):
        raise ConfigurationError(
            f"--path {path!r} must start with / and hold only letters, digits and ._~-/, "
            "e.g. /api/cron/tick"
        )


def check_words(option: str, value: str | None, single: bool = False) -> None:
    if value is None:
        return
    words = value.split()
    if not words or (single and len(words) > 1) or not all(map(SAFE_WORD.fullmatch, words)):
        raise ConfigurationError(
            f"{option} {value!r} may hold only letters, digits and ./@+-_ "
            f"{'(one word)' if single else 'separated by spaces'}: it is written into shell "
            "and unit files unquoted"
        )
