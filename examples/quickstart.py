"""tickq in five minutes: the guide's signup example on embedded SQLite.

Run it: python examples/quickstart.py
"""

import sqlite3
import tempfile
from pathlib import Path

from tickq import JobContext, Queue

db = Path(tempfile.mkdtemp()) / "app.db"
q = Queue(f"sqlite:///{db}")
q.migrate()  # creates tickq_jobs next to your own tables; safe to run on every start


@q.job(max_attempts=4, backoff=(60, 300, 1800))
def send_welcome_email(user_id: int, ctx: JobContext) -> None:
    # ctx.idempotency_key is the same on every retry: give it to your email provider.
    print(
        f"  sending welcome email to user {user_id} (attempt {ctx.attempt}, "
        f"idempotency key {ctx.idempotency_key})"
    )


app = sqlite3.connect(db)
app.execute("CREATE TABLE IF NOT EXISTS users (id INTEGER PRIMARY KEY, email TEXT UNIQUE)")


def sign_up(email: str) -> None:
    """The user row and its welcome-email job commit together, or not at all."""
    with app:  # one transaction
        user_id = app.execute("INSERT INTO users (email) VALUES (?)", (email,)).lastrowid
        send_welcome_email.enqueue(user_id=user_id, conn=app)


sign_up("ada@example.com")
try:
    sign_up("ada@example.com")  # duplicate e-mail: the transaction rolls back...
except sqlite3.IntegrityError:
    print("duplicate sign-up rolled back: no user, and no job")  # ...and takes the job with it

print("processing due jobs (what a worker or a tick does):")
summary = q.process_jobs(limit=100)
print("summary:", summary)
assert summary["succeeded"] == 1, summary
