"""What the docs' generated pages share: write the page, copy the runs' plots beside the docs."""

from __future__ import annotations

import shutil
from pathlib import Path


def publish(page: Path, text: str, runs: Path, static: Path) -> None:
    """Write ``text`` to ``page`` and copy every ``.png`` of ``runs`` into ``static``."""
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(text)
    static.mkdir(parents=True, exist_ok=True)
    for png in runs.glob("*.png"):
        shutil.copyfile(png, static / png.name)
