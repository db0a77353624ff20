//! R2D2 (Kapturowski et al., 2019, "Recurrent Experience Replay in
//! Distributed Reinforcement Learning"), `--algo r2d2`, read top to bottom.
//!
//! R2D2 is value-based: a recurrent dueling Q-network, ε-greedy actors,
//! prioritized replay of half-overlapping sequences with the recurrent
//! state stored at each start, burn-in, n-step double-Q targets under an
//! invertible value rescaling, and a target network. In this learner it
//! runs on the same stages as V-trace; what is R2D2's own, in the order a
//! step of experience meets it:
//!
//! 1. **Settings**, [`config`]: burn-in, n, the target network's period,
//!    the priority's η, the Ape-X ε schedule, γ and the reward scale
//!    (`--algo r2d2` resolves them in `crate::app::settings`, whose
//!    `defaults.toml` gives R2D2 its own cases: γ, the env slots, and the
//!    prioritized replay's size; `docs/cli.md` lists the values).
//! 2. **Acting**: inference turns the model's two heads into dueling
//!    Q-values ([`crate::model::dueling_q`]) and acts ε-greedily with one ε
//!    per env slot, `ε_i = ε^(1 + α·i/(N−1))`
//!    ([`crate::infer::exploration`]: inference picks every action, so the
//!    schedule lives there and the actors stay policy-agnostic).
//! 3. **Sequences**: the unroll builder ([`crate::learn::unroll`]) stores
//!    `T + 1` steps with the LSTM state at their start (`initial_h`,
//!    `initial_c`) and a stride of `T / 2`, so sequences overlap by half.
//! 4. **Replay**: the prioritized sampler of `seed_replay` (priority
//!    exponent α, importance weights with exponent β), through the
//!    learner's unroll store.
//! 5. **The training step**, [`train_step`]: the online network runs over
//!    each sequence after its burn-in
//!    ([`crate::model::ActorCritic::unroll_after_burn_in`]: the first
//!    steps only refresh the stored state, without gradient), the target
//!    network over the same steps; then
//! 6. **Targets**, [`targets`] (host math): `y_t = h(Σ_{k<m} γ^k r_{t+k+1}
//!    + γ^m h⁻¹(Q̄(x_{t+m}, argmax_a Q(x_{t+m}, a))))`, stopping at a
//!    termination, a truncation, the sequence's end or `n` steps; and the
//!    sequence priority `η·max|δ| + (1 − η)·mean|δ|`;
//! 7. **Loss**, [`loss`]: the importance-weighted squared TD error over the
//!    valid steps, and each sequence's new priority, written back by key.
//! 8. **After the step**: backward, clipping, the optimizer and the weights
//!    publish are the trainer's, shared with every algorithm
//!    (`learn/trainer.rs`); then [`train_step`]'s `after_update` makes a
//!    fresh copy of the online network the target network every
//!    `--target-update-period` updates.
pub mod config;
pub mod loss;
pub mod targets;
pub mod train_step;

pub use config::R2d2Config;
pub use train_step::R2d2Step;
