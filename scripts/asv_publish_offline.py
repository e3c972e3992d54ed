#!/usr/bin/env python
"""Publish the asv dashboard so that it renders with no network, say how old each machine's data
is, and serve it.

1. Gathers the results: the committed records (``asv_bench/results/``) and, unless
   ``--records-only``, this clone's own runs (``asv_bench/scratch/results/``, git-ignored), into
   ``asv_bench/scratch/publish/results`` (``benchmarks.json`` merged), and runs ``asv publish``
   on that copy: publishing changes no tracked file.
2. Points the page at vendored copies of its CDN scripts and styles: asv's ``index.html`` loads
   jQuery, flot (and plugins), stupidtable, blueimp-md5 and Bootstrap from CDNs, so without
   network it shows only asv's "failed to load" error. ``asv_bench/vendor/`` (fetched from npm by
   ``scripts/vendor_asv_assets.sh``) is copied into the html folder and every CDN reference is
   rewritten to the local copy, dropping the ``integrity`` hashes (they name the CDN's minified
   builds). A CDN reference it does not know (a newer asv) is an error, not a silent failure.
3. Adds a banner to the page: per machine, its newest result (date, commit, how many commits
   before the HEAD published from), marked **stale** when more than 50 commits or 14 days old,
   whether it is a committed record or a local run, and the note ``asv_bench/notes.json`` holds
   for it. Opened as a file (``file://``), the page cannot load its data (browsers refuse
   ``file://`` requests: asv shows "Error fetching content"); the banner then says how to serve it.
4. ``--serve``: serves the folder on http://127.0.0.1:8080/ until Ctrl-C.

    python scripts/asv_publish_offline.py --serve        # publish, then serve; open the address
    python scripts/asv_publish_offline.py --records-only # only what is committed
    python scripts/asv_publish_offline.py --no-publish   # only rewrite an existing html folder
    python -m http.server --bind 127.0.0.1 --directory asv_bench/html 8080   # serve it later
"""

from __future__ import annotations

import argparse
import datetime
import functools
import html
import http.server
import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ASV_DIR = ROOT / "asv_bench"
VENDOR = ASV_DIR / "vendor"
RECORDS = ASV_DIR / "results"
SCRATCH = ASV_DIR / "scratch" / "results"
WORK = ASV_DIR / "scratch" / "publish"
NOTES = ASV_DIR / "notes.json"
#: A machine whose newest result is more commits before HEAD than this, or older, is "stale".
STALE_COMMITS = 50
STALE_DAYS = 14

#: CDN URL pattern -> vendored file (relative to asv_bench/vendor/).
LOCAL = [
    (r"code\.jquery\.com/jquery-3\.\d+\.\d+(\.min)?\.js", "jquery-3.3.1/jquery.min.js"),
    (r"/flot/0\.8\.3/jquery\.flot(\.min)?\.js", "flot-0.8.3/jquery.flot.js"),
    (r"/flot/0\.8\.3/jquery\.flot\.time(\.min)?\.js", "flot-0.8.3/jquery.flot.time.js"),
    (r"/flot/0\.8\.3/jquery\.flot\.selection(\.min)?\.js", "flot-0.8.3/jquery.flot.selection.js"),
    (r"/flot/0\.8\.3/jquery\.flot\.categories(\.min)?\.js", "flot-0.8.3/jquery.flot.categories.js"),
    (r"flot-orderbars@1\.0\.0/js/jquery\.flot\.orderBars\.js", "flot-orderbars-1.0.0/js/jquery.flot.orderBars.js"),
    (r"/stupidtable/[\d.]+/stupidtable(\.min)?\.js", "stupid-table-plugin-1.1.3/stupidtable.min.js"),
    (r"blueimp-md5/2\.\d+\.\d+/js/md5(\.min)?\.js", "blueimp-md5-2.19.0/js/md5.min.js"),
    (r"bootstrap@3\.1\.1/dist/js/bootstrap(\.min)?\.js", "bootstrap-3.1.1/js/bootstrap.min.js"),
    (r"bootstrap@3\.1\.1/dist/css/bootstrap(\.min)?\.css", "bootstrap-3.1.1/css/bootstrap.min.css"),
]

TAG = re.compile(r"<(script|link)\b[^>]*?\b(src|href)=\"(https?://[^\"]+)\"[^>]*>", re.S)
DROP = re.compile(r"\s+(integrity|crossorigin|referrerpolicy)=\"[^\"]*\"")


