//! Property tests of the wire edge: whatever bytes or step batches arrive,
//! decoding and validation never panic, and every refusal names the field
//! (the learner sends these messages to the actor's operator as is).
use proptest::prelude::*;
use prost::Message;
use seed_shared::pb::{self, actor_message::Kind};
use seed_shared::{EnvSpec, ObsDType, ProtocolError};

/// Every refusal names a field (`field ...` or `fields ...`).
fn names_a_field(e: &ProtocolError) -> bool {
    let m = e.to_string();
    m.starts_with("field `") || m.starts_with("fields `")
}

fn specs() -> Vec<EnvSpec> {
    vec![
        EnvSpec::cartpole(),
        EnvSpec::synthetic(vec![3, 2], ObsDType::U8, 4),
        EnvSpec::synthetic(vec![1], ObsDType::F32, 2),
    ]
}

/// A float from a small set of awkward values, or any bit pattern.
fn awkward_f32() -> impl Strategy<Value = f32> {
    prop_oneof![
        Just(0.0f32),
        Just(f32::NAN),
        Just(f32::INFINITY),
        Just(f32::NEG_INFINITY),
        Just(f32::MAX),
        Just(-0.0),
        any::<u32>().prop_map(f32::from_bits),
    ]
}

/// Step batches near the valid ones: lengths off by one, indices out of
/// range or repeated, awkward floats in rewards and observations.
fn step_batch(num_envs: u32) -> impl Strategy<Value = pb::StepBatch> {
    (1usize..6).prop_flat_map(move |n| {
        let len = n..n + 2;
        (
            any::<u64>(),
            proptest::collection::vec(0..num_envs + 2, n..n + 1),
            proptest::collection::vec(awkward_f32(), 0..(n * 6 + 2)),
            proptest::collection::vec(awkward_f32(), len.clone()),
            proptest::collection::vec(any::<bool>(), len.clone()),
            proptest::collection::vec(any::<bool>(), len.clone()),
            proptest::collection::vec(any::<u64>(), len),
            proptest::collection::vec((0..num_envs + 2, awkward_f32()), 0..3),
        )
            .prop_map(
                |(seq, env_indices, obs, rewards, terminated, truncated, run_ids, eps)| {
                    pb::StepBatch {
                        seq,
                        env_indices,
                        observations: obs.iter().flat_map(|v| v.to_le_bytes()).collect(),
                        rewards,
                        terminated,
                        truncated,
                        run_ids,
                        episodes: eps
                            .into_iter()
                            .map(|(env_index, episode_return)| pb::EpisodeStats {
                                env_index,
                                episode_return,
                                episode_length: 1,
                            })
                            .collect(),
                    }
                },
            )
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(2000))]

    #[test]
    fn arbitrary_bytes_decode_or_fail_and_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..256)) {
        if let Ok(msg) = pb::ActorMessage::decode(bytes.as_slice()) {
            match msg.kind {
                Some(Kind::Steps(b)) => {
                    for spec in specs() {
                        if let Err(e) = spec.validate_step_batch(&b, 4) {
                            prop_assert!(names_a_field(&e), "{e}");
                        }
                    }
                }
                Some(Kind::Hello(h)) => {
                    if let Some(s) = &h.spec {
                        if let Err(e) = EnvSpec::from_proto(s) {
                            prop_assert!(names_a_field(&e), "{e}");
                        }
                    }
                }
                None => {}
            }
        }
    }

    #[test]
    fn step_batches_are_accepted_only_when_valid_and_refusals_name_a_field(
        b in step_batch(4),
        which in 0usize..3,
    ) {
        let spec = &specs()[which];
        let n = b.env_indices.len();
        match spec.validate_step_batch(&b, 4) {
            Ok(()) => {
                // What acceptance promises downstream.
                prop_assert!(b.env_indices.iter().all(|&i| i < 4));
                let mut seen = b.env_indices.clone();
                seen.sort_unstable();
                seen.dedup();
                prop_assert_eq!(seen.len(), n);
                prop_assert_eq!(b.observations.len(), n * spec.obs_bytes());
                prop_assert!(b.rewards.iter().all(|r| r.is_finite()));
                prop_assert!(b.terminated.iter().zip(&b.truncated).all(|(a, t)| !(*a && *t)));
                if spec.obs_dtype == ObsDType::F32 {
                    prop_assert!(b.observations.chunks_exact(4)
                        .all(|c| f32::from_le_bytes([c[0], c[1], c[2], c[3]]).is_finite()));
                }
            }
            Err(e) => prop_assert!(names_a_field(&e), "{e}"),
        }
    }

    #[test]
    fn hellos_specs_are_accepted_only_when_usable(
        shape in proptest::collection::vec(any::<u32>(), 0..4),
        dtype in -1i32..4,
        actions in any::<u32>(),
        action_box in proptest::option::of((
            proptest::collection::vec(0u32..5, 0..3),
            proptest::collection::vec(-2.0f32..2.0, 0..5),
            proptest::collection::vec(-2.0f32..2.0, 0..5),
        )),
    ) {
        let action_box = action_box.map(|(shape, low, high)| pb::BoxSpace { shape, low, high });
        let p = pb::EnvSpec { env_name: "x".into(), obs_shape: shape, obs_dtype: dtype, num_actions: actions, action_box };
        match EnvSpec::from_proto(&p) {
            Ok(s) => {
                prop_assert!(s.action.dim() > 0 && !s.obs_shape.is_empty());
                if let seed_shared::ActionSpace::Box { low, high, .. } = &s.action {
                    prop_assert!(low.iter().zip(high).all(|(l, h)| l <= h));
                }
                // Sizes are representable.
                let _ = s.obs_bytes();
            }
            Err(e) => prop_assert!(names_a_field(&e), "{e}"),
        }
    }
}
