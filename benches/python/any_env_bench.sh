#!/usr/bin/env bash
# The any-env figures of the README: a learner without --env (the first
# hello fixes the spec) fed by the Python actor.
#   cartpole: Gymnasium CartPole-v1 to a 100-episode mean return of 475,
#             seeds 1..3 (learner --stop-when-solved)
#   pendulum: Gymnasium Pendulum-v1 to a 100-episode mean return of -250,
#             seeds 1..3, with the Pendulum flags of the README
#   pong:     ALE/Pong-v5 with the standard preprocessing, 16 and 64 envs:
#             env steps/s the learner ingests (x4 for ALE frames) and the
#             actor's round trip, training on the CPU, 35 s of stepping each
#   pong_serve: the same with --no-train (what serving alone ingests), 25 s
# Needs: target/release/learner and a Python with seed_rs, gymnasium and
# (pong) ale-py + OpenCV: PYTHON=path/to/venv/bin/python.
# Writes benches/results/any_env/*.json.
set -euo pipefail
cd "$(dirname "$0")/../.."
PY="${PYTHON:-python3}"
OUT=benches/results/any_env
mkdir -p "$OUT"
export RAYON_NUM_THREADS=1
PORT=50071

run_pair() {  # name, learner flags..., --, actor flags...
  local name=$1; shift
  local lflags=() aflags=()
  while [[ $1 != -- ]]; do lflags+=("$1"); shift; done; shift
  aflags=("$@")
  PORT=$((PORT + 1))
  target/release/learner --local-actors 0 --listen "127.0.0.1:$PORT" --progress-secs 0 \
    --summary-json "$OUT/${name}_learner.json" "${lflags[@]}" > "$OUT/${name}_learner.log" 2>&1 &
  local lpid=$!
  "$PY" -m seed_rs.actor --learner "127.0.0.1:$PORT" --max-reconnects 2 --log warn \
    --summary-json "$OUT/${name}_actor.json" "${aflags[@]}" > "$OUT/${name}_actor.log" 2>&1 || true
  # The actor is done (or the learner solved and left): stop the learner,
  # which writes its summary (its --max-seconds is only a backstop).
  kill -INT "$lpid" 2>/dev/null || true
  wait "$lpid" || true
  echo "$name: $(cat "$OUT/${name}_learner.json" | tr -d '\n' | cut -c1-200)"
}

PHASES="${PHASES:-cartpole pendulum pong pong_serve}"
if [[ " $PHASES " == *" cartpole "* ]]; then
  for seed in 1 2 3; do
    run_pair "cartpole_seed$seed" --seed "$seed" --stop-when-solved --max-seconds 180 -- \
      --env CartPole-v1 --envs 64 --seed "$seed" --max-seconds 190
  done
fi
if [[ " $PHASES " == *" pendulum "* ]]; then
  for seed in 1 2 3; do
    run_pair "pendulum_seed$seed" --seed "$seed" --stop-when-solved --target-return -250 \
      --reward-scale 0.1 --discount 0.9 --learning-rate 3e-4 --lr-decay-steps 0 --optimizer-epsilon 1e-8 --replay-ratio 1 --unroll-length 8 \
      --entropy-cost 0.001 --max-seconds 300 -- \
      --env Pendulum-v1 --envs 64 --seed "$seed" --max-seconds 310
  done
fi
if [[ " $PHASES " == *" pong "* ]]; then
  for envs in 16 64; do
    run_pair "pong_${envs}envs" --learning-rate 6e-4 --lr-decay-steps 0 --optimizer-epsilon 1e-8 --batch-size 32 --unroll-length 20 --replay-ratio 4 --discount 0.99 --entropy-cost 0.01 --max-seconds 120 -- \
      --env ALE/Pong-v5 --envs "$envs" --seed 1 --max-seconds 35
  done
fi
if [[ " $PHASES " == *" pong_serve "* ]]; then
  for envs in 16 64; do
    run_pair "pong_serve_${envs}envs" --no-train --max-seconds 120 -- \
      --env ALE/Pong-v5 --envs "$envs" --seed 1 --max-seconds 25
  done
fi
