"""Every python example in the README's "When jobs fail" section runs as written."""

from __future__ import annotations

import re

import pytest

from conftest import ROOT

SECTION = "## When jobs fail"


def examples() -> list[str]:
    text = (ROOT / "README.md").read_text()
    section = text.split(SECTION, 1)[1]
    section = re.split(r"\n## ", section, maxsplit=1)[0]
    return re.findall(r"```python\n(.*?)```", section, flags=re.DOTALL)


def test_the_section_has_examples() -> None:
    assert len(examples()) == 3


@pytest.mark.parametrize("index", range(3))
def test_example_runs(
    index: int, tmp_path: object, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    for name in ("TICKQ_ALERT_WEBHOOK_URL", "TICKQ_ALERT_EMAIL_TO", "TICKQ_SMTP_URL"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.chdir(tmp_path)  # type: ignore[arg-type]
    exec(
        compile(examples()[index], f"README example {index + 1}", "exec"), {"__name__": "__main__"}
    )
    out = capsys.readouterr().out
    expected = {
        0: "tickq: 1 job of type 'charge_card' failed",
        1: "['__main__.page_on_call'",
        2: "# HELP tickq_jobs",
    }[index]
    assert expected in out
