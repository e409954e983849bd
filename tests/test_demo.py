"""`tickq demo --no-serve` tells the whole story and exits 0 (the README's first command)."""

from __future__ import annotations

from conftest import run_tickq


def test_demo_runs_the_story_and_exits() -> None:
    result = run_tickq("demo", "--no-serve", "--port", "0", timeout=120)
    assert result.returncode == 0, result.stderr
    out = result.stdout + result.stderr
    assert "-> 409" in out, "the duplicate sign-up was refused"
    assert "Reminder: Dentist" in out and "Reminder: Conference" in out
    assert out.count("Reminder: Conference") == 1, "one reminder however many ticks"
    assert "is now failed after 4 attempts" in out
