#!/bin/bash
# R2D2 on CartPole from the new defaults (target every 10): shorter periods, 10 seeds, interleaved per seed.
cd /work/runs/s74/scr4
L=/work/bin/s74/learner_tp10
declare -A F
F[tp10]=""
F[tp5]="--target-update-period 5"
F[tp2]="--target-update-period 2"
for s in 1 2 3 4 5 6 7 8 9 10; do
  for v in tp10 tp5 tp2; do
    $L --algo r2d2 --stop-when-solved --max-seconds 60 --seed $s --progress-secs 1 --summary-json ${v}_s$s.json ${F[$v]} > ${v}_s$s.log 2>&1
    echo "$v s$s done $(date +%T)" >> done.txt
  done
done
