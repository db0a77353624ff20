//! Generates the replay service's protocol code from
//! `proto/seed/v1/replay.proto` with the pure-Rust `protox` compiler, so no
//! system `protoc` is needed. Field blocks are `bytes::Bytes`: a sampled
//! batch's blocks are handed to the encoder without another copy.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_root = "../../proto";
    println!("cargo:rerun-if-changed={proto_root}/seed/v1/replay.proto");
    let fds = protox::compile(["seed/v1/replay.proto"], [proto_root])?;
    tonic_prost_build::configure()
        .bytes(".seed.v1.FieldBlock.data")
        .bytes(".seed.v1.SubmitStepsRequest.metadata")
        .bytes(".seed.v1.FetchGroupReply.metadata")
        .compile_fds(fds)?;
    Ok(())
}
