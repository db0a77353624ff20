#!/bin/sh
# The learner with one malloc arena (the control for learner_thp1.sh).
GLIBC_TUNABLES=glibc.malloc.arena_max=1 exec "${LEARNER:-target/release/learner}" "$@"
