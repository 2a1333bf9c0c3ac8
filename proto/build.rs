//! Compiles proto/fluxgate/v1/*.proto with protox, so no system protoc is needed,
//! and writes the descriptor set that server reflection serves.

use std::path::PathBuf;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files = [
        "fluxgate/v1/jobmanager.proto",
        "fluxgate/v1/resource.proto",
        "fluxgate/v1/exec.proto",
    ];
    for f in &files {
        println!("cargo:rerun-if-changed={f}");
    }
    let fds = protox::compile(files, ["."])?;
    let out = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(
        out.join("fluxgate_descriptor.bin"),
        prost::Message::encode_to_vec(&fds),
    )?;
    // Requests that cannot be decoded are the caller's error (see src/codec.rs).
    tonic_prost_build::configure()
        .codec_path("crate::codec::Codec")
        .compile_fds(fds)?;
    Ok(())
}
