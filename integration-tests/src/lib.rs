//! Helpers for tests that drive the real fluxgate binaries.

use std::path::PathBuf;

/// Path of a workspace binary built by `cargo build --workspace`.
pub fn binary(name: &str) -> PathBuf {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    let target = std::env::var_os("CARGO_TARGET_DIR")
        .map(PathBuf::from)
        .unwrap_or_else(|| root.join("..").join("target"));
    target.join("debug").join(name)
}
