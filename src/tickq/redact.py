"""Internal: database URLs as they may be shown: in a ``repr``, a log line or an error message.

A URL's password (``user:password@``) and the values of query options that carry
credentials (``?password=``, ``sslpassword=``, tokens, keys) become ``***``. Split by hand:
``urllib.parse`` costs a waking host milliseconds of import.
"""

from __future__ import annotations

HIDDEN = "***"
SECRET_WORDS = ("pass", "secret", "token", "key", "auth", "cred")


def redact_url(url: str) -> str:
    """``postgresql://app:pw@db/app?password=pw`` -> ``postgresql://app:***@db/app?password=***``."""
    scheme, sep, rest = url.partition("://")
    if not sep:
        scheme, rest = "", url
    userinfo, host = "", rest
    if (first_at := rest.find("@")) != -1:
        # The user part ends at the last "@" before the path: a password may hold "@" or "?".
        end = rest.find("/", first_at)
        userinfo, _, host = rest[: len(rest) if end == -1 else end].rpartition("@")
        host += rest[len(userinfo) + 1 + len(host) :]
        user, colon, _ = userinfo.partition(":")
        userinfo = f"{user}{colon and ':' + HIDDEN}@"
    # Options after the first "?" either way, should that "@" have been in the query.
    location, qmark, query = f"{userinfo}{host}".partition("?")
    if qmark:
        query = "&".join(_redact_option(option) for option in query.split("&"))
    return f"{scheme}{sep}{location}{qmark}{query}"


def _redact_option(option: str) -> str:
    name, equals, value = option.partition("=")
    if equals and value and any(word in name.lower() for word in SECRET_WORDS):
        return f"{name}={HIDDEN}"
    return option


def redact_text(text: str) -> str:
    """Any text (an error line, a command line) with every URL's password and every
    credential-looking ``name=value`` hidden: ``password=S3cret host=h`` (a libpq
    key/value string) -> ``password=*** host=h``."""
    import re  # argparse, which every caller has loaded, imports it anyway

    text = re.sub(r"[A-Za-z][\w+.-]*://[^\s'\"]+", lambda m: redact_url(m[0]), text)
    return re.sub(
        rf"([\w-]*(?:{'|'.join(SECRET_WORDS)})[\w-]*)(\s*=\s*)('(?:[^'\\]|\\.)*'|[^\s&'\"]+)",
        lambda m: m[1] + m[2] + HIDDEN if m[3] != HIDDEN else m[0],
        text,
        flags=re.IGNORECASE,
    )


def url_location(url: str) -> str:
    """Where a database URL points, for an operator's log: ``host:port/db``, no user."""
    rest = url.partition("://")[2] or url
    return rest.rpartition("@")[2].partition("?")[0]
