//! What submission reads from this machine for flux's options: the soft
//! resource limits flux passes on (`--rlimit`), and the files `--add-file`
//! puts in the jobspec (RFC 37).

use std::os::unix::fs::MetadataExt;

use anyhow::anyhow;
use fluxgate_shared::jobspec::{AddFile, content_fileref, file_fileref, parse_add_file};
use nix::sys::resource::{RLIM_INFINITY, Resource, getrlimit};
use serde_json::Value;

/// This process's soft limit flux calls `name` (`None`: unlimited, or a
/// limit this system does not have).
pub fn soft_rlimit(name: &str) -> Option<u64> {
    let res = match name {
        "as" => Resource::RLIMIT_AS,
        "core" => Resource::RLIMIT_CORE,
        "cpu" => Resource::RLIMIT_CPU,
        "data" => Resource::RLIMIT_DATA,
        "fsize" => Resource::RLIMIT_FSIZE,
        "memlock" => Resource::RLIMIT_MEMLOCK,
        "msgqueue" => Resource::RLIMIT_MSGQUEUE,
        "nice" => Resource::RLIMIT_NICE,
        "nofile" | "ofile" => Resource::RLIMIT_NOFILE,
        "nproc" => Resource::RLIMIT_NPROC,
        "rss" => Resource::RLIMIT_RSS,
        "rtprio" => Resource::RLIMIT_RTPRIO,
        "rttime" => Resource::RLIMIT_RTTIME,
        "sigpending" => Resource::RLIMIT_SIGPENDING,
        "stack" => Resource::RLIMIT_STACK,
        _ => return None,
    };
    let (soft, _) = getrlimit(res).ok()?;
    (soft != RLIM_INFINITY).then_some(soft)
}

/// An I/O error as Python prints an `OSError` on a file:
/// `[Errno 2] No such file or directory: 'PATH'`, the words flux's
/// errors carry.
pub fn python_os_error(e: &std::io::Error, path: &str) -> String {
    match e.raw_os_error() {
        Some(code) => {
            let text = e.to_string();
            let words = text
                .strip_suffix(&format!(" (os error {code})"))
                .unwrap_or(&text);
            format!("[Errno {code}] {words}: '{path}'")
        }
        None => e.to_string(),
    }
}

/// `--add-file=ARG`: its name under `attributes.system.files` and its
/// RFC 37 file object, as flux's `jobspec_add_file` makes them.
pub fn fileref(arg: &str) -> anyhow::Result<(String, Value)> {
    let err = |m: String| anyhow!("--add-file={arg}: {m}");
    match parse_add_file(arg).map_err(|e| anyhow!("{e}"))? {
        AddFile::Content { name, data, perms } => Ok((name, content_fileref(&data, perms))),
        AddFile::Path { name, path } => {
            let meta = std::fs::metadata(&path).map_err(|e| err(python_os_error(&e, &path)))?;
            let bytes = std::fs::read(&path).map_err(|e| err(python_os_error(&e, &path)))?;
            Ok((name, file_fileref(meta.mode(), &bytes)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn os_errors_read_as_python_prints_them() {
        let e = std::fs::read("/nonexistent/x").unwrap_err();
        assert_eq!(
            python_os_error(&e, "/nonexistent/x"),
            "[Errno 2] No such file or directory: '/nonexistent/x'"
        );
    }

    #[test]
    fn unlimited_is_none() {
        let (soft, _) = getrlimit(Resource::RLIMIT_NOFILE).unwrap();
        assert_eq!(
            soft_rlimit("nofile"),
            (soft != RLIM_INFINITY).then_some(soft)
        );
        assert_eq!(soft_rlimit("nosuch"), None);
    }
}
