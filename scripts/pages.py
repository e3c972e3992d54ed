"""What the docs' generated pages share: write the page; copy the runs' plots beside the docs.

The plots live once, beside their records in ``benchmarks/``; ``docs/conf.py`` copies them into
``docs/_static/`` (ignored by git) when the docs are built, so the repository holds each image once.
"""

from __future__ import annotations

import shutil
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
# docs/_static/<name>/ <- benchmarks/<name>/*.png: the folders whose plots the generated pages show
PLOTS = {"cliffs": "cliffs", "dask": "dask", "soak": "soak"}


def publish(page: Path, text: str) -> None:
    """Write ``text`` to ``page``."""
    page.parent.mkdir(parents=True, exist_ok=True)
    page.write_text(text)


def copy_plots(root: Path = ROOT) -> None:
    """Copy every recorded plot the generated pages show into ``docs/_static/``."""
    for static, runs in PLOTS.items():
        target = root / "docs" / "_static" / static
        target.mkdir(parents=True, exist_ok=True)
        for png in (root / "benchmarks" / runs).glob("*.png"):
            shutil.copyfile(png, target / png.name)
