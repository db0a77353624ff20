//! seed-replay-service's integration tests, one test binary: each file below was its own binary,
//! and one binary compiles and links the dependency tree's generics once
//! instead of once per file (most of CI's time went there). Tests from
//! different files run side by side in this process, as `cargo test`'s
//! threads already ran the tests of one file.
mod bad_input;
mod binary;
mod concurrent;
mod grouped;
mod layering;
mod mirror;
mod mirror_binary;
mod persistence;
mod ring_tokens;
mod round_trip;
mod security;
mod sharded;
mod streams;
mod support;
mod tokens;
