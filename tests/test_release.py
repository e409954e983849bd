"""The release workflow: actionlint-clean, tag -> build -> check -> PyPI trusted publishing."""

from __future__ import annotations

from typing import Any

import yaml

from conftest import ROOT
from test_schedulers import actionlint_problems

RELEASE = ROOT / ".github" / "workflows" / "release.yml"


def steps_text(job: dict[str, Any]) -> str:
    return "\n".join(str(step.get("run", "")) + str(step.get("uses", "")) for step in job["steps"])


def test_release_workflow_passes_actionlint() -> None:
    assert actionlint_problems(RELEASE) == []


def test_a_version_tag_builds_checks_then_publishes_with_trusted_publishing() -> None:
    doc = yaml.safe_load(RELEASE.read_text())
    assert doc[True] == {"push": {"tags": ["v*"]}}  # YAML 1.1 reads the key `on` as true
    assert doc["permissions"] == {}, "no job gets more than it asks for"
    build, publish = doc["jobs"]["build"], doc["jobs"]["publish"]
    built = steps_text(build)
    assert "python -m build" in built and "twine check --strict dist/*" in built
    assert 'bin/tickq" demo --no-serve' in built, "the wheel is tried before it is published"
    assert publish["needs"] == "build" and publish["environment"]["name"] == "pypi"
    assert publish["permissions"] == {"id-token": "write"}
    assert "pypa/gh-action-pypi-publish@release/v1" in steps_text(publish)
    assert "password" not in RELEASE.read_text(), "trusted publishing: no token"
