#!/usr/bin/env bash
# Fails, naming each dependency and both feature sets, when a single-package
# build that CI runs would resolve other features than the workspace build
# (and so compile the dependency tree a second time). The fix is a line in
# shared/feature-union/Cargo.toml; see the comment there.
#
# Compared: the target side (normal edges, no proc macros) and the host side
# (build scripts and proc macros) apart, as cargo resolves them apart.
set -euo pipefail
cd "$(dirname "$0")/.."

tree() { cargo tree --locked "$@" -f '{p} [{f}]' --prefix none | sed 's/ (\*)$//' | sort -u; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

tree --workspace -e normal,dev,no-proc-macro >"$tmp/ws.target"
tree --workspace -e normal,build,dev >"$tmp/ws.all"
# A host-side line matches when the workspace builds the same package with
# the same features anywhere (cargo tree prints a package built alike on
# both sides once).
cp "$tmp/ws.all" "$tmp/ws.host"

failed=0
# package, edges of its CI build (dev: it is a test build)
for build in "seed-rs-python normal,build" "seed-replay normal,build,dev" "seed-learner normal,build,dev"; do
  set -- $build
  pkg=$1 edges=$2
  tree -p "$pkg" -e "${edges/,build/},no-proc-macro" >"$tmp/p.target"
  tree -p "$pkg" -e "$edges" >"$tmp/p.all"
  comm -23 "$tmp/p.all" "$tmp/p.target" >"$tmp/p.host"
  for side in target host; do
    # Lines of the package's build that the workspace build lacks: a
    # dependency with another feature set (workspace-only crates are fine).
    while read -r name version features; do
      [ "$name" = "${pkg}" ] && continue
      case "$name" in seed-*) continue ;; esac
      ws=$(grep "^$name $version " "$tmp/ws.$side" | cut -d' ' -f3- | tr '\n' ' ' || true)
      [ -z "$ws" ] && ws=$(grep "^$name $version " "$tmp/ws.all" | cut -d' ' -f3- | tr '\n' ' ' || true)
      echo "$pkg ($side): $name $version has $features, the workspace ${ws:-(not built)}"
      failed=1
    done < <(comm -13 "$tmp/ws.$side" "$tmp/p.$side")
  done
done
if [ "$failed" = 1 ]; then
  echo "check-feature-union: add the workspace's features to shared/feature-union/Cargo.toml" >&2
  exit 1
fi
echo "check-feature-union: the single-package builds resolve the workspace's features"
