"""Markdown tables and the line that says where numbers come from (shared by suites and scripts)."""

from __future__ import annotations

import os
import platform
from collections.abc import Sequence
from typing import Any


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A GitHub markdown table (floats: 3 decimals below 1,000, else thousands separators)."""
    def fmt(x: Any) -> str:
        if isinstance(x, float):
            return f"{x:,.3f}" if abs(x) < 1000 else f"{x:,.0f}"
        return str(x)

    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---:" for _ in headers) + "|"]
    lines += ["| " + " | ".join(fmt(x) for x in row) + " |" for row in rows]
    return "\n".join(lines)


def machine() -> str:
    """One line about where the numbers come from."""
    py = f"{platform.python_implementation()} {platform.python_version()}"
    return f"{py}, {os.cpu_count()} CPUs, {platform.machine()}"
