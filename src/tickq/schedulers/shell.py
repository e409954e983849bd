"""The one command every HTTP target runs, and the one every local target runs.

The curl call reads the token from an environment variable and hands it to curl on stdin
(``--header @-``), so it never appears on a command line that ``ps`` can show. The script
uses no single quotes, so targets can wrap it in ``sh -c '...'``.
"""

from __future__ import annotations

import shlex
import sys

from ..errors import ConfigurationError
from .options import SAFE_WORD, SchedulerOptions

ATTEMPT_SECONDS = 60
CURL_RETRIES = f"--retry 3 --retry-all-errors --retry-max-time 120 --max-time {ATTEMPT_SECONDS}"
# Bounds a whole call: a minute per attempt and two minutes of retrying, plus slack.
CALL_SECONDS = 240


def require_env(*names: str, where: str, indent: int | None = None) -> str:
    """Fail at once, naming the variable, when a secret didn't reach the environment."""
    checks = [f': "${{{name}:?is not set: {where}}}"' for name in names]
    return "; ".join(checks) if indent is None else f"\n{' ' * indent}".join(checks)


def curl_tick(options: SchedulerOptions, target: str, indent: int | None = None) -> str:
    """POST the strict tick with the bearer token; a failed tick makes this exit non-zero.

    With ``indent`` the command is spread over lines (continued with ``\\``), each further
    line indented by that many spaces; otherwise it is one line.
    """
    url, token = options.url_secret, options.token_secret
    parts = (
        f'printf "Authorization: Bearer %s" "${{{token}}}" |',
        "curl --silent --show-error --fail-with-body",
        CURL_RETRIES,
        f'--user-agent tickq-scheduler/{target} --data "" --header @-',
        f'"${{{url}}}{options.tick_path}"',
    )
    if indent is None:
        return " ".join(parts)
    return parts[0] + f"\n{' ' * indent}" + f" \\\n{' ' * (indent + 2)}".join(parts[1:])


def local_tick(options: SchedulerOptions, default: str | None = None) -> str:
    """``tickq tick APP --strict``: one tick on this machine, non-zero exit on failure."""
    assert options.local_app is not None
    return f"{options.tickq or default or this_tickq()} tick {options.local_app} --strict"


def this_tickq() -> str:
    """The tickq of the Python running now: right for the machine generating its own cron."""
    if not SAFE_WORD.fullmatch(sys.executable):
        raise ConfigurationError(
            f"the path of this Python ({sys.executable!r}) can't be written unquoted into a "
            "schedule: pass --tickq with the command that runs tickq, e.g. /srv/app/.venv/bin/tickq"
        )
    return shlex.join([sys.executable, "-m", "tickq"])
