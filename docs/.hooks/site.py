"""MkDocs hooks for tickq's site.

- Nav entries whose page is not in docs/ (yet) are left out instead of failing the strict
  build: several branches each write one page, and a page appears once its file exists.
- Docstring examples written doctest-style (``>>> q.migrate()``) are shown as Python
  console code, not as Markdown block quotes.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

from markdown import Extension
from markdown.preprocessors import Preprocessor


def on_config(config: Any) -> Any:
    docs = Path(config["docs_dir"])
    config["nav"] = _present(config["nav"] or [], docs)
    config["markdown_extensions"].append(DoctestExtension())
    return config


def _present(items: list[Any], docs: Path) -> list[Any]:
    kept = []
    for item in items:
        entry = _entry(item, docs)
        if entry is not None:
            kept.append(entry)
    return kept


def _entry(item: Any, docs: Path) -> Any:
    if isinstance(item, str):
        return item if _exists(item, docs) else None
    ((title, value),) = item.items()
    if isinstance(value, list):
        children = _present(value, docs)
        return {title: children} if children else None
    return item if _exists(value, docs) else None


def _exists(target: str, docs: Path) -> bool:
    return "://" in target or (docs / target).is_file()


FENCE = re.compile(r"^\s*(```|~~~)")
PROMPT = re.compile(r"^(\s*)>>> ")


class DoctestPreprocessor(Preprocessor):
    """Wrap each run of lines starting at a ``>>>`` prompt, up to a blank line, in a fence."""

    def run(self, lines: list[str]) -> list[str]:
        out: list[str] = []
        fenced = in_doctest = False
        indent = ""
        for line in lines:
            if in_doctest and not line.strip():
                out.append(f"{indent}```")
                in_doctest = False
            if not in_doctest and FENCE.match(line):
                fenced = not fenced
            prompt = PROMPT.match(line)
            if prompt and not fenced and not in_doctest:
                indent = prompt.group(1)
                out.extend(["", f"{indent}```pycon"])
                in_doctest = True
            out.append(line)
        if in_doctest:
            out.append(f"{indent}```")
        return out


class DoctestExtension(Extension):
    def extendMarkdown(self, md: Any) -> None:
        md.preprocessors.register(DoctestPreprocessor(md), "tickq_doctest", 40)
