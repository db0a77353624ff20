#!/bin/bash
# R2D2 on CartPole (the build with the LSTM unroll as one op): target period and n-step, 10 seeds, configs interleaved per seed.
cd /work/runs/s74/scr2
L=/work/bin/s74/learner
declare -A F
F[base]=""
F[tp50]="--target-update-period 50"
F[tp25]="--target-update-period 25"
F[tp50n5]="--target-update-period 50 --n-step 5"
F[n5]="--n-step 5"
for s in 1 2 3 4 5 6 7 8 9 10; do
  for v in base tp50 tp25 tp50n5 n5; do
    $L --algo r2d2 --stop-when-solved --max-seconds 60 --seed $s --progress-secs 1 --summary-json ${v}_s$s.json ${F[$v]} > ${v}_s$s.log 2>&1
    echo "$v s$s done $(date +%T)" >> done.txt
  done
done
