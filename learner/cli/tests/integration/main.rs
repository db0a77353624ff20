//! the learner binary's and its docs' integration tests, one test binary: each file below was its own binary,
//! and one binary compiles and links the dependency tree's generics once
//! instead of once per file (most of CI's time went there). Tests from
//! different files run side by side in this process, as `cargo test`'s
//! threads already ran the tests of one file.
mod cli_reference;
mod local_actors_tls;
mod logging;
mod readme;
mod settings_files;
