"""``tickq dashboard APP``: the web dashboard on its own port."""

from __future__ import annotations

import argparse

from ..errors import ConfigurationError
from .app import add_app_argument, load_app
from .tables import port_number


def register(subparsers: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = subparsers.add_parser(
        "dashboard",
        help="serve the web dashboard (needs TICKQ_DASHBOARD_PASSWORD)",
        description="Serve the web dashboard at http://HOST:PORT/tickq/. It needs "
        "TICKQ_DASHBOARD_PASSWORD (at least 12 characters; a long random value) and refuses "
        "to start without it.",
    )
    add_app_argument(parser)
    parser.add_argument("--host", default="127.0.0.1", help="address to listen on "
                        "(default 127.0.0.1; use 0.0.0.0 only behind HTTPS)")  # fmt: skip
    parser.add_argument("--port", type=port_number, default=8080, help="port (default 8080)")
    parser.add_argument(
        "--read-only", action="store_true",
        help="show everything, allow no action (retry, cancel, delete)",
    )  # fmt: skip
    parser.add_argument(
        "--trusted-proxy", action="append", default=[], metavar="ADDRESS",
        help="IP address or network (10.0.0.0/8) of reverse proxies in front of the dashboard "
        "whose X-Forwarded-For names the client (repeatable; default none: X-Forwarded-For "
        "is ignored)",
    )  # fmt: skip
    parser.add_argument(
        "--logout-everywhere", action="store_true",
        help="end every dashboard session (every browser must log in again) and exit",
    )  # fmt: skip
    parser.set_defaults(handler=run_dashboard)


def run_dashboard(args: argparse.Namespace) -> int:
    from ..dashboard import Dashboard
    from ..dashboard.render import environment
    from ..web.asgi import AsgiApp

    if args.logout_everywhere:
        return logout_everywhere(args)
    dashboard = Dashboard(load_app(args.app), read_only=args.read_only,
                          trusted_proxies=args.trusted_proxy)  # fmt: skip
    problem = dashboard.problem()
    if problem is not None:
        raise ConfigurationError(problem.replace("is closed", "will not start"))
    environment()  # Jinja2 missing: say so now, not on the first page
    try:
        import uvicorn
    except ImportError:
        raise ConfigurationError(
            "tickq dashboard needs uvicorn: pip install 'tickq[dashboard]'"
        ) from None
    print(f"tickq dashboard on http://{args.host}:{args.port}{dashboard.prefix}/", flush=True)
    # proxy_headers=False: uvicorn would otherwise take X-Forwarded-For from 127.0.0.1 as
    # the client, letting anyone behind a local proxy pick the address the login limit counts.
    uvicorn.run(AsgiApp(dashboard), host=args.host, port=args.port,
                log_level="warning", proxy_headers=False)  # fmt: skip
    return 0


def logout_everywhere(args: argparse.Namespace) -> int:
    ended = load_app(args.app)._store.close_dashboard_sessions()
    print(f"ended {ended} dashboard session{'s' if ended != 1 else ''}: every browser must "
          "log in again", flush=True)  # fmt: skip
    return 0
