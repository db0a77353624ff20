#!/bin/bash
# CartPole V-trace to 475: in-process buffer vs remote table, alternating.
# Writes its summaries to $OUT (default /tmp/remote_replay); needs
# target/release/{learner,replay-server} built.
mkdir -p "${OUT:-/tmp/remote_replay}"
cd "$(dirname "$0")/../../.."
L=./target/release/learner
$L --print-replay-table-config --replay-addr 127.0.0.1:50071/unrolls > ${OUT:-/tmp/remote_replay}/table.json
for i in 1 2 3; do
  $L --stop-when-solved --max-seconds 300 --progress-secs 0 --summary-json ${OUT:-/tmp/remote_replay}/local-$i.json > ${OUT:-/tmp/remote_replay}/local-$i.log 2>&1
  ./target/release/replay-server --config ${OUT:-/tmp/remote_replay}/table.json --listen 127.0.0.1:50071 > ${OUT:-/tmp/remote_replay}/server-$i.log 2>&1 &
  spid=$!
  # Until the server accepts connections.
  until (exec 3<>/dev/tcp/127.0.0.1/50071) 2>/dev/null; do sleep 0.1; done
  $L --replay-addr 127.0.0.1:50071/unrolls --stop-when-solved --max-seconds 300 --progress-secs 0 --summary-json ${OUT:-/tmp/remote_replay}/remote-$i.json > ${OUT:-/tmp/remote_replay}/remote-$i.log 2>&1
  kill $spid; wait $spid
done
echo done
