//! Every bad input ends only its own stream, with the right gRPC code and a
//! message naming the offending field, while a good actor keeps being served.
use crate::support;

use seed_shared::pb::{self, actor_message::Kind};
use support::{hello, steps, GoodActor, RawBytesStream, RawStream};
use tonic::Code;

const TOKEN: &str = "s3cret";
const MAX_MESSAGE_BYTES: usize = 4096;

/// One bad message and how the learner must answer it.
struct Rejection {
    /// Say hello (4 envs) and get the welcome before sending `message`.
    welcome_first: bool,
    message: Kind,
    code: Code,
    /// A part of the status message (the field it names).
    names: String,
}

/// Opens a stream, says hello if the case asks for it, sends the bad
/// message and checks the status; then the good actor must still progress.
async fn expect_rejection(server: &seed_learner::app::Learner, good: &GoodActor, case: Rejection) {
    let mut s = RawStream::open(server).await;
    if case.welcome_first {
        s.hello(4, TOKEN).await;
    }
    s.send(case.message).await;
    assert_status(&s.status().await, case.code, &case.names);
    good.progresses(5).await;
}

/// `status` has `code` and a message containing `names`.
fn assert_status(status: &tonic::Status, code: Code, names: &str) {
    assert_eq!(status.code(), code, "{}", status.message());
    assert!(
        status.message().contains(names),
        "status {:?} should name `{names}`",
        status.message()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_bad_input_gets_its_status_and_the_good_actor_keeps_going() {
    let server = support::start_learner(|c| {
        c.serve.token = seed_shared::Token::new(TOKEN);
        c.serve.max_message_bytes = MAX_MESSAGE_BYTES;
    })
    .await;
    let good = GoodActor::start(&server, 8, TOKEN).await;
    good.progresses(5).await;
    let mut cases = Vec::new();

    // Wrong observation byte length.
    let mut b = steps(0, &[0, 1]);
    b.observations = vec![0u8; 31].into();
    cases.push(Rejection {
        welcome_first: true,
        message: Kind::Steps(b),
        code: Code::InvalidArgument,
        names: "observations".to_string(),
    });

    // NaN and infinite rewards.
    let mut b = steps(0, &[0, 1]);
    b.rewards[1] = f32::NAN;
    cases.push(Rejection {
        welcome_first: true,
        message: Kind::Steps(b),
        code: Code::InvalidArgument,
        names: "rewards[1]".to_string(),
    });
    let mut b = steps(0, &[0]);
    b.rewards[0] = f32::INFINITY;
    cases.push(Rejection {
        welcome_first: true,
        message: Kind::Steps(b),
        code: Code::InvalidArgument,
        names: "rewards[0]".to_string(),
    });

    // NaN and infinite observations: the env is named.
    for (bad, env) in [(f32::NAN, 1usize), (f32::NEG_INFINITY, 0)] {
        let mut b = steps(0, &[3, 1]);
        let mut obs = b.observations.to_vec();
        let at = 4 * (env * 4 + 2);
        obs[at..at + 4].copy_from_slice(&bad.to_le_bytes());
        b.observations = obs.into();
        cases.push(Rejection {
            welcome_first: true,
            message: Kind::Steps(b),
            code: Code::InvalidArgument,
            names: format!("`observations`: env `env_indices[{env}]`"),
        });
    }

    // Terminated and truncated at once.
    let mut b = steps(0, &[0, 1, 2]);
    b.terminated[2] = true;
    b.truncated[2] = true;
    cases.push(Rejection {
        welcome_first: true,
        message: Kind::Steps(b),
        code: Code::InvalidArgument,
        names: "`truncated[2]`".to_string(),
    });

    // A first seq other than 0, and a gap after a good batch.
    cases.push(Rejection {
        welcome_first: true,
        message: Kind::Steps(steps(1, &[0])),
        code: Code::InvalidArgument,
        names: "`seq` = 1: expected 0".to_string(),
    });
    let mut s = RawStream::open(&server).await;
    s.hello(4, TOKEN).await;
    s.send(Kind::Steps(steps(0, &[0]))).await;
    s.send(Kind::Steps(steps(2, &[1]))).await;
    assert_status(
        &s.status().await,
        Code::InvalidArgument,
        "`seq` = 2: expected 1",
    );

    // Bytes that do not decode as an ActorMessage: INVALID_ARGUMENT, with
    // prost's account of where decoding failed.
    let mut raw = RawBytesStream::open(&server).await;
    let hello_bytes = RawBytesStream::encode(&pb::ActorMessage {
        kind: Some(Kind::Hello(hello(4, TOKEN))),
    });
    let _ = raw.tx.send(hello_bytes).await;
    // Field 2 (steps), length-delimited, claiming 100 bytes that are not there.
    let _ = raw
        .tx
        .send(bytes::Bytes::from_static(&[0x12, 100, 1, 2]))
        .await;
    assert_status(
        &raw.status().await,
        Code::InvalidArgument,
        "message: undecodable bytes (failed to decode Protobuf message: ActorMessage",
    );
    good.progresses(5).await;

    // Env index out of range (the stream has 4 envs).
    let b = steps(0, &[0, 4]);
    cases.push(Rejection {
        welcome_first: true,
        message: Kind::Steps(b),
        code: Code::InvalidArgument,
        names: "env_indices[1]".to_string(),
    });

    // First message not a hello.
    cases.push(Rejection {
        welcome_first: false,
        message: Kind::Steps(steps(0, &[0])),
        code: Code::InvalidArgument,
        names: "hello".to_string(),
    });

    // A second hello.
    cases.push(Rejection {
        welcome_first: true,
        message: Kind::Hello(hello(4, TOKEN)),
        code: Code::InvalidArgument,
        names: "hello".to_string(),
    });

    // Unknown dtype in the hello.
    let mut h = hello(4, TOKEN);
    if let Some(spec) = h.spec.as_mut() {
        spec.obs_dtype = 42;
    }
    cases.push(Rejection {
        welcome_first: false,
        message: Kind::Hello(h),
        code: Code::InvalidArgument,
        names: "spec.obs_dtype".to_string(),
    });

    // A spec that differs from the learner's: its observations, or its
    // action space.
    let mut h = hello(4, TOKEN);
    if let Some(spec) = h.spec.as_mut() {
        spec.obs_shape = vec![5];
    }
    cases.push(Rejection {
        welcome_first: false,
        message: Kind::Hello(h),
        code: Code::FailedPrecondition,
        names: "spec.obs_shape".to_string(),
    });
    let mut h = hello(4, TOKEN);
    if let Some(spec) = h.spec.as_mut() {
        spec.num_actions = 0;
        spec.action_box = Some(pb::BoxSpace {
            shape: vec![1],
            low: vec![-1.0],
            high: vec![1.0],
        });
    }
    cases.push(Rejection {
        welcome_first: false,
        message: Kind::Hello(h),
        code: Code::FailedPrecondition,
        names: "spec.action_box".to_string(),
    });

    // Missing and wrong token.
    cases.push(Rejection {
        welcome_first: false,
        message: Kind::Hello(hello(4, "")),
        code: Code::Unauthenticated,
        names: "token".to_string(),
    });
    cases.push(Rejection {
        welcome_first: false,
        message: Kind::Hello(hello(4, "guess")),
        code: Code::Unauthenticated,
        names: "token".to_string(),
    });

    // A message over --max-message-bytes (the limit is named).
    let mut b = steps(0, &[0]);
    b.observations = vec![0u8; 2 * MAX_MESSAGE_BYTES].into();
    cases.push(Rejection {
        welcome_first: true,
        message: Kind::Steps(b),
        code: Code::ResourceExhausted,
        names: MAX_MESSAGE_BYTES.to_string(),
    });
    for case in cases {
        expect_rejection(&server, &good, case).await;
    }

    // An empty message.
    let mut s = RawStream::open(&server).await;
    s.hello(4, TOKEN).await;
    let _ = s.tx.send(pb::ActorMessage { kind: None }).await;
    let status = s.status().await;
    assert_eq!(status.code(), Code::InvalidArgument);
    assert!(status.message().contains("kind"), "{}", status.message());

    good.progresses(5).await;
    // Every rejected stream's slots were freed: only the good actor's remain.
    let m = server.metrics();
    support::wait_until("rejected streams' slots to be freed", || {
        m.snapshot().live_slots == 8
    })
    .await;
    good.stop();
    server.shutdown().await.expect("clean shutdown");
}