def localise(html: str) -> tuple[str, list[str]]:
    """Rewrite CDN ``<script src>`` / ``<link href>`` to ``vendor/...``; return (html, unknown URLs)."""
    unknown = []

    def fix(m: re.Match) -> str:
        tag, url = m.group(0), m.group(3)
        if m.group(1) == "link" and "stylesheet" not in tag:
            return tag  # e.g. <link rel="alternate">: not a resource the page needs
        for pattern, local in LOCAL:
            if re.search(pattern, url):
                return DROP.sub("", tag.replace(url, f"vendor/{local}"))
        unknown.append(url)
        return tag

    return TAG.sub(fix, html), unknown


def gather(records_only: bool = False, work: Path = WORK) -> Path:
    """The records (and unless ``records_only`` the scratch runs) copied into ``work/results``."""
    results = work / "results"
    if results.exists():
        shutil.rmtree(results)
    results.mkdir(parents=True)
    sources = [RECORDS] if records_only else [RECORDS, SCRATCH]
    benchmarks = {}
    for source in sources:
        if not source.is_dir():
            continue
        for machine in sorted(p for p in source.iterdir() if (p / "machine.json").is_file()):
            shutil.copytree(machine, results / machine.name, dirs_exist_ok=True)
        if (source / "benchmarks.json").is_file():
            benchmarks.update(json.loads((source / "benchmarks.json").read_text(encoding="utf-8")))
    (results / "benchmarks.json").write_text(json.dumps(benchmarks, indent=4), encoding="utf-8")
    return results


def _git(*args) -> str:
    return subprocess.run(["git", "-C", str(ROOT), *args], capture_output=True, text=True).stdout.strip()


def branches() -> list[str]:
    """``main`` and, when HEAD is not on it, the current branch: asv graphs only the commits of
    the configuration's branches, and a local run records the commit checked out."""
    names = ["main"]
    head = _git("rev-parse", "--abbrev-ref", "HEAD")
    on_main = subprocess.run(["git", "-C", str(ROOT), "merge-base", "--is-ancestor", "HEAD", "main"]).returncode == 0
    if head and head != "HEAD" and head != "main" and not on_main:
        names.append(head)
    return names


def publish(results: Path, html_dir: Path, work: Path = WORK) -> None:
    """``asv publish`` of ``results`` into ``html_dir``, through a configuration written in ``work``."""
    conf = {
        "version": 1,
        "project": "polymm",
        "repo": str(ROOT),
        "branches": branches(),
        "dvcs": "git",
        "environment_type": "existing",
        "pythons": ["same"],
        "benchmark_dir": str(ASV_DIR / "benchmarks"),
        "env_dir": str(work / "env"),
        "results_dir": str(results),
        "html_dir": str(html_dir),
    }
    path = work / "asv.conf.json"
    path.write_text(json.dumps(conf, indent=4), encoding="utf-8")
    subprocess.run([sys.executable, "-m", "asv", "publish", "--config", str(path)], cwd=work, check=True)


def machines(results: Path) -> list[dict]:
    """Per machine folder of ``results``: its newest result and how old it is."""
    from asv.results import Results

    notes = json.loads(NOTES.read_text(encoding="utf-8")) if NOTES.is_file() else {}
    head = _git("rev-parse", "HEAD")
    rows = []
    for folder in sorted(p for p in results.iterdir() if (p / "machine.json").is_file()):
        newest = None
        for path in folder.glob("*.json"):
            if path.name == "machine.json":
                continue
            res = Results.load(str(path))
            if newest is None or (res.date or 0) > (newest.date or 0):
                newest = res
        if newest is None:
            continue
        commit = newest.commit_hash
        behind = _git("rev-list", "--count", f"{commit}..{head}") if head else ""
        date = datetime.datetime.fromtimestamp((newest.date or 0) / 1000, datetime.timezone.utc)
        age = datetime.datetime.now(datetime.timezone.utc) - date
        stale = (behind.isdigit() and int(behind) > STALE_COMMITS) or age.days > STALE_DAYS
        rows.append(
            {
                "machine": folder.name,
                "source": "record" if (RECORDS / folder.name).is_dir() else "local run (not committed)",
                "quick": folder.name.endswith("-quick"),
                "date": date.strftime("%Y-%m-%d %H:%M UTC"),
                "commit": commit[:8],
                "behind": int(behind) if behind.isdigit() else None,
                "stale": stale,
                "note": notes.get(folder.name, ""),
            }
        )
    return rows


