#!/bin/bash
# R2D2 on CartPole from its defaults: target period 10 (new default) against 100 (before), alternating, 10 seeds; V-trace's defaults; the masked R2D2 preset.
cd /work/runs/s74/cp2
for s in 1 2 3 4 5 6 7 8 9 10; do
  if [ $((s % 2)) = 1 ]; then order="tp100 tp10"; else order="tp10 tp100"; fi
  for v in $order; do
    if [ $v = tp100 ]; then L=/work/bin/s74/learner; else L=/work/bin/s74/learner_tp10; fi
    $L --algo r2d2 --stop-when-solved --max-seconds 150 --seed $s --progress-secs 1 --run-dir run_${v}_s$s --summary-json ${v}_s$s.json > ${v}_s$s.log 2>&1
    echo "$v s$s done $(date +%T)" >> done.txt
  done
done
for s in 1 2 3 4 5; do
  /work/bin/s74/learner_tp10 --stop-when-solved --max-seconds 60 --seed $s --progress-secs 1 --run-dir run_vt_s$s --summary-json vt_s$s.json > vt_s$s.log 2>&1
  echo "vt s$s done $(date +%T)" >> done.txt
done
for s in 1 2 3; do
  for v in tp100 tp10; do
    if [ $v = tp100 ]; then L=/work/bin/s74/learner; else L=/work/bin/s74/learner_tp10; fi
    $L --preset cartpole-masked-r2d2 --seed $s --stop-when-solved --max-seconds 300 --progress-secs 2 --run-dir run_masked_${v}_s$s --summary-json masked_${v}_s$s.json > masked_${v}_s$s.log 2>&1
    echo "masked $v s$s done $(date +%T)" >> done.txt
  done
done
