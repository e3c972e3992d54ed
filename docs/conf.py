"""Sphinx configuration for the polymm documentation (furo theme, MyST Markdown).

Builds offline and warning-free: ``python -m sphinx -W -b html docs docs/_build/html``.
"""

import os
import sys

# Autodoc imports polymm from this checkout even when it is not installed.
sys.path.insert(0, os.path.abspath(".."))

# The recorded plots the generated pages show live once, beside their JSON in benchmarks/:
# copied into _static/ (ignored by git) for this build.
sys.path.insert(0, os.path.abspath("../scripts"))
from pages import copy_plots  # noqa: E402

copy_plots()

project = "polymm"
author = "the polymm developers"
copyright = "2026, the polymm developers"
try:
    from polymm import __version__ as release
except Exception:  # the docs still build (without autodoc) if polymm cannot be imported
    release = "0.1.0"
version = release

extensions = [
    "myst_parser",
    "sphinx.ext.autodoc",
    "sphinx.ext.napoleon",
    "sphinx.ext.viewcode",
]

source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "_generated", "figures/make_figures.py", "README.md"]

myst_enable_extensions = ["colon_fence", "deflist", "dollarmath"]
myst_heading_anchors = 3

autodoc_member_order = "bysource"
autodoc_typehints = "description"
autodoc_default_options = {"members": True, "undoc-members": False}

html_theme = "furo"
html_title = f"polymm {release}"
html_static_path = ["_static"]
# Nothing is fetched at build or view time: no intersphinx, no external fonts.
html_theme_options = {"navigation_with_keys": True}
