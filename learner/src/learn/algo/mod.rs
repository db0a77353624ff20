//! Reinforcement-learning algorithms: the math of training, free of threads and I/O.
//!
//! - [`transitions`]: step-aligned wire flags (`[T+1, B]`) to per-transition
//!   rewards, discounts and validity masks (`[T, B]`).
//! - [`vtrace`]: V-trace targets and advantages (IMPALA eq. 1), `[T, B]` tensors.
//! - [`loss`]: the IMPALA actor-critic loss over a batch of unrolls.
//! - [`agent`]: which algorithm trains (`--algo`) and R2D2's settings;
//! - [`r2d2`]: R2D2's n-step double-Q targets with value rescaling, sequence
//!   priorities and the Ape-X ε schedule (host math);
//! - [`r2d2_loss`]: the R2D2 loss over a batch of sequences and their new
//!   priorities.
pub mod agent;
pub mod loss;
pub mod r2d2;
pub mod r2d2_loss;
pub mod transitions;
pub mod vtrace;

pub use agent::{Agent, R2d2Config};
pub use loss::{impala_loss, ImpalaLoss, ImpalaLossConfig, ImpalaLossInputs};
pub use transitions::Transitions;
pub use vtrace::{vtrace, Recursion, VTraceClip, VTraceInputs, VTraceReturns};
