//! No code: this crate exists for its `Cargo.toml`.
//!
//! It asks for the third-party features the whole workspace enables, so a
//! build of one package (`maturin` building `seed-rs-python`, the loom
//! checks of `seed-replay` and `seed-learner`) resolves the same feature
//! sets as `cargo test --workspace` and reuses its artifacts instead of
//! compiling the dependency tree again. `scripts/check-feature-union.sh`
//! keeps the list exact.
