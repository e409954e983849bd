"""Every python example in docs/ and the README runs as written.

Each page's ```python blocks run in order, in one namespace, in a fresh temporary folder
(one process per page, so pages can't disturb each other or the test run). A block whose
first line is ``# not run: <reason>`` is only compiled. Tracebacks name the page and line.
"""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, tickq_env

PAGES = [*sorted((ROOT / "docs").glob("*.md")), ROOT / "README.md"]
FENCE = re.compile(r"^( *)```python[^\n]*\n(.*?)^\1```", re.M | re.S)
NOT_RUN = re.compile(r"# not run: \S")
# Settings a developer's shell may hold that would change what the examples do.
UNSET = (
    "CRON_SECRET",
    "CRON_SECRET_PREVIOUS",
    "TICKQ_APP",
    "TICKQ_DATABASE_URL",
    "TICKQ_HEARTBEAT_URL",
    "TICKQ_LOG_FORMAT",
    "TICKQ_METRICS_TOKEN",
    "TICKQ_ALERT_WEBHOOK_URL",
    "TICKQ_ALERT_EMAIL_TO",
    "TICKQ_SMTP_URL",
)

RUNNER = """
blocks = {blocks!r}
namespace = {{"__name__": "__main__"}}
codes = [compile("\\n" * (line - 1) + source, path, "exec") for path, line, source in blocks]
for (path, line, source), code in zip(blocks, codes):
    if not source.lstrip().startswith("# not run:"):
        exec(code, namespace)
"""


def python_blocks(page: Path) -> list[tuple[str, int, str]]:
    """(page, first line of the code, dedented code) for each ```python block."""
    text = page.read_text(encoding="utf-8")
    found = []
    for match in FENCE.finditer(text):
        indent, body = match.group(1), match.group(2)
        code = "".join(line.removeprefix(indent) for line in body.splitlines(keepends=True))
        first = text.count("\n", 0, match.start(2)) + 1
        found.append((str(page), first, code))
    return found


def test_pages_have_examples() -> None:
    """The collector finds the examples: a broken fence pattern must not pass silently."""
    names = {page.name for page in PAGES if python_blocks(page)}
    pages = {"README.md", "tutorial.md", "sleeping-hosts.md", "failures.md", "observability.md"}
    assert pages <= names


def test_skipped_blocks_say_why() -> None:
    for page in PAGES:
        for path, line, code in python_blocks(page):
            first = code.lstrip().splitlines()[0] if code.strip() else ""
            if first.startswith("# not run"):
                assert NOT_RUN.match(first), f"{path}:{line}: say why: '# not run: <reason>'"


@pytest.mark.parametrize(
    "page", [page for page in PAGES if python_blocks(page)], ids=lambda page: page.name
)
def test_page_examples_run(page: Path, tmp_path: Path) -> None:
    result = run_examples(page, tmp_path)
    if result.returncode != 0:
        pytest.fail(f"{page.name}: an example failed:\n{result.stderr}", pytrace=False)


def run_examples(page: Path, tmp_path: Path) -> subprocess.CompletedProcess[str]:
    env = tickq_env()
    for name in UNSET:
        env.pop(name, None)
    script = tmp_path / "examples_of_the_page.py"
    script.write_text(RUNNER.format(blocks=python_blocks(page)), encoding="utf-8")
    work = tmp_path / "work"
    work.mkdir()
    return subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=90,
        env=env, cwd=work,
    )  # fmt: skip


def test_the_runner_shares_a_namespace_and_only_compiles_not_run_blocks(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "# A page\n\n```python\nimport os\nseen = [os.listdir()]\n```\n\n"
        "```python\n# not run: needs a real provider\nraise SystemExit('ran it')\n```\n"
        "\n- in a list:\n\n    ```python\n    seen.append(1)\n    assert seen == [[], 1]\n    ```\n"
    )
    result = run_examples(page, tmp_path)
    assert (result.returncode, result.stderr) == (0, "")


@pytest.mark.parametrize(
    ("block", "expected"),
    [
        ("x = 1\nraise ValueError('at fault')\n", 'page.md", line 5'),  # the Markdown line
        ("# not run: compiled all the same\ndef broken(:\n", "SyntaxError"),
    ],
    ids=["raises", "not-run-syntax-error"],
)
def test_a_failing_example_names_its_page_and_line(
    tmp_path: Path, block: str, expected: str
) -> None:
    page = tmp_path / "page.md"
    page.write_text(f"# A page\n\n```python\n{block}```\n")
    result = run_examples(page, tmp_path)
    assert result.returncode == 1 and expected in result.stderr, result.stderr
