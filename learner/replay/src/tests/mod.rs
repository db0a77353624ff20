//! Model-checked tests of the slot protocol (loom). Built only with
//! `--cfg loom`; see `replay/README.md` for the command.
mod loom_slot;
