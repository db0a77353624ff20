//! The learner against a remote replay table (`--replay-addr`): a replay
//! server started in this process (`seed_replay_service::start`) serves the
//! table `learner --print-replay-table-config` describes, and
//! - V-trace trains CartPole through it to a mean return of 150 (random
//!   play: about 22), bounded by env steps as in `learning.rs`, while the
//!   table's `Info` counts the learner's inserts and samples;
//! - R2D2 against a prioritized table writes priorities back by key: the
//!   server applies them and sampled importance weights stop being equal;
//! - a table of another layout, a missing table and an unreachable address
//!   are refused at start-up, naming `--replay-addr` and what differs;
//! - `--resume` with a remote table continues the checkpointed run without
//!   restoring (or checking) the checkpoint's in-process buffer.
//!
//! No timing is asserted.
use crate::support;

use support::cartpole_training::train;

use seed_env::EnvConfig;
use seed_learner::app::replay_table::replay_table_config;
use seed_learner::app::settings::resolve_toml;
use seed_learner::app::{Learner, LearnerConfig};
use seed_learner::infer::exploration::EpsilonSchedule;
use seed_learner::learn::agent::Agent;
use seed_learner::learn::r2d2::R2d2Config;
use seed_learner::unroll_store::RemoteReplayConfig;
use seed_replay_service::client::ClientOptions;
use seed_replay_service::{ReplayClient, RunningServer, ServerOptions, ServiceConfig};

/// A training CartPole learner on `socket` with no local actors, seed 3,
/// its unrolls going to table `table` at `addr` (`HOST:PORT`).
fn config(socket: &str) -> LearnerConfig {
    let mut c =
        LearnerConfig::serving(socket.parse().expect("socket address"), EnvConfig::CartPole);
    c.train = LearnerConfig::default().train;
    c.run.progress_every = None;
    c.seed = 3;
    c
}

fn use_remote(c: &mut LearnerConfig, addr: &str) {
    let remote = RemoteReplayConfig::parse(addr, false).expect("address");
    c.train.as_mut().expect("training").replay.remote = Some(remote);
}

/// A replay server serving the table `config` prints.
async fn serve_table_for(config: &LearnerConfig) -> RunningServer {
    serve(replay_table_config(config).expect("table config")).await
}

async fn serve(text: String) -> RunningServer {
    let service = ServiceConfig::from_json(&text).expect("the printed config is served");
    seed_replay_service::start(service, ServerOptions::default())
        .await
        .expect("replay server")
}

