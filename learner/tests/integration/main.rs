//! seed-learner's integration tests, one test binary: each file below was its own binary,
//! and one binary compiles and links the dependency tree's generics once
//! instead of once per file (most of CI's time went there). Tests from
//! different files run side by side in this process, as `cargo test`'s
//! threads already ran the tests of one file.
mod layering;
mod learning;
mod liveness;
mod metrics_endpoint;
mod pendulum;
mod reconnect;
mod remote_replay;
mod serving;
mod soak;
mod spec_from_hello;
mod stream_errors;
mod support;
mod tls;
mod wire_fuzz;
