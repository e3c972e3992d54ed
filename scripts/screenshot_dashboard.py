#!/usr/bin/env python
"""Screenshot the published asv dashboard with headless Chromium: proof that it renders offline.

Serves the html folder on 127.0.0.1 (an ephemeral port, nothing else listens), then takes
two pictures into docs/_static/: the benchmark grid and one graph (GFLOP/s against n for
every algorithm of a backend). Chromium runs with networking features off, so a page that
still needed a CDN would show asv's "failed to load" error in the picture.

    python scripts/asv_publish_offline.py          # first: publish + vendor rewrite
    python scripts/screenshot_dashboard.py         # -> docs/_static/asv_grid.png, asv_graph.png
    python scripts/screenshot_dashboard.py --grid-name "" --graph-name asv_graph_h100.png \\
        --graph "matmul.Square.track_gflops?x-axis=n&p-backend='cuda'&p-backend='opencl'&machine=polymm-h100"

Needs Debian's ``chromium`` (``apt-get install chromium``) or ``CHROMIUM=/path/to/chrome``.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import http.server
import os
import shutil
import socketserver
import subprocess
import sys
import tempfile
import threading
import urllib.parse
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
DEFAULT_GRAPH = (
    "matmul.Square.track_gflops?x-axis=n&p-backend='cpu'&p-dtype='float32'&y-axis-scale=log"
    "&machine=polymm-2core-ci&python=/work/main/.venv/bin/python"
)

CHROMIUM_FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-extensions",
    "--hide-scrollbars",
    "--mute-audio",
]


def find_chromium() -> str:
    for name in (os.environ.get("CHROMIUM"), "chromium", "chromium-browser", "google-chrome"):
        if name and shutil.which(name):
            return shutil.which(name)
    sys.exit("no Chromium found: apt-get install chromium, or set CHROMIUM=/path/to/chrome")


@contextlib.contextmanager
def serve(directory: Path):
    """A static file server for ``directory`` on 127.0.0.1, in a thread; yields its base URL."""

    class Quiet(http.server.SimpleHTTPRequestHandler):
        def log_message(self, *args):
            pass

    handler = functools.partial(Quiet, directory=str(directory))
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), handler) as httpd:
        thread = threading.Thread(target=httpd.serve_forever, daemon=True)
        thread.start()
        try:
            yield f"http://127.0.0.1:{httpd.server_address[1]}"
        finally:
            httpd.shutdown()


def shoot(chromium: str, url: str, out: Path, size: str, wait_ms: int) -> None:
    with tempfile.TemporaryDirectory(prefix="polymm-chromium-") as profile:
        cmd = [
            chromium,
            *CHROMIUM_FLAGS,
            f"--user-data-dir={profile}",
            f"--window-size={size}",
            f"--virtual-time-budget={wait_ms}",
            f"--screenshot={out}",
            url,
        ]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=180)
    if done.returncode != 0 or not out.exists():
        sys.exit(f"chromium failed ({done.returncode}) for {url}:\n{done.stderr[-2000:]}")
    print(f"{out.relative_to(ROOT) if out.is_relative_to(ROOT) else out}  <-  {url}")


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--html-dir", default=str(ROOT / "asv_bench" / "html"))
    parser.add_argument("--out-dir", default=str(ROOT / "docs" / "_static"))
    parser.add_argument("--graph", default=DEFAULT_GRAPH, help="asv graph location: benchmark?params")
    parser.add_argument("--grid-name", default="asv_grid.png", help="file name of the grid picture ('' for none)")
    parser.add_argument("--graph-name", default="asv_graph.png")
    parser.add_argument("--size", default="1400,1000", help="window size W,H")
    parser.add_argument("--wait-ms", type=int, default=20000, help="virtual time the page gets to load and draw")
    args = parser.parse_args(argv)

    html = Path(args.html_dir)
    if not (html / "index.html").exists():
        sys.exit(f"{html}/index.html not found: run scripts/asv_publish_offline.py first")
    if "cdn." in (html / "index.html").read_text() or "code.jquery.com" in (html / "index.html").read_text():
        sys.exit(f"{html}/index.html still loads from CDNs: run scripts/asv_publish_offline.py")
    out_dir = Path(args.out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    chromium = find_chromium()
    location, _, query = args.graph.partition("?")
    pairs = urllib.parse.parse_qsl(query, keep_blank_values=True)
    graph_hash = location + (
        "?" + "&".join(f"{urllib.parse.quote(k)}={urllib.parse.quote(v)}" for k, v in pairs) if pairs else ""
    )
    with serve(html) as base:
        if args.grid_name:
            shoot(chromium, f"{base}/index.html", out_dir / args.grid_name, args.size, args.wait_ms)
        shoot(chromium, f"{base}/index.html#{graph_hash}", out_dir / args.graph_name, args.size, args.wait_ms)
    return 0


if __name__ == "__main__":
    sys.exit(main())
