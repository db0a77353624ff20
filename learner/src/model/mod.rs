//! Policy and value networks: one actor-critic whose torso is chosen by the
//! observation type.
//!
//! - vector observations (`[D]`, f32): an MLP torso ([`mlp`]);
//! - image observations (`[C, H, W]`, channels-first, u8 or f32): a small conv
//!   torso ([`conv`]);
//! - optionally an LSTM core ([`lstm`]) whose state lives per env slot at
//!   inference and is stored at the start of each unroll for training.
//!
//! Heads: `policy` gives the parameters of the action distribution
//! ([`distribution`]), `[B, P]`: the logits `[B, A]` for discrete actions, or
//! for continuous ones the Gaussian's mean `[B, D]` followed by its log-std,
//! a learned state-independent `log_std` `[D]` (clamped to
//! `[LOG_STD_MIN, LOG_STD_MAX]`, broadcast over the batch); `value` gives
//! `[B]`. Weight names mirror the struct fields (`torso.*`, `core.*`,
//! `policy.*`, `log_std`, `value.*`) so safetensors checkpoints read like
//! the code; a discrete model has no `log_std`.
//!
//! The weights are `f32` for training; an inference copy may be `bf16`
//! ([`precision`]): it takes the same raw observations and returns `f32`
//! parameters, values and state.
//!
//! Files: [`config`] (the architecture and its file format), `torso`,
//! [`actor_critic`] (the network), [`dueling`] (R2D2's Q-values from the
//! same heads), [`trainable`] (variables, initialisation, snapshots), the
//! layers ([`dense`], [`mlp`], [`conv`], [`lstm`]), [`cpu`] (the CPU's f32
//! ops where candle's generic kernels lose: matrix products on slices,
//! conv layers as patches times weights, the bias add, tanh), [`weights`]
//! (what inference reads), [`host_batch`] (one inference batch from host
//! buffers) and [`host_forward`]
//! (a feed-forward policy's step as plain loops, for small CPU batches).
pub mod actor_critic;
pub mod config;
pub mod conv;
pub mod cpu;
pub mod dense;
pub mod distribution;
pub mod dueling;
pub mod graph_ops;
pub mod host_batch;
pub mod host_forward;
pub mod init;
pub mod lstm;
pub mod mlp;
pub mod precision;
pub mod sampling;
mod torso;
pub mod trainable;
pub mod weights;

pub use actor_critic::{ActorCritic, PolicyStep, PolicyUnroll};
pub use config::{ModelConfig, ModelShape};
pub use distribution::{ActionDistribution, Distribution};
pub use dueling::dueling_q;
pub use lstm::RecurrentState;
pub use precision::InferenceDType;
pub use sampling::ActionSampler;
pub use trainable::TrainableModel;

#[cfg(test)]
mod tests;
