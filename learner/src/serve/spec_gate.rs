//! [`SpecGate`]: the env spec every actor must declare, either fixed when
//! the learner starts (`--env`, local actors) or adopted from the first
//! actor's hello (`--local-actors 0` without `--env`).
//!
//! # Why adopt
//! A learner serving remote actors (the Python actor over any Gymnasium
//! env, say) should not need the env described twice. The first hello
//! whose spec a network can be built for fixes the run's spec; the
//! composition root waits for it ([`SpecGate::adopted`]) and only then
//! builds the model, so the model always fits what actors send. Every later
//! hello must declare the same spec; one that differs is refused with
//! FAILED_PRECONDITION naming the first differing field.
//!
//! # Races
//! Two first hellos at once: [`OnceLock`] lets exactly one win; the other is
//! compared against the winner like any later hello.
//!
//! Cost: a comparison of two small specs per hello; nothing per step.
use std::sync::OnceLock;

use seed_shared::EnvSpec;
use tokio::sync::watch;
use tracing::info;

use crate::model::ModelConfig;
use crate::serve::stream_error::StreamError;

/// The run's env spec, fixed or adopted from the first hello.
#[derive(Debug)]
pub struct SpecGate {
    spec: OnceLock<EnvSpec>,
    /// `true` once `spec` is set; the composition root waits on it.
    set: watch::Sender<bool>,
}

impl SpecGate {
    /// A gate whose spec is known up front.
    pub fn fixed(spec: EnvSpec) -> Self {
        let gate = SpecGate::adopting();
        let _ = gate.spec.set(spec);
        gate.set.send_replace(true);
        gate
    }

    /// A gate that adopts the first usable spec an actor declares.
    pub fn adopting() -> Self {
        SpecGate {
            spec: OnceLock::new(),
            set: watch::channel(false).0,
        }
    }

    /// The spec, once fixed.
    pub fn get(&self) -> Option<&EnvSpec> {
        self.spec.get()
    }

    /// Admits an actor's (already validated) spec: adopts it when none is
    /// fixed yet and a network can be built for it, else checks it is the
    /// run's. Returns the run's spec.
    pub fn admit(&self, theirs: &EnvSpec, actor_id: &str) -> Result<&EnvSpec, StreamError> {
        if self.spec.get().is_none() {
            ModelConfig::check_spec(theirs)
                .map_err(|reason| StreamError::UnsupportedSpec { reason })?;
            let mut adopted = false;
            let ours = self.spec.get_or_init(|| {
                adopted = true;
                theirs.clone()
            });
            if adopted {
                info!(actor = %actor_id, env = %ours.env_name, obs_shape = ?ours.obs_shape,
                    obs_dtype = %ours.obs_dtype, action = %ours.action,
                    "env spec adopted from the first actor's hello");
                self.set.send_replace(true);
                return Ok(ours);
            }
        }
        let ours = self.spec.get().ok_or(StreamError::ShuttingDown)?;
        match ours.difference(theirs) {
            None => Ok(ours),
            Some((field, learner, actor)) => Err(StreamError::SpecMismatch {
                field,
                learner,
                actor,
            }),
        }
    }

    /// Waits until the spec is fixed and returns it.
    pub async fn adopted(&self) -> &EnvSpec {
        let mut rx = self.set.subscribe();
        // The sender lives in `self`, so it cannot close while we wait.
        let _ = rx.wait_for(|set| *set).await;
        self.spec
            .get()
            .expect("the flag is set only after the spec")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use seed_shared::{ActionSpace, ObsDType};

    #[test]
    fn the_first_usable_spec_is_adopted_and_others_are_refused_by_field() {
        let gate = SpecGate::adopting();
        assert!(gate.get().is_none());
        // A spec no network fits is refused and not adopted.
        let bad = EnvSpec::synthetic(vec![2, 3, 4, 5], ObsDType::F32, 2);
        assert!(matches!(
            gate.admit(&bad, "a"),
            Err(StreamError::UnsupportedSpec { .. })
        ));
        assert!(gate.get().is_none());
        let first = EnvSpec::cartpole();
        assert_eq!(gate.admit(&first, "b").unwrap(), &first);
        assert_eq!(gate.get(), Some(&first));
        assert_eq!(gate.admit(&first.clone(), "c").unwrap(), &first);
        let mut other = first.clone();
        other.action = ActionSpace::Discrete(3);
        match gate.admit(&other, "d") {
            Err(StreamError::SpecMismatch { field, .. }) => assert_eq!(field, "spec.num_actions"),
            r => panic!("{r:?}"),
        }
        // Once fixed, an unusable spec is a mismatch like any other.
        assert!(matches!(
            gate.admit(&bad, "e"),
            Err(StreamError::SpecMismatch { .. })
        ));
    }

    #[tokio::test]
    async fn waiters_see_the_adopted_spec() {
        let gate = std::sync::Arc::new(SpecGate::adopting());
        let waiter = {
            let gate = std::sync::Arc::clone(&gate);
            tokio::spawn(async move { gate.adopted().await.clone() })
        };
        gate.admit(&EnvSpec::cartpole(), "a").unwrap();
        assert_eq!(waiter.await.unwrap(), EnvSpec::cartpole());
        let fixed = SpecGate::fixed(EnvSpec::cartpole());
        assert_eq!(fixed.adopted().await, &EnvSpec::cartpole());
    }
}
