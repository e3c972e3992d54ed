"""The documentation is tested: its examples run, its quickstart matches the README, it builds.

* Every fenced ```` ```python ```` block in ``docs/**/*.md`` runs, page by page, top to bottom,
  in one namespace per page (so a block may use names an earlier block defined). A block
  whose first line is ``# requires: NAME[, NAME]`` needs those polymm backends: it runs in its
  own test after the page's earlier blocks, and is skipped, saying why, where a backend is
  not available (GPU examples on a machine without a GPU).
* Blocks with ``>>>`` prompts run as doctests in the same namespace.
* The plugin guide's package (its ``{code-block}`` files with a ``:caption:`` path) is written
  out, installed into a temporary folder, and the conformance suite runs against it.
* The quickstart's shell commands appear verbatim in the README, whose install and test
  commands ``.ci/run`` (CI) runs as written.
* ``sphinx -W`` builds the site without a warning (skipped only where Sphinx, furo or
  myst-parser are not installed: the ``docs`` extra).
"""

from __future__ import annotations

import doctest
import importlib.util
import json
import os
import re
import subprocess
import sys
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
PAGES = sorted(p for p in DOCS.rglob("*.md") if "_build" not in p.parts)

FENCE = re.compile(r"^(?P<indent> *)(?P<fence>`{3,}|~{3,})(?P<info>[^`\n]*)$")
REQUIRES = re.compile(r"^#\s*requires:\s*(?P<names>[\w\-, ]+)$")


@dataclass
class Block:
    page: Path
    line: int  # 1-based line of the opening fence
    language: str  # "python", "bash", "toml", ...
    code: str
    caption: str | None = None

    @property
    def requires(self) -> list[str]:
        first = self.code.lstrip().splitlines()[0] if self.code.strip() else ""
        m = REQUIRES.match(first.strip())
        return [n.strip() for n in m.group("names").split(",") if n.strip()] if m else []

    @property
    def where(self) -> str:
        return f"{self.page.relative_to(ROOT)}:{self.line}"


def _closes(line: str, fence: str) -> bool:
    s = line.strip()
    return len(s) >= len(fence) and s == fence[0] * len(s)


def parse_blocks(page: Path) -> list[Block]:
    """Fenced code blocks of a MyST page: ```lang and ```{code-block} lang (with :caption:)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    blocks, i = [], 0
    while i < len(lines):
        m = FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, info, start = m.group("fence"), m.group("info").strip(), i
        body, i = [], i + 1
        while i < len(lines) and not _closes(lines[i], fence):
            body.append(lines[i])
            i += 1
        i += 1
        caption = None
        if info.startswith("{code-block}") or info.startswith("{code}"):
            language = info.split("}", 1)[1].strip() or "text"
            options = []
            while body and body[0].startswith(":"):
                options.append(body.pop(0))
            if body and not body[0].strip():
                body.pop(0)
            for opt in options:
                if opt.startswith(":caption:"):
                    caption = opt.split(":caption:", 1)[1].strip()
        elif info.startswith("{"):
            continue  # other directives (toctree, ...)
        else:
            language = info.split()[0] if info else "text"
        blocks.append(Block(page, start + 1, language, textwrap.dedent("\n".join(body)) + "\n", caption))
    return blocks


def runnable(page: Path) -> list[Block]:
    return [b for b in parse_blocks(page) if b.language in ("python", "py", "pycon") and b.caption is None]


def run_block(block: Block, namespace: dict) -> None:
    """Execute one block (as a doctest when it has ``>>>`` prompts) with a useful traceback."""
    if ">>>" in block.code:
        parser = doctest.DocTestParser()
        test = parser.get_doctest(block.code, namespace, block.where, str(block.page), block.line)
        runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS | doctest.NORMALIZE_WHITESPACE)
        runner.run(test, clear_globs=False)
        failed, _ = runner.summarize(verbose=False)
        assert not failed, f"doctest failures in {block.where}"
        return
    code = compile(block.code, block.where, "exec")
    exec(code, namespace)  # noqa: S102 - running the documentation's own examples is the point


def available_backends() -> set[str]:
    import polymm

    return {info.name for info in polymm.backends() if info.available}


def page_id(page: Path) -> str:
    return str(page.relative_to(DOCS))


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """Run examples in a scratch folder, and forget the backends they register afterwards
    (the docs show ``register_backend``; other tests must not see those toys)."""
    from polymm import registry

    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("POLYMM_BACKEND", raising=False)
    before = dict(registry._registry())
    yield
    entries = registry._registry()
    for name in set(entries) - set(before):
        del entries[name]
    entries.update(before)


# ---------------------------------------------------------------------------- examples

WITH_EXAMPLES = [p for p in PAGES if any(not b.requires for b in runnable(p))]


def test_the_guides_have_examples():
    assert {"quickstart.md", "guide.md", "plugins.md"} <= {p.name for p in WITH_EXAMPLES}


@pytest.mark.parametrize("page", WITH_EXAMPLES, ids=page_id)
def test_page_examples_run(page, isolated):
    """Every plain ``python`` block of the page, in order, in one namespace."""
    blocks = [b for b in runnable(page) if not b.requires]
    namespace = {"__name__": f"docs_{page.stem}"}
    for block in blocks:
        run_block(block, namespace)


# Blocks of the plugin guide's own package ("mine") run in
# test_plugin_guide_package_installs_and_passes_the_conformance_suite, after installing it.
REQUIRING = [(p, i) for p in PAGES for i, b in enumerate(runnable(p)) if b.requires and "mine" not in b.requires]


@pytest.mark.parametrize("page,index", REQUIRING, ids=[f"{page_id(p)}-{runnable(p)[i].line}" for p, i in REQUIRING])
def test_page_examples_needing_a_backend(page, index, isolated):
    """A ``# requires: NAME`` block, after the page's earlier plain blocks; skipped without NAME."""
    blocks = runnable(page)
    block = blocks[index]
    missing = [n for n in block.requires if n not in available_backends()]
    if missing:
        pytest.skip(f"{block.where} needs polymm backend(s) {', '.join(missing)}, not available here")
    namespace = {"__name__": f"docs_{page.stem}"}
    for earlier in blocks[:index]:
        if not earlier.requires:
            run_block(earlier, namespace)
    run_block(block, namespace)