def banner(rows: list[dict]) -> str:
    """The banner's HTML: how to serve the page when opened as a file, and each machine's age."""
    head = _git("log", "-1", "--format=%h, %cd", "--date=format:%Y-%m-%d")
    lines = []
    for r in rows:
        status = (
            '<b style="color:#a94442">STALE: not the current code</b>'
            if r["stale"]
            else '<span style="color:#3c763d">current</span>'
        )
        behind = f"{r['behind']} commits before HEAD" if r["behind"] is not None else "commit not in this clone"
        kind = r["source"] + (", quick: one timed call per figure, rough" if r["quick"] else "")
        note = f" &mdash; {html.escape(r['note'])}" if r["note"] else ""
        lines.append(
            f"<tr><td><code>{html.escape(r['machine'])}</code></td><td>{html.escape(kind)}</td>"
            f"<td>commit <code>{r['commit']}</code> of {r['date']} ({behind})</td><td>{status}{note}</td></tr>"
        )
    return f"""
    <div id="polymm-banner" style="position: fixed; left: 0; right: 0; bottom: 0; z-index: 2000; max-height: 40%;
         overflow: auto; background: #fcf8e3; border-top: 1px solid #d6b656; font-size: 12px; padding: 4px 12px;">
      <a href="#" style="float: right" onclick="document.getElementById('polymm-banner').style.display='none'; return false;">hide</a>
      <div id="polymm-file-warning" style="display: none; color: #a94442; font-weight: bold; font-size: 14px;">
        Opened as a file: this page loads its data over HTTP, which browsers refuse to file:// pages
        ("Error fetching content"). Serve it and open http://127.0.0.1:8080/ :
        <code>python scripts/asv_publish_offline.py --serve</code> (or
        <code>python -m http.server --bind 127.0.0.1 --directory asv_bench/html 8080</code>).
      </div>
      <b>Newest commit measured per machine</b> (published from HEAD {html.escape(head)}; stale: more than
      {STALE_COMMITS} commits or {STALE_DAYS} days before it). Older points stay in the graphs as history.
      <table style="margin-top: 2px">{"".join(lines)}</table>
    </div>
    <script>
      if (window.location.protocol === "file:") {{
        document.getElementById("polymm-file-warning").style.display = "block";
      }}
    </script>
"""


def rewrite(html_dir: Path, banner_html: str = "") -> None:
    missing = [local for _, local in LOCAL if not (VENDOR / local).is_file()]
    if missing:
        sys.exit(f"vendored files missing (run scripts/vendor_asv_assets.sh): {missing}")
    target = html_dir / "vendor"
    if target.exists():
        shutil.rmtree(target)
    shutil.copytree(VENDOR, target)
    problems = []
    for page in sorted(html_dir.glob("*.html")):
        text, unknown = localise(page.read_text(encoding="utf-8"))
        if page.name == "index.html" and banner_html and 'id="polymm-banner"' not in text:
            text = text.replace("</body>", banner_html + "</body>", 1)
        page.write_text(text, encoding="utf-8")
        problems += [f"{page.name}: {u}" for u in unknown]
        print(f"rewrote {page.relative_to(ROOT) if page.is_relative_to(ROOT) else page}")
    if problems:
        sys.exit(
            "CDN references with no vendored copy (update LOCAL and the vendor script):\n  " + "\n  ".join(problems)
        )


def serve(html_dir: Path, port: int) -> None:
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(html_dir))
    with http.server.ThreadingHTTPServer(("127.0.0.1", port), handler) as server:
        print(f"serving {html_dir} on http://127.0.0.1:{server.server_address[1]}/ (Ctrl-C stops)", flush=True)
        try:
            server.serve_forever()
        except KeyboardInterrupt:
            pass


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--html-dir", default=None, help="output folder (default asv_bench/html)")
    parser.add_argument("--records-only", action="store_true", help="only the committed records, not this clone's runs")
    parser.add_argument("--no-publish", action="store_true", help="only rewrite an already published folder")
    parser.add_argument("--serve", action="store_true", help="then serve the folder over HTTP on 127.0.0.1")
    parser.add_argument("--port", type=int, default=8080, help="port for --serve (default 8080)")
    args = parser.parse_args(argv)
    html_dir = Path(args.html_dir).resolve() if args.html_dir else ASV_DIR / "html"
    results = WORK / "results"
    if not args.no_publish:
        results = gather(args.records_only)
        publish(results, html_dir)
    rows = machines(results) if results.is_dir() else []
    for r in rows:
        flag = "STALE" if r["stale"] else "current"
        behind = f"{r['behind']} commits before HEAD" if r["behind"] is not None else "commit unknown here"
        print(f"  {r['machine']:<28} {flag:<8} newest: commit {r['commit']} of {r['date']} ({behind}; {r['source']})")
    rewrite(html_dir, banner(rows))
    print(f"published {html_dir / 'index.html'}: it needs HTTP (a file:// page cannot load its data)")
    if args.serve:
        serve(html_dir, args.port)
    else:
        print(
            f"serve it: python scripts/asv_publish_offline.py --serve, or "
            f"python -m http.server --bind 127.0.0.1 --directory {os.path.relpath(html_dir)} 8080"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
