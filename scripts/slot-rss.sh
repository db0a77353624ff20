#!/usr/bin/env bash
# Learner RSS while actors come and go: starts a training learner with no
# local actors, runs ROUNDS actor processes of 8 envs one after another
# (800 env steps each) and prints the learner's VmRSS (KiB) every 100.
#
# usage: scripts/slot-rss.sh [BIN_DIR] [PORT] [ROUNDS]
#   BIN_DIR holds `learner` and `actor` [default: target/release]
set -euo pipefail
bin=${1:-target/release}
port=${2:-50611}
rounds=${3:-300}
log=$(mktemp)
RAYON_NUM_THREADS=1 "$bin/learner" --local-actors 0 --listen "127.0.0.1:$port" --progress-secs 0 >"$log" 2>&1 &
learner=$!
trap 'kill -INT $learner 2>/dev/null; wait $learner 2>/dev/null; rm -f "$log"' EXIT
until "$bin/actor" --learner "127.0.0.1:$port" --envs 1 --max-env-steps 1 --max-reconnects 0 >/dev/null 2>&1; do
  sleep 0.2
done
rss() { awk '/VmRSS/ {print $2}' "/proc/$learner/status"; }
echo "actors rss_kib"
echo "0 $(rss)"
for i in $(seq 1 "$rounds"); do
  "$bin/actor" --learner "127.0.0.1:$port" --envs 8 --max-env-steps 800 >/dev/null 2>&1
  if (( i % 100 == 0 )); then echo "$i $(rss)"; fi
done
