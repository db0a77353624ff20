#!/usr/bin/env bash
# The house's third pass, A/B: the learner and actor binaries before and
# after it, alternating in one sitting, nothing else running.
#
#   bash benches/results/house/ab_third_pass.sh BEFORE_DIR AFTER_DIR OUT_DIR
#
# BEFORE_DIR and AFTER_DIR each hold `learner` and `actor` built by
# `cargo build --release -p seed-learner-cli -p seed-actor --bin learner
# --bin actor` at the two commits; `latency` is this tree's harness
# (target/release/latency), the same for both sides. Pairs alternate which
# side runs first. Writes OUT_DIR/{lat,learn}_{before,after}_N.json.
set -euo pipefail
BEFORE=$(realpath "$1") AFTER=$(realpath "$2") OUT=$3
LATENCY=${LATENCY:-target/release/latency}
mkdir -p "$OUT"
export RAYON_NUM_THREADS=1
order() { if (( $1 % 2 )); then echo before after; else echo after before; fi; }
dir_of() { if [[ $1 == before ]]; then echo "$BEFORE"; else echo "$AFTER"; fi; }
for run in 1 2 3; do
  for side in $(order "$run"); do
    bin=$(dir_of "$side")
    echo "latency $side $run"
    "$LATENCY" --actors 1 --envs-per-actor 1 --rounds 5 --duration-secs 2 \
      --learner-bin "$bin/learner" --actor-bin "$bin/actor" \
      --json "$OUT/lat_${side}_$run.json" > "$OUT/lat_${side}_$run.log" 2>&1
  done
done
for seed in 1 2 3 4 5; do
  for side in $(order "$seed"); do
    bin=$(dir_of "$side")
    echo "learner $side seed $seed"
    (cd "$OUT" && "$bin/learner" --max-seconds 60 --seed "$seed" \
      --summary-json "learn_${side}_$seed.json" > "learn_${side}_$seed.log" 2>&1)
  done
done
