#!/usr/bin/env python
"""``asv publish``, then point the dashboard at vendored copies of its CDN scripts and styles.

asv's ``index.html`` loads jQuery, flot (and plugins), stupidtable, blueimp-md5 and Bootstrap
from CDNs, so without network the page shows only asv's "failed to load" error. This script
runs ``asv publish``, copies ``asv_bench/vendor/`` (fetched from npm by
``scripts/vendor_asv_assets.sh``) into the html folder, and rewrites every CDN reference to
the local copy, dropping the ``integrity`` hashes (they name the CDN's minified builds).
A CDN reference it does not know (a newer asv) is an error, not a silent offline failure.

    python scripts/asv_publish_offline.py            # asv_bench/html/, from asv_bench/results/
    python scripts/asv_publish_offline.py --no-publish   # only rewrite an existing html folder
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
ASV_DIR = ROOT / "asv_bench"
VENDOR = ASV_DIR / "vendor"

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


def rewrite(html_dir: Path) -> None:
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
        page.write_text(text, encoding="utf-8")
        problems += [f"{page.name}: {u}" for u in unknown]
        print(f"rewrote {page.relative_to(ROOT) if page.is_relative_to(ROOT) else page}")
    if problems:
        sys.exit(
            "CDN references with no vendored copy (update LOCAL and the vendor script):\n  " + "\n  ".join(problems)
        )


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", default="asv.conf.json", help="asv config in asv_bench/ (default asv.conf.json)")
    parser.add_argument(
        "--html-dir", default=None, help="output folder (default: the config's html_dir, asv_bench/html)"
    )
    parser.add_argument("--no-publish", action="store_true", help="only rewrite an already published folder")
    args = parser.parse_args(argv)
    html_dir = Path(args.html_dir).resolve() if args.html_dir else ASV_DIR / "html"
    if not args.no_publish:
        cmd = [sys.executable, "-m", "asv", "publish", "--config", args.config]
        if args.html_dir:
            cmd += ["--html-dir", str(html_dir)]
        subprocess.run(cmd, cwd=ASV_DIR, check=True, env=dict(os.environ))
    rewrite(html_dir)
    print(
        f"offline dashboard: {html_dir / 'index.html'} (serve it: python -m http.server --bind 127.0.0.1 "
        f"--directory {html_dir}, or asv preview)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
