//! Generated protocol types (`seed.v1`), see `proto/seed/v1/seed.proto`.
#![allow(clippy::all, missing_docs)]

tonic::include_proto!("seed.v1");
