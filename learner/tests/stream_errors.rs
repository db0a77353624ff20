//! Every bad input ends only its own stream, with the right gRPC code and a
//! message naming the offending field, while a good actor keeps being served.
mod support;

use seed_shared::pb::{self, actor_message::Kind};
use support::{hello, steps, GoodActor, RawBytesStream, RawStream};
use tonic::Code;

const TOKEN: &str = "s3cret";
const MAX_MESSAGE_BYTES: usize = 4096;

/// Opens a stream, says hello (unless `hello_first` is false), sends `bad`
/// and checks the status.
async fn expect_rejection(
    server: &seed_learner::app::Learner,
    good: &GoodActor,
    welcome_first: bool,
    bad: Kind,
    code: Code,
    names: &str,
) {
    let mut s = RawStream::open(server).await;
    if welcome_first {
        s.hello(4, TOKEN).await;
    }
    s.send(bad).await;
    assert_status(&s.status().await, code, names);
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
        c.serve.token = Some(TOKEN.into());
        c.serve.max_message_bytes = MAX_MESSAGE_BYTES;
    })
    .await;
    let good = GoodActor::start(&server, 8, TOKEN).await;
    good.progresses(5).await;

    // Wrong observation byte length.
    let mut b = steps(0, &[0, 1]);
    b.observations = vec![0u8; 31].into();
    expect_rejection(
        &server,
        &good,
        true,
        Kind::Steps(b),
        Code::InvalidArgument,
        "observations",
    )
    .await;

    // NaN and infinite rewards.
    let mut b = steps(0, &[0, 1]);
    b.rewards[1] = f32::NAN;
    expect_rejection(
        &server,
        &good,
        true,
        Kind::Steps(b),
        Code::InvalidArgument,
        "rewards[1]",
    )
    .await;
    let mut b = steps(0, &[0]);
    b.rewards[0] = f32::INFINITY;
    expect_rejection(
        &server,
        &good,
        true,
        Kind::Steps(b),
        Code::InvalidArgument,
        "rewards[0]",
    )
    .await;

    // NaN and infinite observations: the env is named.
    for (bad, env) in [(f32::NAN, 1usize), (f32::NEG_INFINITY, 0)] {
        let mut b = steps(0, &[3, 1]);
        let mut obs = b.observations.to_vec();
        let at = 4 * (env * 4 + 2);
        obs[at..at + 4].copy_from_slice(&bad.to_le_bytes());
        b.observations = obs.into();
        expect_rejection(
            &server,
            &good,
            true,
            Kind::Steps(b),
            Code::InvalidArgument,
            &format!("`observations`: env `env_indices[{env}]`"),
        )
        .await;
    }

    // Terminated and truncated at once.
    let mut b = steps(0, &[0, 1, 2]);
    b.terminated[2] = true;
    b.truncated[2] = true;
    expect_rejection(
        &server,
        &good,
        true,
        Kind::Steps(b),
        Code::InvalidArgument,
        "`truncated[2]`",
    )
    .await;

    // A first seq other than 0, and a gap after a good batch.
    expect_rejection(
        &server,
        &good,
        true,
        Kind::Steps(steps(1, &[0])),
        Code::InvalidArgument,
        "`seq` = 1: expected 0",
    )
    .await;
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
    expect_rejection(
        &server,
        &good,
        true,
        Kind::Steps(b),
        Code::InvalidArgument,
        "env_indices[1]",
    )
    .await;

    // First message not a hello.
    expect_rejection(
        &server,
        &good,
        false,
        Kind::Steps(steps(0, &[0])),
        Code::InvalidArgument,
        "hello",
    )
    .await;

    // A second hello.
    expect_rejection(
        &server,
        &good,
        true,
        Kind::Hello(hello(4, TOKEN)),
        Code::InvalidArgument,
        "hello",
    )
    .await;

    // Unknown dtype in the hello.
    let mut h = hello(4, TOKEN);
    if let Some(spec) = h.spec.as_mut() {
        spec.obs_dtype = 42;
    }
    expect_rejection(
        &server,
        &good,
        false,
        Kind::Hello(h),
        Code::InvalidArgument,
        "spec.obs_dtype",
    )
    .await;

    // A spec that differs from the learner's.
    let mut h = hello(4, TOKEN);
    if let Some(spec) = h.spec.as_mut() {
        spec.obs_shape = vec![5];
    }
    expect_rejection(
        &server,
        &good,
        false,
        Kind::Hello(h),
        Code::InvalidArgument,
        "spec.obs_shape",
    )
    .await;

    // Missing and wrong token.
    expect_rejection(
        &server,
        &good,
        false,
        Kind::Hello(hello(4, "")),
        Code::Unauthenticated,
        "token",
    )
    .await;
    expect_rejection(
        &server,
        &good,
        false,
        Kind::Hello(hello(4, "guess")),
        Code::Unauthenticated,
        "token",
    )
    .await;

    // A message over --max-message-bytes (the limit is named).
    let mut b = steps(0, &[0]);
    b.observations = vec![0u8; 2 * MAX_MESSAGE_BYTES].into();
    expect_rejection(
        &server,
        &good,
        true,
        Kind::Steps(b),
        Code::ResourceExhausted,
        &MAX_MESSAGE_BYTES.to_string(),
    )
    .await;

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