# ---------------------------------------------------------------------------- plugin guide


def test_plugin_guide_package_installs_and_passes_the_conformance_suite(tmp_path):
    """Write the plugin guide's files, install them (into a folder, not this environment),
    and run what the guide says: ``polymm info``, the conformance suite, its ``mine`` example."""
    page = DOCS / "plugins.md"
    files = [b for b in parse_blocks(page) if b.caption]
    assert files, "the plugin guide shows no package files"
    src = tmp_path / "src"
    for block in files:
        path = src / block.caption
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(block.code, encoding="utf-8")
    package = src / files[0].caption.split("/")[0]
    site = tmp_path / "site"
    cmd = [
        sys.executable,
        "-m",
        "pip",
        "install",
        "--quiet",
        "--no-deps",
        "--no-compile",
        "--disable-pip-version-check",
        "--target",
        str(site),
        str(package),
    ]
    if importlib.util.find_spec("setuptools") is not None:
        cmd.insert(4, "--no-build-isolation")  # no network needed when setuptools is here
    subprocess.run(cmd, check=True, cwd=tmp_path)

    env = dict(os.environ, PYTHONPATH=os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")])))
    env.pop("POLYMM_BACKEND", None)
    info = subprocess.run(
        [sys.executable, "-m", "polymm.tools.cli", "info", "--json"],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    if info.returncode == 0:
        assert '"mine"' in info.stdout
    suite = subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "--pyargs",
            "polymm.testing",
            "--polymm-backend=mine",
            "-q",
            "-p",
            "no:cacheprovider",
            "-x",
        ],
        env=env,
        cwd=tmp_path,
        capture_output=True,
        text=True,
    )
    assert suite.returncode == 0, suite.stdout[-4000:] + suite.stderr[-2000:]
    assert " passed" in suite.stdout

    examples = [b for b in runnable(page) if "mine" in b.requires]
    assert examples, "the plugin guide has no example using the installed backend"
    for block in examples:
        done = subprocess.run([sys.executable, "-c", block.code], env=env, cwd=tmp_path, capture_output=True, text=True)
        assert done.returncode == 0, f"{block.where} failed:\n{done.stderr[-3000:]}"


# ---------------------------------------------------------------------------- quickstart


def test_quickstart_commands_are_the_readmes():
    """The quickstart mirrors the README (which ``.ci/run`` executes), command for command."""
    readme = ROOT / "README.md"
    if not readme.exists():
        pytest.skip("no README.md yet")
    text = readme.read_text(encoding="utf-8")
    commands = _shell_commands(DOCS / "quickstart.md")
    assert commands
    missing = [c for c in commands if c not in text]
    assert not missing, f"quickstart commands not in README.md: {missing}"


def _shell_commands(page: Path) -> list[str]:
    """The commands of a page's shell blocks, one per line, comments left out."""
    return [
        line.strip()
        for block in parse_blocks(page)
        if block.language in ("bash", "console", "sh")
        for line in block.code.splitlines()
        if line.strip() and not line.strip().startswith("#")
    ]


