//! Regression test of learning: a CartPole training run with the default
//! hyperparameters (in-process actors over a unix socket, fixed seed) must
//! lift the mean return over the last 100 episodes to 150, far above a
//! random policy's (about 22). The run stops as soon as it gets there and is
//! capped by env steps, so thread-timing variance between runs (which makes
//! learning speed vary by about 3x here) never makes it flaky, while a
//! policy that does not learn hits the cap and fails. Then the run's
//! checkpoint is evaluated (sampled and greedy) and resumes with its
//! counters and policy version intact.
//!
//! The same holds for R2D2 (`--algo r2d2`, its defaults): bounded env steps,
//! a fixed seed, mean return 150; its priority write-backs are counted.
//!
//! No timing is asserted: the run is bounded by env steps, not seconds.
use crate::support;

use support::cartpole_training::train;

use seed_env::EnvConfig;
use seed_learner::app::eval::{evaluate, EvalConfig, EvalPolicy};
use seed_learner::app::settings::resolve_toml;
use seed_learner::app::LearnerConfig;
use seed_learner::learn::agent::Agent;
use seed_learner::learn::checkpoint::LoadedCheckpoint;

/// Cap on the learning run's env steps; typical runs stop at 100k-300k.
const MAX_ENV_STEPS: u64 = 2_000_000;
/// Mean return (last 100 episodes) at which the learning run stops.
const TARGET_RETURN: f64 = 150.0;

/// A training learner on `socket` with no local actors, no progress lines,
/// seed 3 (what `learner --local-actors 0 --progress-secs 0 --seed 3
/// --listen SOCKET` gives).
fn config(socket: &str) -> LearnerConfig {
    config_of(socket, "")
}

/// What `learner` with the settings `toml` gives (its defaults, local
/// actors' env slots included), served on `socket` to in-process actors,
/// with no progress lines and seed 3.
fn config_of(socket: &str, toml: &str) -> LearnerConfig {
    let mut c = resolve_toml(toml).expect("settings resolve");
    let serving =
        LearnerConfig::serving(socket.parse().expect("socket address"), EnvConfig::CartPole);
    c.serve = serving.serve;
    c.run.local_actors = 0;
    c.run.progress_every = None;
    c.seed = 3;
    c
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn cartpole_return_rises_far_above_random_and_resumes() {
    support::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let run_dir = dir.path().join("run");
    let socket = format!("unix:{}", dir.path().join("l.sock").display());
    let mut a = config(&socket);
    a.run.max_env_steps = Some(MAX_ENV_STEPS);
    a.run.target_return = TARGET_RETURN;
    a.run.stop_when_solved = true;
    a.run.run_dir = Some(run_dir.clone());
    let s = train(a, &socket, 2, 32).await;
    let t = s.training.as_ref().expect("training summary");
    // One clock for both figures, and the end state beside `solved`.
    assert!(
        t.seconds_to_solve.is_some_and(|at| at <= s.wall_seconds),
        "solved at {:?} s of a {} s run",
        t.seconds_to_solve,
        s.wall_seconds
    );
    assert_eq!(t.final_mean_return, s.mean_return_last_100);
    assert!(
        t.solved && s.mean_return_last_100 >= 150.0,
        "mean return {} after {} env steps ({} learner steps)",
        s.mean_return_last_100,
        s.env_steps,
        t.learner_steps
    );
    assert!(
        t.learner_steps > 0 && s.policy_version > 0,
        "weights were published"
    );
    assert!(run_dir.join("metrics.jsonl").exists());
    assert!(run_dir.join("learning_curve.png").exists());

    // The final checkpoint carries the counters; a resumed run continues them.
    let ckpt = LoadedCheckpoint::latest(&run_dir).expect("checkpoint");
    // Written after the trainer stopped, so it may hold a step or two more
    // than the summary; one publish per update, from version 0.
    assert!(ckpt.state.learner_steps >= t.learner_steps);
    assert_eq!(ckpt.state.policy_version, ckpt.state.learner_steps);
    assert!(ckpt.state.policy_version >= s.policy_version);
    assert!(ckpt.state.env_steps >= s.env_steps);

    // `eval` reads this run's checkpoint. Its level is not asserted: the
    // policy at the stop can sit in a dip that the mean over the last 100
    // episodes (played by earlier versions) hides; 1 run in 30 sampled 23
    // over 20 episodes, and greedy play of a policy that balances through
    // its own randomness can score below random. That eval plays the
    // checkpointed weights is tested in `app::eval` on a hand-set controller.
    let sample = EvalConfig {
        episodes: 20,
        seed: 0,
        max_steps: 1_000,
        policy: EvalPolicy::Sample,
    };
    let report = evaluate(&run_dir, &sample).expect("eval");
    assert_eq!(report.returns.len(), 20);
    assert_eq!(report.policy_version, ckpt.state.policy_version);
    assert!(report.min_return <= report.mean_return && report.mean_return <= report.max_return);
    let greedy = EvalConfig {
        policy: EvalPolicy::Greedy,
        ..sample
    };
    let g1 = evaluate(&run_dir, &greedy).expect("eval");
    assert_eq!(g1.returns.len(), 20);
    assert_eq!(
        g1,
        evaluate(&run_dir, &greedy).expect("eval"),
        "greedy is deterministic"
    );

    let mut b = config(&socket);
    b.run.max_env_steps = Some(ckpt.state.env_steps + 20_000);
    if let Some(t) = b.train.as_mut() {
        t.checkpoints.resume = Some(run_dir.clone());
    }
    let s2 = train(b, &socket, 1, 16).await;
    let ckpt2 = LoadedCheckpoint::latest(&run_dir).expect("checkpoint");
    assert!(ckpt2.state.learner_steps > ckpt.state.learner_steps);
    assert!(
        s2.policy_version > ckpt.state.policy_version,
        "versions continue"
    );
    assert!(ckpt2.state.env_steps >= ckpt.state.env_steps + 20_000);
}

/// R2D2 with its defaults, as `--algo r2d2` resolves them (ε over the 64
/// env slots of two 32-env actors): runs of the learner binary reach 150
/// in 39k-111k env steps (20 runs, the mean sampled every second;
/// benches/results/r2d2/target_period_cartpole_epyc).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r2d2_cartpole_return_rises_far_above_random() {
    support::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = format!("unix:{}", dir.path().join("l.sock").display());
    // `learner --algo r2d2`: every default R2D2's own (γ 0.99, a constant
    // rate, Adam's ε 1e-8, ε-greedy over 2 x 32 env slots, the LSTM core).
    let mut a = config_of(&socket, "[train]\nalgo = \"r2d2\"\n");
    let t = a.train.as_ref().expect("training");
    let Agent::R2d2(r2d2) = t.trainer.agent else {
        panic!("not r2d2: {:?}", t.trainer.agent)
    };
    assert_eq!(r2d2.exploration.slots, 64);
    assert_eq!(t.trainer.discount(), 0.99);
    assert_eq!(a.model.lstm_size, Some(64));
    a.run.max_env_steps = Some(1_000_000);
    a.run.target_return = TARGET_RETURN;
    a.run.stop_when_solved = true;
    let s = train(a, &socket, 2, 32).await;
    let t = s.training.as_ref().expect("training summary");
    assert!(
        t.solved && s.mean_return_last_100 >= TARGET_RETURN,
        "mean return {} after {} env steps ({} learner steps)",
        s.mean_return_last_100,
        s.env_steps,
        t.learner_steps
    );
    assert!(
        t.priority_updates > 0,
        "priorities were written back: {t:?}"
    );
}
