#!/bin/bash
# R2D2 on CartPole from its defaults: the fused LSTM unroll (new) against the tree before (old), alternating, 5 seeds.
cd /work/runs/s74/cp
for s in 1 2 3 4 5; do
  if [ $((s % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for v in $order; do
    if [ $v = old ]; then L=/work/bin/s73/learner; else L=/work/bin/s74/learner; fi
    $L --algo r2d2 --stop-when-solved --max-seconds 150 --seed $s --progress-secs 1 --run-dir run_${v}_s$s --summary-json ${v}_s$s.json > ${v}_s$s.log 2>&1
    echo "$v s$s done $(date +%T)" >> done.txt
  done
done
