#!/usr/bin/env bash
# Re-fetch the JavaScript/CSS that asv's dashboard loads from CDNs, from the npm registry, into
# asv_bench/vendor/ so `scripts/asv_publish_offline.py` can publish a page that needs no network.
# The versions are the ones asv 0.6's www/index.html names; stupidtable 1.0.1 is not on npm, so
# stupid-table-plugin 1.1.3 (same API: $(table).stupidtable(sortFns)) stands in for it.
set -euo pipefail
root="$(cd "$(dirname "$0")/.." && pwd)"
dest="$root/asv_bench/vendor"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
cd "$tmp"
pkgs=(jquery@3.3.1 flot@0.8.3 flot-orderbars@1.0.0 stupid-table-plugin@1.1.3 blueimp-md5@2.19.0 bootstrap@3.1.1)
for p in "${pkgs[@]}"; do
    npm pack --silent "$p" >/dev/null
done
rm -rf "$dest"
mkdir -p "$dest"
take() {  # take TARBALL DESTDIR FILE...  (paths inside the tarball's package/ folder)
    local tgz=$1 out=$2; shift 2
    mkdir -p "$out" x
    tar xzf "$tgz" -C x
    # A leading dist/ is dropped: build-output folders named dist/ are commonly git-ignored.
    for f in "$@"; do local to="${f#dist/}"; mkdir -p "$out/$(dirname "$to")"; cp "x/package/$f" "$out/$to"; done
    for lic in LICENSE LICENSE.txt LICENSE.md; do [ -f "x/package/$lic" ] && cp "x/package/$lic" "$out/LICENSE.txt" && break; done
    rm -rf x
}
take jquery-3.3.1.tgz "$dest/jquery-3.3.1" dist/jquery.min.js
take flot-0.8.3.tgz "$dest/flot-0.8.3" jquery.flot.js jquery.flot.time.js jquery.flot.selection.js jquery.flot.categories.js
take flot-orderbars-1.0.0.tgz "$dest/flot-orderbars-1.0.0" js/jquery.flot.orderBars.js
take stupid-table-plugin-1.1.3.tgz "$dest/stupid-table-plugin-1.1.3" stupidtable.min.js
take blueimp-md5-2.19.0.tgz "$dest/blueimp-md5-2.19.0" js/md5.min.js
take bootstrap-3.1.1.tgz "$dest/bootstrap-3.1.1" dist/css/bootstrap.min.css dist/js/bootstrap.min.js \
    dist/fonts/glyphicons-halflings-regular.eot dist/fonts/glyphicons-halflings-regular.svg \
    dist/fonts/glyphicons-halflings-regular.ttf dist/fonts/glyphicons-halflings-regular.woff
{
    echo "# Vendored dashboard assets"
    echo
    echo "Fetched from the npm registry by \`scripts/vendor_asv_assets.sh\` on $(date -u +%Y-%m-%d)"
    echo "so the published asv dashboard renders with no network. Each folder keeps its licence."
    echo
    echo "| npm package | tarball sha256 |"
    echo "| --- | --- |"
    for p in "${pkgs[@]}"; do
        t="$(echo "$p" | sed 's/@/-/').tgz"
        echo "| \`$p\` | \`$(sha256sum "$t" | cut -d' ' -f1)\` |"
    done
} > "$dest/README.md"
echo "vendored into $dest:"; find "$dest" -type f | sort