async fn table_info(server: &RunningServer) -> seed_replay_service::pb::TableInfo {
    let mut client = ReplayClient::connect(&server.url(false), ClientOptions::default())
        .await
        .expect("client");
    client.info(Some("unrolls")).await.expect("info").remove(0)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn vtrace_cartpole_learns_through_a_remote_table() {
    support::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = format!("unix:{}", dir.path().join("l.sock").display());
    let mut c = config(&socket);
    let server = serve_table_for(&c).await;
    use_remote(&mut c, &format!("{}/unrolls", server.addr()));
    c.run.max_env_steps = Some(2_000_000);
    c.run.target_return = 150.0;
    c.run.stop_when_solved = true;
    let s = train(c, &socket, 2, 32).await;
    let t = s.training.as_ref().expect("training summary");
    assert!(
        t.solved && s.mean_return_last_100 >= 150.0,
        "mean return {} after {} env steps ({} learner steps)",
        s.mean_return_last_100,
        s.env_steps,
        t.learner_steps
    );
    let info = table_info(&server).await;
    // Every trained batch came from the table: B = 16 unrolls per step.
    assert!(
        info.sampled >= 16 * t.learner_steps,
        "sampled {} for {} steps",
        info.sampled,
        t.learner_steps
    );
    // V-trace's unrolls of T = 16 steps: at least one per 16 env steps of
    // the run went in (the rest were still being built or in flight).
    assert!(info.inserted > 0 && info.stored > 0, "{info:?}");
    assert!(
        info.inserted * 16 <= s.env_steps,
        "{} unrolls from {} env steps",
        info.inserted,
        s.env_steps
    );
    server.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn r2d2_writes_priorities_back_to_a_remote_prioritized_table() {
    support::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = format!("unix:{}", dir.path().join("l.sock").display());
    let mut c = config(&socket);
    c.model.lstm_size = Some(16);
    // R2D2's defaults, with room for every sequence of the run, so the
    // ones whose priorities were written back are still there to be
    // sampled.
    c.train = resolve_toml(
        "[train]\nalgo = \"r2d2\"\nbatch_size = 8\n\
         [replay]\nreplay_capacity = 8192\nreplay_min_size = 32\n",
    )
    .expect("settings resolve")
    .train;
    if let Some(t) = c.train.as_mut() {
        let Agent::R2d2(r2d2) = t.trainer.agent else {
            panic!("not r2d2")
        };
        t.trainer.agent = Agent::R2d2(R2d2Config {
            exploration: EpsilonSchedule {
                slots: 16,
                ..r2d2.exploration
            },
            ..r2d2
        });
    }
    // The printed table, with only a min-size limiter, so that this test
    // can sample it after the run whatever the ratio then is.
    let mut table: serde_json::Value =
        serde_json::from_str(&replay_table_config(&c).expect("table config")).expect("json");
    table["tables"][0]["rate_limiter"] = serde_json::json!({"min_size_to_sample": 32});
    let server = serve(table.to_string()).await;
    assert_eq!(table_info(&server).await.sampler, "prioritized");
    use_remote(&mut c, &format!("{}/unrolls", server.addr()));
    c.run.max_env_steps = Some(30_000);
    let s = train(c, &socket, 1, 16).await;
    let t = s.training.as_ref().expect("training summary");
    assert!(t.learner_steps > 0, "{t:?}");
    // Counted from the server's replies: the priorities were applied.
    assert!(t.priority_updates > 0, "{t:?}");
    // Written-back priorities differ, so importance weights are below 1.
    // The server normalises weights by the table's smallest priority, so a
    // table whose items all kept the insert priority gives weights of
    // exactly 1; any weight off 1 shows a priority other than that one.
    // (Why not "weights differ within a batch": new sequences enter at the
    // largest priority and the written-back ones are mostly lower, so a
    // batch can be drawn wholly from the insert-priority items, all of
    // equal weight below 1.)
    let mut client = ReplayClient::connect(&server.url(false), ClientOptions::default())
        .await
        .expect("client");
    let batch = client.sample("unrolls", 64).await.expect("sample");
    let w = batch.weights();
    assert!(
        w.iter().any(|&x| (x - 1.0).abs() > 1e-6),
        "sampled weights all 1 after {} learner steps ({} priorities applied): {w:?}",
        t.learner_steps,
        t.priority_updates
    );
    server.stop().await.expect("stop");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_table_of_another_layout_a_missing_table_and_no_server_are_refused() {
    support::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let socket = format!("unix:{}", dir.path().join("l.sock").display());
    // The server holds unrolls of T = 8; the learner builds T = 16.
    let mut short = config(&socket);
    short.train.as_mut().expect("training").unroll_length = 8;
    let server = serve_table_for(&short).await;

    let mut c = config(&socket);
    use_remote(&mut c, &format!("{}/unrolls", server.addr()));
    let err = Learner::start(&c).await.err().expect("refused").to_string();
    assert!(
        err.contains("--replay-addr")
            && err.contains("`obs`")
            && err.contains("[17, 4] here")
            && err.contains("[9, 4] on the server")
            && err.contains("--print-replay-table-config"),
        "{err}"
    );

    let mut c = config(&socket);
    use_remote(&mut c, &format!("{}/experience", server.addr()));
    let err = Learner::start(&c).await.err().expect("refused").to_string();
    assert!(
        err.contains("no table `experience`") && err.contains("unrolls"),
        "{err}"
    );
    server.stop().await.expect("stop");

    // A port nothing listens on.
    let free = std::net::TcpListener::bind("127.0.0.1:0").expect("bind");
    let addr = free.local_addr().expect("addr");
    drop(free);
    let mut c = config(&socket);
    use_remote(&mut c, &format!("{addr}/unrolls"));
    let err = Learner::start(&c).await.err().expect("refused").to_string();
    assert!(
        err.contains("--replay-addr") && err.contains("cannot reach the replay server"),
        "{err}"
    );
}

/// `--resume` with a remote table: the checkpoint (here one that holds an
/// in-process buffer of other replay settings) restores the model and the
/// counters, its buffer is not used, and the run goes on from its policy
/// version into the table.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn resume_with_a_remote_table_continues_the_checkpointed_run() {
    support::init();
    let dir = tempfile::tempdir().expect("tempdir");
    let run_dir = dir.path().join("run");
    let socket = format!("unix:{}", dir.path().join("l.sock").display());
    let mut a = config(&socket);
    a.run.max_env_steps = Some(20_000);
    a.run.run_dir = Some(run_dir.clone());
    a.train.as_mut().expect("training").replay.capacity = 48;
    let s1 = train(a, &socket, 1, 16).await;
    assert!(s1.policy_version > 0, "trained before the checkpoint");

    let mut b = config(&socket);
    let server = serve_table_for(&b).await;
    use_remote(&mut b, &format!("{}/unrolls", server.addr()));
    b.run.max_env_steps = Some(s1.env_steps + 20_000);
    b.train.as_mut().expect("training").checkpoints.resume = Some(run_dir.clone());
    let s2 = train(b, &socket, 1, 16).await;
    assert!(
        s2.policy_version > s1.policy_version,
        "versions continue: {} after {}",
        s2.policy_version,
        s1.policy_version
    );
    let info = table_info(&server).await;
    assert!(info.inserted > 0 && info.sampled > 0, "{info:?}");
    server.stop().await.expect("stop");
}
