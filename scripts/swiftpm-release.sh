#!/usr/bin/env bash
# Name a published Mote.xcframework.zip in the root Package.swift, for a release commit
# (docs/swiftpm.md, "Releasing").
#
#   scripts/swiftpm-release.sh --url URL [--zip PATH] [--manifest FILE]
#
# URL is where the zip will be downloaded from (for example the release's asset URL,
# https://github.com/ORG/mote/releases/download/v0.1.0/Mote.xcframework.zip). PATH is the zip
# scripts/build-xcframework.sh wrote (default target/apple/Mote.xcframework.zip); its SHA-256 is
# the checksum SwiftPM verifies (`swift package compute-checksum` prints the same). FILE is the
# manifest to rewrite (default Package.swift at the repository root): its one
# `let release = (url: "...", checksum: "...")` line gets the URL and checksum. Prints both.
# The zip must then be uploaded to exactly URL, unchanged, before the tag is pushed.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
url="" zip="$ROOT/target/apple/Mote.xcframework.zip" manifest="$ROOT/Package.swift"
while [ $# -gt 0 ]; do
  case "$1" in
    --url) url="$2"; shift 2 ;;
    --zip) zip="$2"; shift 2 ;;
    --manifest) manifest="$2"; shift 2 ;;
    -h|--help) sed -n '2,13p' "$0"; exit 0 ;;
    *) echo "swiftpm-release: unknown argument $1" >&2; exit 2 ;;
  esac
done
fail() { echo "swiftpm-release: $*" >&2; exit 1; }
[ -n "$url" ] || fail "--url is required"
case "$url" in
  https://*.zip) ;;
  *) fail "--url must be an https URL ending in .zip (SwiftPM downloads binary targets over https): $url" ;;
esac
case "$url" in *'"'*|*'\'*) fail "--url must not contain quotes or backslashes" ;; esac
[ -s "$zip" ] || fail "no zip at $zip (run scripts/build-xcframework.sh)"
[ -f "$manifest" ] || fail "no manifest at $manifest"
checksum=$(sha256sum "$zip" | cut -d' ' -f1)
pattern='^let release = \(url: "[^"]*", checksum: "[0-9a-f]*"\)$'
n=$(grep -cE "$pattern" "$manifest" || true)
[ "$n" = 1 ] || fail "$manifest has $n lines like 'let release = (url: \"...\", checksum: \"...\")', expected 1"
tmp=$(mktemp "$manifest.XXXXXX")
sed -E "s|$pattern|let release = (url: \"$url\", checksum: \"$checksum\")|" "$manifest" >"$tmp"
mv "$tmp" "$manifest"
echo "swiftpm-release: $manifest names $url"
echo "swiftpm-release: checksum $checksum ($(stat -c %s "$zip") bytes)"
