#!/bin/bash
# R2D2 on CartPole, the fused build: settings screened, 5 seeds each, configs interleaved per seed.
cd /work/runs/s74/scr
L=/work/bin/s74/learner
declare -A F
F[base]=""
F[lr4e3]="--learning-rate 4e-3"
F[tp50]="--target-update-period 50"
F[b32]="--batch-size 32"
F[spi1]="--samples-per-insert 1"
F[n5]="--n-step 5"
for s in 1 2 3 4 5; do
  for v in base lr4e3 tp50 b32 spi1 n5; do
    $L --algo r2d2 --stop-when-solved --max-seconds 60 --seed $s --progress-secs 1 --summary-json ${v}_s$s.json ${F[$v]} > ${v}_s$s.log 2>&1
    echo "$v s$s done $(date +%T)" >> done.txt
  done
done
