//! Generated protocol types and service stubs of `seed.v1.Replay`, see
//! `proto/seed/v1/replay.proto`.
#![allow(clippy::all, missing_docs)]

tonic::include_proto!("seed.v1");
