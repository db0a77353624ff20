#!/bin/bash
# R2D2 from its new defaults against V-trace from its defaults on CartPole, alternating per seed, 10 seeds each (the x3 bar).
cd /work/runs/s74/cp3
L=/work/bin/s74/learner_tp10
for s in 1 2 3 4 5 6 7 8 9 10; do
  if [ $((s % 2)) = 1 ]; then order="r2d2 vt"; else order="vt r2d2"; fi
  for v in $order; do
    f=""; [ $v = r2d2 ] && f="--algo r2d2"
    $L $f --stop-when-solved --max-seconds 150 --seed $s --progress-secs 1 --run-dir run_${v}_s$s --summary-json ${v}_s$s.json > ${v}_s$s.log 2>&1
    echo "$v s$s done $(date +%T)" >> done.txt
  done
done
