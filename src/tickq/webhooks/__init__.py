"""Receive webhooks as tickq jobs: ``@q.webhook(path, verify=...)``.

.. code-block:: python

    from tickq.webhooks import StandardWebhooks, Stripe, GitHub, HMAC

    @q.webhook("/hooks/payments", verify=Stripe(secret=os.environ["STRIPE_WEBHOOK_SECRET"]))
    def payment_event(event: dict) -> None:  # an ordinary tickq job (retries, alerts)
        ...

The endpoint (on ``q.asgi_app()``, ``q.wsgi_app()``, ``q.flask_blueprint()``,
``q.fastapi_router()`` and ``q.django_urls()``) checks the signature over the raw body,
stores the job under the provider's event id and answers 200 before any work runs; a
redelivered event is acknowledged and not run again. See docs/webhooks.md.
"""

from __future__ import annotations

from .verifiers import HMAC, GitHub, StandardWebhooks, Stripe, Verifier, WebhookRejected

__all__ = ["HMAC", "GitHub", "StandardWebhooks", "Stripe", "Verifier", "WebhookRejected"]
