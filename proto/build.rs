//! Compiles every `.proto` under `proto/` with protox (no system `protoc`),
//! writes the encoded descriptor set for gRPC reflection and generates the
//! prost messages and tonic clients and servers.

use std::io;
use std::path::{Path, PathBuf};

use protox::prost::Message as _;

const PROTO_ROOT: &str = "proto";

fn main() -> Result<(), Box<dyn std::error::Error>> {
    println!("cargo:rerun-if-changed={PROTO_ROOT}");

    let mut protos = Vec::new();
    collect_protos(Path::new(PROTO_ROOT), &mut protos)?;
    protos.sort();
    for proto in &protos {
        println!("cargo:rerun-if-changed={}", proto.display());
    }

    let fds = protox::compile(&protos, [PROTO_ROOT])?;

    let out_dir = PathBuf::from(std::env::var("OUT_DIR")?);
    std::fs::write(out_dir.join("nephrite_descriptor.bin"), fds.encode_to_vec())?;

    // One include file nests every package's module (`nephrite.preparer.data.v1` →
    // `nephrite::preparer::data::v1`), so adding a `.proto` needs no edit of `lib.rs`.
    tonic_prost_build::configure()
        .include_file("_includes.rs")
        .compile_fds(fds)?;
    Ok(())
}

/// Every `*.proto` file below `dir`, recursively; directories are watched too
/// so that adding a file reruns the build script.
fn collect_protos(dir: &Path, out: &mut Vec<PathBuf>) -> io::Result<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            println!("cargo:rerun-if-changed={}", path.display());
            collect_protos(&path, out)?;
        } else if path.extension().is_some_and(|ext| ext == "proto") {
            out.push(path);
        }
    }
    Ok(())
}
