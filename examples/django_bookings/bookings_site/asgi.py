"""ASGI entry point: ``uvicorn bookings_site.asgi:application`` (or any ASGI server)."""

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bookings_site.settings")
application = get_asgi_application()
