#!/bin/sh
# The learner with glibc malloc's heaps on transparent huge pages.
GLIBC_TUNABLES=glibc.malloc.hugetlb=1 exec "${LEARNER:-target/release/learner}" "$@"
