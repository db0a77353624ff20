//! Model-checked tests of the slot protocol and of the `Block` writer's
//! eviction count (loom). Built only with
//! `--cfg loom`:
//! `RUSTFLAGS="--cfg loom" cargo test -p seed-replay --release --lib loom`
//! (with its own `CARGO_TARGET_DIR`; see `src/README.md`, "Loom tests").
mod loom_block;
mod loom_slot;
