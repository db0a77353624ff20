//! Adam and RMSProp over a candle [`VarMap`], with global-norm gradient
//! clipping, a learning-rate schedule, and state that checkpoints.
//!
//! Why not `candle_nn::AdamW`: its moments are private, so a resumed run would
//! restart them from zero. Here the state (step count, per-variable moments) is
//! exported and imported as a `HashMap<String, Tensor>` keyed by variable name,
//! ready for `candle_core::safetensors::save` / `load`:
//!
//! | key                              | shape    | meaning                       |
//! |----------------------------------|----------|-------------------------------|
//! | `optimizer/step`                 | `[1]` i64| steps taken so far            |
//! | `adam/m/{var}`, `adam/v/{var}`   | as `var` | Adam first and second moments |
//! | `rmsprop/mean_square/{var}`      | as `var` | RMSProp running mean of g²    |
//!
//! Updates, with `t` the 1-based step and `lr_t` from the [`LrSchedule`]:
//!
//! ```text
//! Adam (Kingma & Ba 2015):  m ← β1 m + (1−β1) g;  v ← β2 v + (1−β2) g²
//!                           θ ← θ − lr_t · (m / (1−β1^t)) / (√(v / (1−β2^t)) + ε)
//! RMSProp (TF form, as IMPALA used it):
//!                           ms ← ρ ms + (1−ρ) g²;  θ ← θ − lr_t · g / √(ms + ε)
//! ```
//!
//! # One flat buffer
//!
//! The moments of all variables live in one flat tensor per kind (`m`, `v`,
//! or the mean square), each variable owning a range of it. A step gathers
//! the gradients into one flat buffer (one concatenation), runs the update
//! rule once over all of it, and subtracts each variable's range from the
//! variable. With `P` variables that is `3P + 13` tensor ops for Adam
//! instead of `15P`, each a kernel launch on a GPU: 37 instead of 120 for
//! the CartPole MLP (`P = 8`). Every element goes through the same
//! operations as it would variable by variable, so the results are the
//! same (tested against that form). The exported state is still keyed per
//! variable (views of the flat moments), so checkpoints are unchanged.
//!
//! Cost: `3P + 13` ops per Adam step (`3P + 9` for RMSProp), all on the
//! variables' device; [`Optimizer::step`] never synchronises with the host.
//! [`Optimizer::clip_grad_norm`] takes `P + 3` ops over the flat gradients
//! (`3P + 2` per variable; plus `P` when it clips) and reads one scalar
//! back (the norm). The concatenations count `P` each: candle copies each
//! part with its own kernel.
//!
//! The variable set is fixed when the optimizer is built: variables created in
//! the `VarMap` later are not trained.
//!
//! # On the CPU
//!
//! With f32 variables on the CPU, the same rule runs in one pass per
//! variable over its gradient (read where backward left it), moments and
//! weights (`host_update`): the same f32 operations in the same order, so
//! the same bits, without the flat copy of the gradients or a buffer per
//! op. The clip's norm there is one f32 sum over the gradients in place.
//!
//! Files: [`config`] and [`schedule`] (settings), [`update`] (the
//! optimizer and its step), `host_update` (the step on the CPU),
//! `param` (a trained variable's place in the flat buffers), [`clip`],
//! [`state`] (checkpoint I/O), [`error`].
pub mod clip;
pub mod config;
pub mod error;
mod host_update;
mod param;
pub mod schedule;
pub mod state;
pub mod update;

pub use clip::clip_grad_norm;
pub use config::{AdamConfig, Algorithm, OptimizerConfig, RmsPropConfig};
pub use error::OptimizerError;
pub use schedule::LrSchedule;
pub use state::STEP_KEY;
pub use update::{AppliedStep, Optimizer};

#[cfg(test)]
mod tests;
