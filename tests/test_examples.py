"""Every example a newcomer runs must work as written."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import ROOT, tickq_env


def test_quickstart_example_runs() -> None:
    result = subprocess.run(
        [sys.executable, str(ROOT / "examples" / "quickstart.py")],
        capture_output=True, text=True, timeout=60, env=tickq_env(), cwd=ROOT,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert "sending welcome email to user 1" in result.stdout
    assert "rolled back: no user, and no job" in result.stdout


def readme_python_blocks() -> list[str]:
    text = (ROOT / "README.md").read_text()
    return re.findall(r"```python\n(.*?)```", text, flags=re.S)


def test_readme_python_blocks_run_in_order(tmp_path) -> None:  # type: ignore[no-untyped-def]
    """The README's python blocks form one story; run them in one namespace."""
    blocks = readme_python_blocks()
    assert blocks, "README has python examples"
    script = tmp_path / "readme.py"
    script.write_text("\n\n".join(blocks))
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=120,
        env=tickq_env(), cwd=tmp_path,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
