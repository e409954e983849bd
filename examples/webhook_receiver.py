"""Receive Stripe webhooks as tickq jobs: verified, stored once per event, then run.

Serve it (uvicorn, ``pip install 'tickq[web]'``)::

    STRIPE_WEBHOOK_SECRET=whsec_... uvicorn examples.webhook_receiver:app

and point Stripe (or ``stripe listen --forward-to localhost:8000/hooks/stripe``) at
``/hooks/stripe``. Run it as a script to watch it work: it serves itself on a free port,
sends a signed event three times (Stripe retries; the event runs once), a forged one and a
stale one, then runs the due jobs.
"""

import hashlib
import hmac
import json
import os
import secrets
import socket
import tempfile
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

from tickq import JobContext, Queue
from tickq.webhooks import Stripe

if __name__ == "__main__" and not os.environ.get("STRIPE_WEBHOOK_SECRET"):
    # The demo signs its own events, with a throwaway secret.
    os.environ["STRIPE_WEBHOOK_SECRET"] = "whsec_" + secrets.token_urlsafe(24)

db = os.environ.get("TICKQ_DATABASE_URL") or f"sqlite:///{Path(tempfile.mkdtemp()) / 'app.db'}"
q = Queue(db)
q.migrate()


@q.webhook("/hooks/stripe", verify=Stripe(secret=os.environ["STRIPE_WEBHOOK_SECRET"]))
def stripe_event(event: dict, ctx: JobContext) -> None:
    """An ordinary tickq job: retried with backoff if it raises, alerted on when it fails."""
    if event["type"] == "invoice.paid":
        invoice = event["data"]["object"]
        print(f"  invoice {invoice['id']} paid: {invoice['amount_paid']} (event {event['id']})")


app = q.asgi_app()


def send(base: str, body: bytes, signed_at: int, secret: str) -> tuple[int, str]:
    """POST ``body`` the way Stripe does: ``Stripe-Signature: t=...,v1=HMAC(t.body)``."""
    mac = hmac.new(secret.encode(), f"{signed_at}.".encode() + body, hashlib.sha256)
    request = urllib.request.Request(
        base + "/hooks/stripe",
        data=body,
        headers={"Stripe-Signature": f"t={signed_at},v1={mac.hexdigest()}",
                 "Content-Type": "application/json"},
    )  # fmt: skip
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as refused:
        return refused.code, refused.read().decode()


def serve() -> str:
    """Serve ``app`` on a free loopback port in a thread; return its base URL."""
    import uvicorn

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    while not server.started:
        time.sleep(0.01)
    return f"http://127.0.0.1:{sock.getsockname()[1]}"


def demo() -> None:
    base, secret, now = serve(), os.environ["STRIPE_WEBHOOK_SECRET"], int(time.time())
    invoice = {"id": "in_1", "amount_paid": 2000}
    event = {"id": "evt_1", "type": "invoice.paid", "data": {"object": invoice}}
    body = json.dumps(event).encode()
    for attempt in range(3):  # Stripe redelivers until it gets a 2xx, signing anew
        print(f"delivery {attempt + 1}:", *send(base, body, now + attempt, secret))
    print("forged:", *send(base, body, now, "whsec_not-the-secret"))
    print("stale: ", *send(base, body, now - 3600, secret))
    summary = q.process_jobs()
    print("processing due jobs:", summary)
    assert summary["succeeded"] == 1, summary


if __name__ == "__main__":
    demo()
