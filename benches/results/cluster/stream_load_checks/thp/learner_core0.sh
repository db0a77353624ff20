#!/bin/sh
# The learner pinned to CPU 0 (stream_load itself, and its load children, run under taskset -c 1).
exec taskset -c 0 "${LEARNER:-target/release/learner}" "$@"
