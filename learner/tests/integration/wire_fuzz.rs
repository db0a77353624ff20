//! Arbitrary message sequences through a live learner: hellos good and bad,
//! step batches near the valid ones, undecodable bytes, empty messages, in
//! any order. Each stream gets welcomes and actions, or ends with a status
//! that names the offending field (or the message, for bytes that do not
//! decode or are too large); the learner never panics, and a good actor
//! beside them is served throughout.
use crate::support;

use proptest::prelude::*;
use proptest::test_runner::{Config, TestRunner};
use seed_shared::pb::{self, actor_message::Kind, learner_message};
use support::{hello, GoodActor, RawBytesStream};
use tonic::Code;

const TOKEN: &str = "s3cret";
const MAX_MESSAGE_BYTES: usize = 4096;

#[derive(Debug, Clone)]
enum Op {
    Message(pb::ActorMessage),
    Raw(Vec<u8>),
}

fn awkward_f32() -> impl Strategy<Value = f32> {
    prop_oneof![
        4 => -1.0f32..1.0,
        1 => Just(f32::NAN),
        1 => Just(f32::INFINITY),
    ]
}

fn op() -> impl Strategy<Value = Op> {
    let hello_op = (0u32..6, 0usize..3, 0usize..3).prop_map(|(n, tok, spec)| {
        let token = [TOKEN, "", "guess"][tok];
        let mut h = hello(n, token);
        if let Some(s) = h.spec.as_mut() {
            match spec {
                1 => s.obs_shape = vec![5],
                2 => s.obs_dtype = 9,
                _ => {}
            }
        }
        Op::Message(pb::ActorMessage {
            kind: Some(Kind::Hello(h)),
        })
    });
    let steps_op = (
        0u64..3,
        proptest::collection::vec(0u32..5, 1..4),
        proptest::collection::vec(awkward_f32(), 0..20),
        any::<bool>(),
        0usize..3,
    )
        .prop_map(|(seq, envs, obs, flags, big)| {
            let n = envs.len();
            let mut b = support::steps(seq, &envs);
            if obs.len() >= 4 * n {
                b.observations = obs[..4 * n].iter().flat_map(|v| v.to_le_bytes()).collect();
            }
            b.terminated[0] = flags;
            b.truncated[0] = flags && seq == 2;
            if big == 2 {
                b.observations = vec![0u8; 2 * MAX_MESSAGE_BYTES].into();
            }
            Op::Message(pb::ActorMessage {
                kind: Some(Kind::Steps(b)),
            })
        });
    prop_oneof![
        3 => hello_op,
        4 => steps_op,
        1 => proptest::collection::vec(any::<u8>(), 0..40).prop_map(Op::Raw),
        1 => Just(Op::Message(pb::ActorMessage { kind: None })),
    ]
}

/// Whether a status is one of ours: the right kind of code and a message
/// that names what was wrong.
fn is_precise(status: &tonic::Status) -> bool {
    let m = status.message();
    matches!(
        status.code(),
        Code::InvalidArgument
            | Code::Unauthenticated
            | Code::ResourceExhausted
            | Code::FailedPrecondition
    ) && (m.contains("field `") || m.starts_with("message"))
}

#[test]
fn arbitrary_message_sequences_end_only_their_stream_with_a_precise_status() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("runtime");
    let (server, good) = rt.block_on(async {
        let server = support::start_learner(|c| {
            c.serve.token = seed_shared::Token::new(TOKEN);
            c.serve.max_message_bytes = MAX_MESSAGE_BYTES;
        })
        .await;
        let good = GoodActor::start(&server, 4, TOKEN).await;
        (server, good)
    });
    let mut runner = TestRunner::new(Config {
        cases: 64,
        ..Config::default()
    });
    let strategy = proptest::collection::vec(op(), 1..7);
    let result = runner.run(&strategy, |ops| {
        rt.block_on(async {
            let s = RawBytesStream::open(&server).await;
            for op in &ops {
                let bytes = match op {
                    Op::Message(m) => RawBytesStream::encode(m),
                    Op::Raw(b) => b.clone().into(),
                };
                if s.tx.send(bytes).await.is_err() {
                    break;
                }
            }
            // Close our side; the learner answers what it accepted, then ends.
            let RawBytesStream { tx, mut rx } = s;
            drop(tx);
            let end = support::within("the stream's end", async {
                loop {
                    match rx.message().await {
                        Ok(Some(pb::LearnerMessage {
                            kind:
                                Some(
                                    learner_message::Kind::Welcome(_)
                                    | learner_message::Kind::Actions(_),
                                ),
                        })) => continue,
                        Ok(Some(other)) => return Err(format!("unexpected {other:?}")),
                        Ok(None) => return Ok(None),
                        Err(status) => return Ok(Some(status)),
                    }
                }
            })
            .await;
            match end {
                Err(e) => Err(TestCaseError::fail(e)),
                Ok(Some(status)) if !is_precise(&status) => Err(TestCaseError::fail(format!(
                    "imprecise status {:?}: {}",
                    status.code(),
                    status.message()
                ))),
                Ok(_) => {
                    good.progresses(1).await;
                    Ok(())
                }
            }
        })
    });
    if let Err(e) = result {
        panic!("{e}");
    }
    rt.block_on(async {
        good.progresses(5).await;
        let m = server.metrics();
        support::wait_until("only the good actor's slots to stay", || {
            m.snapshot().live_slots == 4
        })
        .await;
        good.stop();
        server.shutdown().await.expect("clean shutdown");
    });
}
