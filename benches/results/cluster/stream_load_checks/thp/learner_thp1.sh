#!/bin/sh
# The learner with one malloc arena, its heap on transparent huge pages.
GLIBC_TUNABLES=glibc.malloc.hugetlb=1:glibc.malloc.arena_max=1 exec "${LEARNER:-target/release/learner}" "$@"
