"""What a target produces: files with suggested names, plus notes for the person."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

PLACEHOLDER = re.compile(r"<<(\w+)>>")


@dataclass(frozen=True)
class GeneratedFile:
    """One file of configuration; ``name`` is where it usually lives, e.g. ``vercel.json``."""

    name: str
    text: str


@dataclass(frozen=True)
class Generated:
    """A target's output: the files, and notes to show (not written into any file)."""

    files: list[GeneratedFile]
    notes: list[str] = field(default_factory=list)

    @property
    def text(self) -> str:
        if len(self.files) == 1:
            return self.files[0].text
        return "\n".join(f"# ---- {f.name} ----\n{f.text}" for f in self.files)


def fill(template: str, **values: object) -> str:
    """Replace each ``<<name>>`` in a plain-text template; a missing value is a bug, so raise."""
    unused = set(values) - set(PLACEHOLDER.findall(template))
    if unused:
        raise KeyError(f"template has no placeholder for {sorted(unused)}")
    return PLACEHOLDER.sub(lambda m: str(values[m[1]]), template)
