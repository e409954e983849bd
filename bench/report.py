"""The markdown table (stdout) and the JSON file a benchmark run produces."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from figures import Figure, Series

HEADER = (
    "| Figure | Backend | tickq: median (min-max) | floor: median (min-max) "
    "| tickq / floor | Notes |\n|---|---|---|---|---|---|"
)


def number(value: float) -> str:
    if value == int(value):
        return f"{value:,.0f}"
    if value >= 100:
        return f"{value:,.0f}"
    if value >= 10:
        return f"{value:.1f}"
    return f"{value:.2f}"


def cell(series: Series | None, unit: str, unavailable: str | None = None) -> str:
    if unavailable:
        return f"not available in this build ({unavailable})"
    if series is None:
        return "—"
    if not series.ok:
        return f"**FAILED**: {series.error or 'no runs'}"
    lo, hi = min(series.values), max(series.values)
    return f"{number(series.median)} {unit} ({number(lo)}-{number(hi)})"


def row(f: Figure) -> str:
    ratio = f"{f.ratio:.2f}x" if f.ratio is not None else "—"
    cells = (
        f.title,
        f.backend,
        cell(f.tickq, f.unit, f.unavailable),
        cell(f.floor, f.unit),
        ratio,
        f.note,
    )
    return "| " + " | ".join(c.replace("|", "\\|") for c in cells) + " |"


def table(figures: list[Figure]) -> str:
    return "\n".join([HEADER, *(row(f) for f in figures)])


def write_json(path: Path, meta: dict[str, Any], figures: list[Figure]) -> None:
    data = {"meta": meta, "figures": [f.as_json() for f in figures]}
    path.write_text(json.dumps(data, indent=2) + "\n")
