//! Empty: present so that cargo honours this crate's `[build-dependencies]`
//! (the host-side feature sets; see Cargo.toml).
fn main() {}
