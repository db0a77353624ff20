//! V-trace (Espeholt et al., 2018, "IMPALA: Scalable Distributed Deep-RL
//! with Importance Weighted Actor-Learner Architectures"), `--algo vtrace`
//! (the default), read top to bottom.
//!
//! V-trace is an off-policy actor-critic: actors act with whatever policy
//! version inference holds, and the learner corrects for the lag between
//! that behaviour policy μ and the policy π it trains with truncated
//! importance weights. In this learner, in the order a step of experience
//! meets it:
//!
//! 1. **Settings**, [`config`]: γ, the loss's weights (baseline, entropy),
//!    the reward scale and the clipping levels ρ̄, c̄, ρ̄_pg (`--algo vtrace`
//!    resolves them in `crate::app::settings`, `defaults.toml`).
//! 2. **Acting**: inference samples each action from the policy head
//!    ([`crate::model::ActionSampler`]: categorical or diagonal Gaussian)
//!    and keeps the head's parameters, so the learner knows μ exactly.
//! 3. **Unrolls**: the unroll builder ([`crate::learn::unroll`]) stores
//!    `T + 1` steps per env slot (consecutive unrolls share one step), with
//!    the behaviour parameters, the policy version and, with `--lstm`, the
//!    recurrent state at the start.
//! 4. **Replay**: consume-once (`fifo`) or reused (`uniform`, `recent`)
//!    through the samples-per-insert rate limiter of `seed_replay`; the
//!    prefetcher collates `B` unrolls into `[T+1, B, ...]` tensors.
//! 5. **The training step**, [`train_step`]: the model runs over all
//!    `T + 1` steps of the batch (`ActorCritic::unroll`); row `T`'s value
//!    is the bootstrap.
//! 6. **Transitions**, [`transitions`]: the wire's step-aligned flags
//!    become per-transition rewards `r_t`, discounts `γ_t` and masks
//!    `valid_t`, `[T, B]` (a termination stops discounting; the dummy
//!    action after a truncated final observation is masked).
//! 7. **Targets**, [`targets`] (IMPALA eq. 1): the backward recursion
//!    `vs_t − V(x_t) = ρ_t δ_t + γ_t c_t (vs_{t+1} − V(x_{t+1}))` and the
//!    advantages `ρ^pg_t (r_t + γ_t vs_{t+1} − V(x_t))`, on the host, no
//!    gradient.
//! 8. **Loss**, [`loss`] (IMPALA §4.2): policy gradient with the V-trace
//!    advantages, `½ (vs − V)²` for the baseline, an entropy bonus, each a
//!    mean over the valid transitions.
//! 9. **After the step** (the trainer's, shared with every algorithm,
//!    `learn/trainer.rs`): backward, clipping, the optimizer, the weights
//!    publish.
pub mod config;
pub mod loss;
pub mod targets;
pub mod train_step;
pub mod transitions;

pub use config::{ImpalaLossConfig, VTraceClip};
pub use loss::{impala_loss, ImpalaLoss, ImpalaLossInputs};
pub use targets::{vtrace, VTraceInputs, VTraceReturns};
pub use train_step::VTraceStep;
pub use transitions::Transitions;
