"""Alerts: tell someone when jobs fail, without storms and without blocking the work.

>>> from tickq.alerts import Webhook, Email
>>> q = Queue(url, alerts=[Webhook("https://hooks.example/abc", format="json"),
...                        Email(host="smtp.example", sender="jobs@example.com",
...                              to=["ops@example.com"])])

A log sink is always on. Failures of one job type are grouped per window into one alert
that says how many; alerts travel as tickq jobs, so delivery is durable and retried.
"""

from .alert import Alert
from .rules import ALERT_QUEUE, Alerts, configure_alerts
from .sinks import DeliveryError, Email, Sink, Webhook, sinks_from_env

__all__ = [
    "ALERT_QUEUE",
    "Alert",
    "Alerts",
    "DeliveryError",
    "Email",
    "Sink",
    "Webhook",
    "configure_alerts",
    "sinks_from_env",
]
