#!/usr/bin/env bash
# The hour soak (not in CI): a learner training CartPole under 200 churning
# actor streams (a tenth replaced every minute, garbage streams, one actor
# frozen for 5 minutes) beside a replay server under 4 writers and 2
# samplers, for 60 minutes; every minute's RSS, fds, threads, env steps/s,
# return and table size in OUT/soak.json, the hour in OUT/soak.png, and
# the verdict (slopes after minute 10, the return, the replay read-back)
# printed at the end. See benches/src/hour_soak/mod.rs.
#
# usage: scripts/soak.sh [OUT] [soak_bench flags...]
#   OUT [default: target/soak]; e.g. `scripts/soak.sh target/soak --minutes 5`
#   for a short look. Flags: `target/release/soak_bench --help`.
#
# The binaries are copied into OUT/bin first, so rebuilding the tree while
# the hour runs does not touch the processes under test.
set -euo pipefail
cd "$(dirname "$0")/.."
out=${1:-target/soak}
shift || true
cargo build --release -p seed-benches --bin soak_bench \
  -p seed-learner-cli --bin learner -p seed-actor --bin actor \
  -p seed-replay-service --bin replay-server
mkdir -p "$out/bin"
for b in soak_bench learner actor replay-server; do
  cp -f "target/release/$b" "$out/bin/$b"
done
git rev-parse HEAD >"$out/commit.txt" 2>/dev/null || true
exec "$out/bin/soak_bench" --out "$out" \
  --learner "$out/bin/learner" --actor "$out/bin/actor" \
  --replay-server "$out/bin/replay-server" "$@"
