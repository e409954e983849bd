"""Count real client-server round trips with a loopback TCP proxy in front of Postgres.

A round trip is counted each time the server answers after the client last spoke:
statements psycopg pipelines into one write count once, as they cost one wait on the
network, and a message nobody answers (the client's goodbye) costs none. It needs no
server extension (``pg_stat_statements``) and no access to server logs, and sees every
connection any process makes through it, so it counts a cold ``tickq tick`` process
(connection set-up included) as well.
"""

from __future__ import annotations

import socket
import threading
from contextlib import suppress
from urllib.parse import SplitResult, urlsplit, urlunsplit


class RoundTripProxy:
    """Forward 127.0.0.1:<port> to the server; ``count`` is round trips so far."""

    def __init__(self, url: str) -> None:
        parts = urlsplit(url)
        self.target = (parts.hostname or "127.0.0.1", parts.port or 5432)
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.url = urlunsplit(parts._replace(netloc=self._netloc(parts)))
        self.count = 0
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, daemon=True, name="roundtrip-proxy").start()

    def _netloc(self, parts: SplitResult) -> str:
        userinfo = parts.netloc.rpartition("@")[0]
        return f"{userinfo + '@' if userinfo else ''}127.0.0.1:{self.port}"

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            server = socket.create_connection(self.target)
            for s in (client, server):
                s.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            turn = {"client_spoke_last": False}
            threading.Thread(
                target=self._pump, args=(client, server, turn, True), daemon=True
            ).start()
            threading.Thread(
                target=self._pump, args=(server, client, turn, False), daemon=True
            ).start()

    def _pump(
        self, src: socket.socket, dst: socket.socket, turn: dict[str, bool], from_client: bool
    ) -> None:
        try:
            while data := src.recv(65536):
                with self._lock:
                    if not from_client and turn["client_spoke_last"]:
                        self.count += 1  # before forwarding: the client is still waiting
                    turn["client_spoke_last"] = from_client
                dst.sendall(data)
        except OSError:
            pass
        finally:
            with suppress(OSError):
                dst.shutdown(socket.SHUT_WR)  # pass the end of the stream on
            src.close()

    def close(self) -> None:
        self.listener.close()
