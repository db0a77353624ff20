//! [`EchoReplay`]: the floor a replay `Sample` round trip is compared to.
//!
//! It serves the same `seed.v1.Replay` service over the same tonic server
//! settings as the replay server (TCP with `TCP_NODELAY`, the same message
//! limits), but `Sample` answers every request at once with one prepared
//! `SampleReply` (a real reply of the measured table, so the same bytes on
//! the wire) and ends the stream: no table, no sampling, no copy (the
//! reply's blocks are `Bytes`, cloned by reference count), no task between
//! the handler and the response. The client is the same
//! [`ReplayClient::sample`](seed_replay_service::ReplayClient::sample),
//! so whatever a real `sample(128)` takes beyond this is the server's.
//! Every other method is `UNIMPLEMENTED`.
use std::net::SocketAddr;
use std::pin::Pin;

use seed_replay_service::pb::replay_server::{Replay, ReplayServer};
use seed_replay_service::pb::{self, SampleReply};
use tokio::net::TcpListener;
use tokio_stream::Stream;
use tonic::transport::server::TcpIncoming;
use tonic::{Request, Response, Status, Streaming};

/// Answers `Sample` with `reply`, once per call.
#[derive(Debug, Clone)]
pub struct EchoReplay {
    pub reply: SampleReply,
}

type ReplyStream<T> = Pin<Box<dyn Stream<Item = Result<T, Status>> + Send>>;

fn unimplemented<T>(what: &str) -> Result<T, Status> {
    Err(Status::unimplemented(format!(
        "the echo serves only Sample, not {what}"
    )))
}

#[tonic::async_trait]
impl Replay for EchoReplay {
    type InsertStream = ReplyStream<pb::InsertReply>;
    type SampleStream = ReplyStream<SampleReply>;
    type FollowStream = ReplyStream<pb::FollowReply>;
    type SubmitStepsStreamStream = ReplyStream<pb::SubmitStepsReply>;

    async fn submit_steps_stream(
        &self,
        _request: Request<Streaming<pb::SubmitStepsRequest>>,
    ) -> Result<Response<Self::SubmitStepsStreamStream>, Status> {
        unimplemented("SubmitStepsStream")
    }

    async fn insert(
        &self,
        _request: Request<Streaming<pb::InsertRequest>>,
    ) -> Result<Response<Self::InsertStream>, Status> {
        unimplemented("Insert")
    }

    async fn sample(
        &self,
        _request: Request<pb::SampleRequest>,
    ) -> Result<Response<Self::SampleStream>, Status> {
        let reply = self.reply.clone();
        Ok(Response::new(Box::pin(tokio_stream::once(Ok(reply)))))
    }

    async fn update_priorities(
        &self,
        _request: Request<pb::UpdatePrioritiesRequest>,
    ) -> Result<Response<pb::UpdatePrioritiesReply>, Status> {
        unimplemented("UpdatePriorities")
    }

    async fn set_policy_version(
        &self,
        _request: Request<pb::SetPolicyVersionRequest>,
    ) -> Result<Response<pb::SetPolicyVersionReply>, Status> {
        unimplemented("SetPolicyVersion")
    }

    async fn info(
        &self,
        _request: Request<pb::InfoRequest>,
    ) -> Result<Response<pb::InfoReply>, Status> {
        unimplemented("Info")
    }

    async fn checkpoint(
        &self,
        _request: Request<pb::CheckpointRequest>,
    ) -> Result<Response<pb::CheckpointReply>, Status> {
        unimplemented("Checkpoint")
    }

    async fn submit_steps(
        &self,
        _request: Request<pb::SubmitStepsRequest>,
    ) -> Result<Response<pb::SubmitStepsReply>, Status> {
        unimplemented("SubmitSteps")
    }

    async fn complete_trajectory(
        &self,
        _request: Request<pb::CompleteTrajectoryRequest>,
    ) -> Result<Response<pb::CompleteTrajectoryReply>, Status> {
        unimplemented("CompleteTrajectory")
    }

    async fn fetch_group(
        &self,
        _request: Request<pb::FetchGroupRequest>,
    ) -> Result<Response<pb::FetchGroupReply>, Status> {
        unimplemented("FetchGroup")
    }

    async fn follow(
        &self,
        _request: Request<pb::FollowRequest>,
    ) -> Result<Response<Self::FollowStream>, Status> {
        unimplemented("Follow")
    }
}

/// Serves `echo` on a free loopback port with the replay server's message
/// limit, on the current runtime, until the runtime ends; returns the address.
pub async fn serve_echo_replay(
    echo: EchoReplay,
    max_message_bytes: usize,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0").await?;
    let addr = listener.local_addr()?;
    let service = ReplayServer::new(echo)
        .max_decoding_message_size(max_message_bytes)
        .max_encoding_message_size(max_message_bytes);
    tokio::spawn(
        tonic::transport::Server::builder()
            .add_service(service)
            .serve_with_incoming(TcpIncoming::from(listener).with_nodelay(Some(true))),
    );
    Ok(addr)
}
