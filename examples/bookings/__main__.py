"""Serve the bookings app: ``python -m examples.bookings --port 8000`` in a checkout,
``python -m tickq.demo --port 8000`` where tickq is installed (``pip install 'tickq[demo]'``).

Environment: ``DATABASE_URL`` (default ``sqlite:///bookings.db``), ``CRON_SECRET`` (the
tick endpoint's token), optional ``SMTP_URL``, ``EMAIL_FAIL_FOR``, ``TICKQ_ALERT_*``.
``--clock-file`` shares a fast-forwardable clock with end-to-end tests.
"""

from __future__ import annotations

import argparse
import contextlib

from werkzeug.serving import make_server


def main() -> None:
    parser = argparse.ArgumentParser(prog=f"python -m {__package__}")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--clock-file", help="tickq.testing.SharedClock file (tests only)")
    args = parser.parse_args()

    from . import app as bookings

    if args.clock_file:
        from tickq.testing import SharedClock

        bookings.q.clock = SharedClock(args.clock_file)
    bookings.migrate()
    server = make_server(args.host, args.port, bookings.app, threaded=True)
    print(f"bookings app on http://{args.host}:{server.port}", flush=True)
    with contextlib.suppress(KeyboardInterrupt):
        server.serve_forever()


if __name__ == "__main__":
    main()
