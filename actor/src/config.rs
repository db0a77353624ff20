//! What one actor process runs: [`ActorConfig`] and its [`ReconnectPolicy`].
//!
//! Built by [`ActorConfig::new`] (library users, tests) or from command-line
//! flags by [`ActorArgs::to_config`](crate::cli::ActorArgs::to_config);
//! [`ActorConfig::validate`] is the one place values are checked.

use std::time::Duration;

use seed_env::EnvConfig;
use seed_shared::{EnvSpec, Keepalive, DEFAULT_MAX_MESSAGE_BYTES};

use crate::error::ActorError;
use crate::learner_address::Dialer;
use crate::shared_connection::SharedConnection;
use crate::tls::ClientTls;

/// Envs one actor runs by default (`--envs`; the Python actor's default
/// too, read from here through `seed_rs`'s native module).
pub const DEFAULT_NUM_ENVS: usize = 16;

/// How the actor reconnects when the learner is unreachable or the stream breaks.
///
/// The n-th consecutive retry waits a uniformly random time in
/// `[d/2, d]` with `d = min(initial_backoff * 2^n, max_backoff)`; the jitter
/// keeps many actors from reconnecting to a restarted learner in lockstep.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReconnectPolicy {
    /// Delay before the first retry (`--reconnect-initial-ms`).
    pub initial_backoff: Duration,
    /// Cap on the delay (`--reconnect-max-ms`).
    pub max_backoff: Duration,
    /// Consecutive failed connects before giving up; `None` retries forever (default).
    pub max_attempts: Option<u32>,
}

impl Default for ReconnectPolicy {
    /// The one home of the reconnect defaults (the actor's flags read them
    /// from here); retries forever.
    fn default() -> Self {
        ReconnectPolicy {
            initial_backoff: Duration::from_millis(100),
            max_backoff: Duration::from_secs(5),
            max_attempts: None,
        }
    }
}

/// Everything [`run_actor`](crate::run_actor) needs.
#[derive(Debug, Clone, PartialEq)]
pub struct ActorConfig {
    /// `host:port`, `http://host:port`, `https://host:port` (needs `tls`)
    /// or `unix:/path`.
    pub learner: String,
    /// Sent in the hello; names this actor in the learner's logs.
    pub actor_id: String,
    /// Number of envs K, stepped in two halves.
    pub num_envs: usize,
    pub env: EnvConfig,
    /// Seeds env construction and episode resets (run ids are always random).
    pub seed: u64,
    /// Shared secret sent in the hello.
    pub token: Option<seed_shared::Token>,
    /// Stop cleanly after this many env steps.
    pub max_env_steps: Option<u64>,
    /// Stop cleanly after this many seconds.
    pub max_seconds: Option<f64>,
    pub reconnect: ReconnectPolicy,
    /// Largest gRPC message sent or accepted.
    pub max_message_bytes: usize,
    /// HTTP/2 keepalive pings to the learner (`--keepalive-secs`,
    /// `--keepalive-timeout-secs`): a learner that stops answering is
    /// dropped and the actor reconnects.
    pub keepalive: Keepalive,
    /// TLS to the learner (`--tls-ca` and friends); `None`: plaintext.
    pub tls: Option<ClientTls>,
    /// A connection shared with other actors of this process (their
    /// streams multiplexed on one HTTP/2 connection); `None`: this actor
    /// opens its own. See [`SharedConnection`].
    pub connection: Option<SharedConnection>,
}

impl ActorConfig {
    /// A config with defaults: actor id `hostname-pid`, random seed, no token,
    /// no limits, default reconnect policy, 64 MiB messages, keepalive 10 s
    /// + 10 s, plaintext.
    pub fn new(learner: impl Into<String>, env: EnvConfig, num_envs: usize) -> Self {
        ActorConfig {
            learner: learner.into(),
            actor_id: default_actor_id(),
            num_envs,
            env,
            seed: rand::random(),
            token: None,
            max_env_steps: None,
            max_seconds: None,
            reconnect: ReconnectPolicy::default(),
            max_message_bytes: DEFAULT_MAX_MESSAGE_BYTES,
            keepalive: Keepalive::default(),
            tls: None,
            connection: None,
        }
    }

