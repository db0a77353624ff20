//! seed-replay's integration tests, one test binary: each file below was its own binary,
//! and one binary compiles and links the dependency tree's generics once
//! instead of once per file (most of CI's time went there). Tests from
//! different files run side by side in this process, as `cargo test`'s
//! threads already ran the tests of one file.
mod checksummed;
mod layering;
mod replay_api;
mod replay_checkpoint;
mod replay_stress;
mod variable_fields;
