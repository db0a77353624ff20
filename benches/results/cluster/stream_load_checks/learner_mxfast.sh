#!/bin/sh
# The learner with glibc's fastbins off; passed to stream_load as --learner.
GLIBC_TUNABLES=glibc.malloc.mxfast=0 exec "${LEARNER:-target/release/learner}" "$@"
