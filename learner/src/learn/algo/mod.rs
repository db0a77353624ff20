//! Reinforcement-learning algorithms: the math of training, free of threads and I/O.
//!
//! - [`transitions`]: step-aligned wire flags (`[T+1, B]`) to per-transition
//!   rewards, discounts and validity masks (`[T, B]`).
//! - [`vtrace`]: V-trace targets and advantages (IMPALA eq. 1), `[T, B]` tensors.
//! - [`loss`]: the IMPALA actor-critic loss over a batch of unrolls.
//! - [`r2d2`]: R2D2's n-step double-Q targets with value rescaling, sequence
//!   priorities and the Ape-X ε schedule (host math; the agent is not wired
//!   into training yet).
pub mod loss;
pub mod r2d2;
pub mod transitions;
pub mod vtrace;

pub use loss::{impala_loss, ImpalaLoss, ImpalaLossConfig, ImpalaLossInputs};
pub use transitions::Transitions;
pub use vtrace::{vtrace, Recursion, VTraceClip, VTraceInputs, VTraceReturns};
