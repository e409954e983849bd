"""WSGI entry point: ``gunicorn --threads 4 bookings_site.wsgi`` (or any WSGI server)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "bookings_site.settings")
application = get_wsgi_application()
