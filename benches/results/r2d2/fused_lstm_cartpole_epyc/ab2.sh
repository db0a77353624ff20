#!/bin/bash
# Seeds 6-10 of the R2D2 CartPole A/B, then V-trace's defaults (seeds 1-5), then the masked presets old/new.
cd /work/runs/s74/cp
for s in 6 7 8 9 10; do
  if [ $((s % 2)) = 1 ]; then order="old new"; else order="new old"; fi
  for v in $order; do
    if [ $v = old ]; then L=/work/bin/s73/learner; else L=/work/bin/s74/learner; fi
    $L --algo r2d2 --stop-when-solved --max-seconds 150 --seed $s --progress-secs 1 --run-dir run_${v}_s$s --summary-json ${v}_s$s.json > ${v}_s$s.log 2>&1
    echo "$v s$s done $(date +%T)" >> done.txt
  done
done
for s in 1 2 3 4 5; do
  /work/bin/s74/learner --stop-when-solved --max-seconds 60 --seed $s --progress-secs 1 --run-dir run_vt_s$s --summary-json vt_s$s.json > vt_s$s.log 2>&1
  echo "vt s$s done $(date +%T)" >> done.txt
done
mkdir -p ../masked && cd ../masked
for p in cartpole-masked-r2d2 cartpole-masked-lstm; do
  for v in old new; do
    if [ $v = old ]; then L=/work/bin/s73/learner; else L=/work/bin/s74/learner; fi
    $L --preset $p --seed 1 --stop-when-solved --max-seconds 400 --progress-secs 2 --run-dir run_${p}_${v} --summary-json ${p}_${v}.json > ${p}_${v}.log 2>&1
    echo "$p $v done $(date +%T)" >> done.txt
  done
done
