#!/usr/bin/env bash
# Name the published Mote.xcframework.zip and MoteRPC.xcframework.zip in the root Package.swift,
# for a release commit (docs/swiftpm.md, "Releasing"; the two products: "Two products").
#
#   scripts/swiftpm-release.sh --url URL [--zip PATH] [--rpc-url URL] [--rpc-zip PATH] [--manifest FILE]
#
# URL is where the zip will be downloaded from (for example the release's asset URL,
# https://github.com/ORG/mote/releases/download/v0.1.0/Mote.xcframework.zip). PATH is the zip
# scripts/build-xcframework.sh wrote (default target/apple/Mote.xcframework.zip); its SHA-256 is
# the checksum SwiftPM verifies (`swift package compute-checksum` prints the same). FILE is the
# manifest to rewrite (default Package.swift at the repository root): its one
# `let release = (url: "...", checksum: "...")` line gets the URL and checksum. MoteRPC's zip
# (--rpc-zip, default target/apple/MoteRPC.xcframework.zip) goes the same way into the one
# `let rpcRelease = ...` line, at --rpc-url (default: URL with its last component replaced by
# MoteRPC.xcframework.zip, the two zips side by side). Prints the URLs and checksums.
# The zips must then be uploaded to exactly those URLs, unchanged, before the tag is pushed.
set -euo pipefail
ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
url="" zip="$ROOT/target/apple/Mote.xcframework.zip" manifest="$ROOT/Package.swift"
rpc_url="" rpc_zip="$ROOT/target/apple/MoteRPC.xcframework.zip"
while [ $# -gt 0 ]; do
  case "$1" in
    --url) url="$2"; shift 2 ;;
    --zip) zip="$2"; shift 2 ;;
    --rpc-url) rpc_url="$2"; shift 2 ;;
    --rpc-zip) rpc_zip="$2"; shift 2 ;;
    --manifest) manifest="$2"; shift 2 ;;
    -h|--help) sed -n '2,17p' "$0"; exit 0 ;;
    *) echo "swiftpm-release: unknown argument $1" >&2; exit 2 ;;
  esac
done
fail() { echo "swiftpm-release: $*" >&2; exit 1; }
[ -n "$url" ] || fail "--url is required"
[ -n "$rpc_url" ] || rpc_url="${url%/*}/MoteRPC.xcframework.zip"
for u in "$url" "$rpc_url"; do
  case "$u" in
    https://*.zip) ;;
    *) fail "--url must be an https URL ending in .zip (SwiftPM downloads binary targets over https): $u" ;;
  esac
  case "$u" in *'"'*|*'\'*|*'|'*) fail "--url must not contain quotes, backslashes or |" ;; esac
done
[ -s "$zip" ] || fail "no zip at $zip (run scripts/build-xcframework.sh)"
[ -s "$rpc_zip" ] || fail "no zip at $rpc_zip (run scripts/build-xcframework.sh)"
[ -f "$manifest" ] || fail "no manifest at $manifest"
checksum=$(sha256sum "$zip" | cut -d' ' -f1)
rpc_checksum=$(sha256sum "$rpc_zip" | cut -d' ' -f1)
pattern='^let release = \(url: "[^"]*", checksum: "[0-9a-f]*"\)$'
rpc_pattern='^let rpcRelease = \(url: "[^"]*", checksum: "[0-9a-f]*"\)$'
n=$(grep -cE "$pattern" "$manifest" || true)
[ "$n" = 1 ] || fail "$manifest has $n lines like 'let release = (url: \"...\", checksum: \"...\")', expected 1"
n=$(grep -cE "$rpc_pattern" "$manifest" || true)
[ "$n" = 1 ] || fail "$manifest has $n lines like 'let rpcRelease = (url: \"...\", checksum: \"...\")', expected 1"
tmp=$(mktemp "$manifest.XXXXXX")
sed -E -e "s|$pattern|let release = (url: \"$url\", checksum: \"$checksum\")|" \
  -e "s|$rpc_pattern|let rpcRelease = (url: \"$rpc_url\", checksum: \"$rpc_checksum\")|" "$manifest" >"$tmp"
mv "$tmp" "$manifest"
echo "swiftpm-release: $manifest names $url"
echo "swiftpm-release: checksum $checksum ($(stat -c %s "$zip") bytes)"
echo "swiftpm-release: $manifest names $rpc_url"
echo "swiftpm-release: checksum $rpc_checksum ($(stat -c %s "$rpc_zip") bytes)"
