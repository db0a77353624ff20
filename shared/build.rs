//! Generates the protocol code from `proto/` with the pure-Rust `protox`
//! compiler, so no system `protoc` is needed.

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let proto_root = "../proto";
    println!("cargo:rerun-if-changed={proto_root}");
    let fds = protox::compile(["seed/v1/seed.proto"], [proto_root])?;
    tonic_prost_build::configure()
        .bytes(".seed.v1.StepBatch.observations")
        .compile_fds(fds)?;
    Ok(())
}
