//! Reinforcement-learning algorithms: the math of training, free of threads and I/O.
//!
//! - [`transitions`]: step-aligned wire flags (`[T+1, B]`) to per-transition
//!   rewards, discounts and validity masks (`[T, B]`).
//! - [`vtrace`]: V-trace targets and advantages (IMPALA eq. 1), `[T, B]` tensors.
//! - [`loss`]: the IMPALA actor-critic loss over a batch of unrolls.
//! - [`agent`]: which algorithm trains (`--algo`).
//!
//! R2D2's math, settings and training step are together in
//! [`crate::learn::r2d2`].
pub mod agent;
pub mod loss;
pub mod transitions;
pub mod vtrace;

pub use agent::Agent;
pub use loss::{impala_loss, ImpalaLoss, ImpalaLossConfig, ImpalaLossInputs};
pub use transitions::Transitions;
pub use vtrace::{vtrace, Recursion, VTraceClip, VTraceInputs, VTraceReturns};
