"""The guide's bookings app as a Django project, with tickq running its Tasks.

The database comes from $BOOKINGS_DATABASE_URL (sqlite:///path or postgresql://...),
default db.sqlite3 here.
"""

import os
from pathlib import Path
from urllib.parse import unquote, urlsplit

BASE_DIR = Path(__file__).resolve().parent.parent
SECRET_KEY = os.environ.get("DJANGO_SECRET_KEY", "only-for-the-example-not-for-production")
DEBUG = False
ALLOWED_HOSTS = ["*"]
USE_TZ = True
TIME_ZONE = "UTC"
ROOT_URLCONF = "bookings_site.urls"
DEFAULT_AUTO_FIELD = "django.db.models.BigAutoField"

INSTALLED_APPS = [
    "django.contrib.contenttypes",
    "django.contrib.auth",
    "tickq.contrib.django",
    "bookings",
]
if os.environ.get("BOOKINGS_TEST_TASKS"):  # the tests' tasks too (dj_tests/tasks.py)
    INSTALLED_APPS.append("dj_tests")
try:
    import django.tasks  # noqa: F401  (Django 6+)
except ImportError:
    INSTALLED_APPS.append("django_tasks")  # the backport, on Django 5.2

MIDDLEWARE = ["django.middleware.csrf.CsrfViewMiddleware"]

TASKS = {
    "default": {
        "BACKEND": "tickq.contrib.django.TickqBackend",
        "QUEUES": ["default", "emails"],
        "OPTIONS": {"DATABASE": "default"},
    }
}


def database(url: str) -> dict:
    parts = urlsplit(url)
    if parts.scheme == "sqlite":
        name = parts.path[1:]  # sqlite:///rel.db or sqlite:////abs/path.db
        return {"ENGINE": "django.db.backends.sqlite3", "NAME": name,
                "TEST": {"NAME": f"{name}-test"}}  # fmt: skip
    options = {"options": unquote(parts.query.split("options=", 1)[1])} if parts.query else {}
    return {
        "ENGINE": "django.db.backends.postgresql", "NAME": parts.path.lstrip("/"),
        "USER": unquote(parts.username or ""), "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname or "", "PORT": parts.port or "", "OPTIONS": options,
    }  # fmt: skip


DATABASES = {
    "default": database(
        os.environ.get("BOOKINGS_DATABASE_URL", f"sqlite:///{BASE_DIR / 'db.sqlite3'}")
    )
}