def test_ci_runs_the_readmes_install_and_test_commands():
    """``.ci/run`` runs the README's commands as written: the line after each ``# README:`` comment
    is one of the README's commands, and every install command of the README is run so."""
    readme = _shell_commands(ROOT / "README.md")
    lines = (ROOT / ".ci" / "run").read_text(encoding="utf-8").splitlines()
    ran = [lines[i + 1].strip() for i, line in enumerate(lines[:-1]) if line.startswith("# README:")]
    assert "python -m pytest" in ran
    strays = [c for c in ran if c not in readme]
    assert not strays, f".ci/run runs as the README's commands that the README does not give: {strays}"
    installs = [c for c in readme if c.startswith(("python -m pip install", "pip install"))]
    assert len(installs) >= 3, installs
    missing = [c for c in installs if c not in ran]
    assert not missing, f"README install commands that .ci/run does not run: {missing}"


# ---------------------------------------------------------------------------- generated pages


def _page_script(script):
    """The module of ``scripts/<script>.py`` (the scripts are not a package)."""
    spec = importlib.util.spec_from_file_location(script, ROOT / "scripts" / f"{script}.py")
    page = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(page)
    return page


def test_todays_figures_say_how_each_record_timed_its_ratios():
    """Records of the program's ratio, of calls interleaved as they came, and of blocks do not
    compare; the page names each record's kind from its cells."""
    page = _page_script("performance_page")
    assert page.ratio_kind({"cells": [{"timing": "interleaved", "ref_added": 0.0}]}) == "program"
    assert page.ratio_kind({"cells": [{"timing": "interleaved", "ref_added": None}]}) == "program"
    assert page.ratio_kind({"cells": [{"timing": "interleaved"}]}) == "interleaved"
    assert page.ratio_kind({"cells": [{"ratio": 1.0}]}) == "blocks"


@pytest.mark.parametrize("script", ["cliffs_page", "soak_page", "records_page", "performance_page"])
def test_generated_pages_are_what_their_scripts_write_from_the_records(script):
    """The cliff-suite, soak, records and today's-figures sections are generated from the recorded
    JSON: the committed page cannot drift from the data."""
    page = _page_script(script)
    assert page.PAGE.read_text() == page.render(), f"run: python scripts/{script}.py"


def test_every_plot_the_docs_show_is_a_recorded_one_the_build_copies(tmp_path):
    """The docs show ``_static/<folder>/<run>.png``; the repository holds each plot once, beside
    its record in ``benchmarks/``, and the build copies it (``pages.copy_plots``)."""
    pages = _page_script("pages")
    shown = {
        (m.group(1), m.group(2))
        for doc in [*DOCS.glob("*.md"), *(DOCS / "_generated").glob("*.md")]
        for m in re.finditer(r"_static/(\w+)/([\w.+-]+\.png)", doc.read_text())
    }
    assert shown, "no recorded plot found in the docs: the pattern is stale"
    missing = [
        f"{folder}/{name}" for folder, name in shown if not (ROOT / "benchmarks" / pages.PLOTS[folder] / name).exists()
    ]
    assert not missing, f"figures without a recorded plot: {missing}"
    (tmp_path / "benchmarks" / "soak").mkdir(parents=True)
    (tmp_path / "benchmarks" / "soak" / "run.png").write_bytes(b"png")
    pages.copy_plots(tmp_path)
    assert (tmp_path / "docs" / "_static" / "soak" / "run.png").read_bytes() == b"png"


def test_every_record_folder_is_indexed():
    """``benchmarks/`` holds curated records only, each folder in ``benchmarks/index.json`` (what
    it is, the command that makes a record, where the docs show it); no dated run folders."""
    index = json.loads((ROOT / "benchmarks" / "index.json").read_text())
    indexed = {entry["folder"] for entry in index["records"]}
    folders = {p.name for p in (ROOT / "benchmarks").iterdir() if p.is_dir()}
    assert folders == indexed, (
        f"not indexed: {sorted(folders - indexed)}; indexed but absent: {sorted(indexed - folders)}"
    )


# ---------------------------------------------------------------------------- the build


def _have_sphinx() -> str | None:
    for module in ("sphinx", "furo", "myst_parser"):
        if importlib.util.find_spec(module) is None:
            return module
    return None


@pytest.mark.skipif(_have_sphinx() is not None, reason="Sphinx, furo and myst-parser (the docs extra) are needed")
def test_docs_build_without_warnings(tmp_path):
    """``sphinx -W``: any warning (a broken reference, a missing figure, bad autodoc) fails."""
    out = tmp_path / "html"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "sphinx",
            "-W",
            "--keep-going",
            "-q",
            "-b",
            "html",
            "-d",
            str(tmp_path / "doctrees"),
            str(DOCS),
            str(out),
        ],
        capture_output=True,
        text=True,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-4000:]
    for page in ("index", "quickstart", "guide", "kernels", "plugins", "performance", "benchmarking", "api"):
        assert (out / f"{page}.html").exists(), page
