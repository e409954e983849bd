"""Every python example of docs/failures.md runs as written and shows what it says."""

from __future__ import annotations

import re

import pytest

from conftest import ROOT

PAGE = ROOT / "docs" / "failures.md"


def examples() -> list[str]:
    return re.findall(r"```python\n(.*?)```", PAGE.read_text(), flags=re.DOTALL)


def test_the_section_has_examples() -> None:
    assert len(examples()) == 4


@pytest.mark.parametrize("index", range(4))
def test_example_runs(
    index: int, tmp_path: object, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    for name in ("TICKQ_ALERT_WEBHOOK_URL", "TICKQ_ALERT_EMAIL_TO", "TICKQ_SMTP_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # type: ignore[arg-type]
    code = compile(examples()[index], f"docs/failures.md example {index + 1}", "exec")
    exec(code, {"__name__": "__main__"})
    out = capsys.readouterr().out
    expected = {
        0: "tickq: 1 job of type 'charge_card' failed",
        1: "['__main__.page_on_call'",
        2: "tickq: 1 job of type 'sync_stock' failed",
        3: "# HELP tickq_jobs",
    }[index]
    assert expected in out
