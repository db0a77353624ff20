#!/usr/bin/env bash
# The learner's CPU math, its effect on learning: the learner binary
# before and after, alternating in one sitting, nothing else running.
#
#   bash benches/results/cpu_math/ab_learning.sh BEFORE_LEARNER AFTER_LEARNER PYTHON OUT_DIR
#
# BEFORE_LEARNER and AFTER_LEARNER are `learner` binaries built by
# `cargo build --release -p seed-learner-cli --bin learner` at the two
# commits; PYTHON has the seed_rs package with MinAtar
# (`pip install "./python[minatar]"`), the same actor for both sides.
#
# - CartPole-v1, the defaults: `learner --max-seconds 60 --stop-when-solved
#   --seed S` for S = 1..5 (OUT_DIR/cartpole_{before,after}_S.json);
# - MinAtar Breakout, `--preset minatar`, MINATAR_SECONDS (default 1200)
#   each, learner and actor seeded S for S = 1..2, with
#   `python -m seed_rs.actor --env MinAtar/Breakout-v1 --envs 64`
#   (OUT_DIR/minatar_{before,after}_S/: run dir, summary, logs).
#
# Pairs alternate which side runs first. Summarise with
# benches/results/cpu_math/summarise_learning.py OUT_DIR.
set -euo pipefail
BEFORE=$(realpath "$1") AFTER=$(realpath "$2") PYTHON=$3 OUT=$4
MINATAR_SECONDS=${MINATAR_SECONDS:-1200}
mkdir -p "$OUT"
OUT=$(realpath "$OUT")
order() { if (( $1 % 2 )); then echo before after; else echo after before; fi; }
bin_of() { if [[ $1 == before ]]; then echo "$BEFORE"; else echo "$AFTER"; fi; }
port=50300
for seed in 1 2 3 4 5; do
  for side in $(order "$seed"); do
    port=$((port + 1))
    echo "cartpole $side seed $seed" >&2
    (cd "$OUT" && "$(bin_of "$side")" --listen "127.0.0.1:$port" --max-seconds 60 \
      --stop-when-solved --seed "$seed" --summary-json "cartpole_${side}_$seed.json" \
      > "cartpole_${side}_$seed.log" 2>&1)
  done
done
for seed in 1 2; do
  for side in $(order "$seed"); do
    port=$((port + 1))
    dir="$OUT/minatar_${side}_$seed"
    mkdir -p "$dir"
    echo "minatar $side seed $seed (${MINATAR_SECONDS} s)" >&2
    "$(bin_of "$side")" --preset minatar --listen "127.0.0.1:$port" --seed "$seed" \
      --max-seconds "$MINATAR_SECONDS" --run-dir "$dir/run" --summary-json "$dir/summary.json" \
      > "$dir/learner.log" 2>&1 &
    learner=$!
    "$PYTHON" -m seed_rs.actor --env MinAtar/Breakout-v1 --envs 64 --seed "$seed" \
      --learner "127.0.0.1:$port" > "$dir/actor.log" 2>&1 &
    actor=$!
    wait "$learner" || echo "learner $side seed $seed exited with $?" >&2
    kill "$actor" 2>/dev/null || true
    wait "$actor" 2>/dev/null || true
  done
done
