"""tickq's tables, created (and later upgraded) by tickq's own migrations."""

from __future__ import annotations

from typing import Any

from django.db import migrations


def migrate_tickq(apps: Any, schema_editor: Any) -> None:
    from tickq.contrib.django.schema import migrate_alias

    migrate_alias(schema_editor.connection.alias)


class Migration(migrations.Migration):
    # tickq migrates on its own connection: Django must not hold the database (SQLite) in a
    # transaction meanwhile. tickq's migrations are idempotent and safe to run concurrently.
    atomic = False
    initial = True
    dependencies: list[tuple[str, str]] = []
    operations = [migrations.RunPython(migrate_tickq, migrations.RunPython.noop, elidable=False)]
