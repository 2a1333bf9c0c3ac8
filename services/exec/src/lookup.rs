//! Where a task's program is: execvp's search of PATH, done before the
//! spawn. A command given by path (with a `/`) is used as it is.
//!
//! Why here and not in the kernel's exec: Rust's standard library starts a
//! process with posix_spawn (a vfork-like clone that shares the parent's
//! memory until exec) only when the program is a path or PATH is not being
//! changed; otherwise it forks, copying the page tables of the whole exec
//! service for every task. A task's environment always sets PATH.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

/// The search path execvp uses when PATH is unset (glibc's default).
const DEFAULT_PATH: &str = "/bin:/usr/bin";

/// Resolve `program` as execvp would with the environment's `path` (PATH's
/// value), relative entries from `cwd`: the first regular file with an
/// execute bit. Not found: ENOENT; found only without permission: EACCES.
pub fn program(program: &str, path: Option<&str>, cwd: Option<&Path>) -> io::Result<PathBuf> {
    if program.contains('/') {
        return Ok(PathBuf::from(program));
    }
    if program.is_empty() {
        return Err(io::Error::from_raw_os_error(nix::libc::ENOENT));
    }
    let mut denied = false;
    let mut tried: Vec<&str> = Vec::new();
    for dir in path.unwrap_or(DEFAULT_PATH).split(':') {
        // An empty entry is the current directory, as in execvp.
        let dir = if dir.is_empty() { "." } else { dir };
        // A directory named twice (profiles often prepend theirs again)
        // answers the same the second time: one stat a directory.
        if tried.contains(&dir) {
            continue;
        }
        tried.push(dir);
        let mut candidate = PathBuf::from(dir);
        if candidate.is_relative()
            && let Some(cwd) = cwd
        {
            candidate = cwd.join(candidate);
        }
        candidate.push(program);
        match std::fs::metadata(&candidate) {
            Ok(m) if m.is_file() && m.permissions().mode() & 0o111 != 0 => return Ok(candidate),
            Ok(m) if m.is_file() => denied = true,
            _ => {}
        }
    }
    let errno = if denied {
        nix::libc::EACCES
    } else {
        nix::libc::ENOENT
    };
    Err(io::Error::from_raw_os_error(errno))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn found_on_the_path_in_order() {
        let dir = tempfile::tempdir().unwrap();
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        for d in [&a, &b] {
            std::fs::create_dir(d).unwrap();
        }
        let plain = b.join("tool");
        std::fs::write(&plain, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&plain, std::fs::Permissions::from_mode(0o755)).unwrap();
        let path = format!("{}:{}", a.display(), b.display());
        assert_eq!(program("tool", Some(&path), None).unwrap(), plain);
        // Not executable where it is found first: the next one.
        let shadow = a.join("tool");
        std::fs::write(&shadow, "x").unwrap();
        std::fs::set_permissions(&shadow, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(program("tool", Some(&path), None).unwrap(), plain);
        // Only without permission: EACCES, as execvp.
        let only = format!("{}", a.display());
        let e = program("tool", Some(&only), None).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(nix::libc::EACCES));
        let e = program("nosuch", Some(&path), None).unwrap_err();
        assert_eq!(e.raw_os_error(), Some(nix::libc::ENOENT));
        // Relative entries are taken from the task's directory.
        assert_eq!(
            program("tool", Some("b"), Some(dir.path())).unwrap(),
            dir.path().join("b").join("tool")
        );
        // A directory named twice is still searched in order.
        let twice = format!("{}:{}:{}", a.display(), a.display(), b.display());
        assert_eq!(program("tool", Some(&twice), None).unwrap(), plain);
        assert_eq!(program("./x", None, None).unwrap(), PathBuf::from("./x"));
        assert_eq!(
            program("true", None, None).unwrap().file_name().unwrap(),
            "true"
        );
    }
}