    /// Checks every value; the spec is checked with the learner's own rules
    /// so a config that passes here is never refused at hello for its shape.
    pub fn validate(&self) -> Result<(), ActorError> {
        let bad = |field, reason: String| Err(ActorError::Config { field, reason });
        if let EnvConfig::Synthetic(s) = &self.env {
            if s.episode_len == 0 {
                return bad("episode_len", "must be at least 1".into());
            }
            if s.obs_shape.iter().any(|&d| d > u32::MAX as usize) {
                return bad("obs_shape", "dimension exceeds u32".into());
            }
        }
        if let Err(e) = EnvSpec::from_proto(&self.env.spec().to_proto()) {
            return bad("env", e.to_string());
        }
        self.validate_connection()
    }

    /// Checks every value but the env (`env` is not used by
    /// [`run_actor_with_envs`](crate::client::run_actor_with_envs)).
    pub fn validate_connection(&self) -> Result<(), ActorError> {
        let bad = |field, reason: String| Err(ActorError::Config { field, reason });
        if self.num_envs == 0 || self.num_envs > u32::MAX as usize {
            return bad(
                "num_envs",
                format!("{} is not in 1..=2^32-1", self.num_envs),
            );
        }
        if let Some(s) = self.max_seconds {
            if !(s.is_finite() && s >= 0.0) {
                return bad(
                    "max_seconds",
                    format!("{s} is not a finite non-negative number"),
                );
            }
        }
        let r = &self.reconnect;
        if r.initial_backoff.is_zero() || r.max_backoff < r.initial_backoff {
            return bad(
                "reconnect",
                format!(
                    "need 0 < initial backoff ({:?}) <= max backoff ({:?})",
                    r.initial_backoff, r.max_backoff
                ),
            );
        }
        if self.max_message_bytes < 1024 {
            return bad(
                "max_message_bytes",
                format!("{} is below 1024", self.max_message_bytes),
            );
        }
        if let Some(problem) = self.keepalive.problem() {
            return bad("keepalive", problem.into());
        }
        // The address, and that it goes with the TLS settings.
        Dialer::new(&self.learner, self.keepalive, self.tls.as_ref())?;
        Ok(())
    }
}

/// `hostname-pid`, or `actor-pid` where the host name cannot be read.
pub fn default_actor_id() -> String {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|h| h.trim().to_owned())
        .filter(|h| !h.is_empty())
        .unwrap_or_else(|| "actor".to_owned());
    format!("{host}-{}", std::process::id())
}

#[cfg(test)]
mod tests {
    use super::*;
    use seed_env::SyntheticConfig;

    #[test]
    fn defaults_validate() {
        let cfg = ActorConfig::new("127.0.0.1:1", EnvConfig::CartPole, 4);
        cfg.validate().unwrap();
        assert!(cfg.actor_id.ends_with(&format!("-{}", std::process::id())));
    }

    #[test]
    fn bad_values_name_their_field() {
        let field_of = |cfg: ActorConfig| match cfg.validate() {
            Err(ActorError::Config { field, .. }) => field,
            other => panic!("expected a config error, got {other:?}"),
        };
        let base = ActorConfig::new("x:1", EnvConfig::CartPole, 4);
        assert_eq!(
            field_of(ActorConfig {
                num_envs: 0,
                ..base.clone()
            }),
            "num_envs"
        );
        let mut c = base.clone();
        c.reconnect.max_backoff = Duration::from_millis(1);
        assert_eq!(field_of(c), "reconnect");
        let mut c = base.clone();
        c.max_seconds = Some(f64::NAN);
        assert_eq!(field_of(c), "max_seconds");
        let mut c = base.clone();
        c.keepalive = Keepalive::from_secs(1, 0);
        assert_eq!(field_of(c), "keepalive");
        let synth = |s: SyntheticConfig| ActorConfig {
            env: EnvConfig::Synthetic(s),
            ..base.clone()
        };
        let zero_len = SyntheticConfig {
            episode_len: 0,
            ..Default::default()
        };
        assert_eq!(field_of(synth(zero_len)), "episode_len");
        let zero_dim = SyntheticConfig {
            obs_shape: vec![84, 0],
            ..Default::default()
        };
        assert_eq!(field_of(synth(zero_dim)), "env");
        let no_actions = SyntheticConfig {
            num_actions: 0,
            ..Default::default()
        };
        assert_eq!(field_of(synth(no_actions)), "env");
    }
}
