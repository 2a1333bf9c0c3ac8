//! Directories and files no other user may read: an instance's state.
//!
//! A state directory holds the store (every user's environment and output),
//! the instance key and the owner's token, so it is 0700 and every file in it
//! 0600. Each is created with its final mode, never chmod-ed after it exists:
//! between a create with the process umask and a later chmod, another user
//! could open it and keep the descriptor. A service that creates files through
//! a library (SQLite's `-wal` and `-shm`) sets [`restrict_umask`] first.
//!
//! A directory that already exists must be ours: one owned by another user
//! could be swapped or read by them whatever its mode, so it is refused; one
//! of ours with looser bits is tightened before anything is created in it.

use std::fs::{File, OpenOptions};
use std::io::{self, Write};
use std::os::unix::fs::{DirBuilderExt, MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

/// The mode of a private directory.
pub const DIR_MODE: u32 = 0o700;
/// The mode of a private file.
pub const FILE_MODE: u32 = 0o600;
/// The umask under which every file a process creates is private.
pub const PRIVATE_UMASK: u32 = 0o077;

/// Why a private directory or file could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PrivateError {
    /// The path exists and belongs to another user.
    #[error(
        "{} belongs to uid {owner}, not to uid {me} who runs this: another user could \
         read or replace what is kept there; choose a directory of your own",
        path.display()
    )]
    NotOurs {
        /// The path.
        path: PathBuf,
        /// Its owner.
        owner: u32,
        /// Our effective uid.
        me: u32,
    },
    /// The path exists and is not a directory.
    #[error("{} exists and is not a directory", path.display())]
    NotADirectory {
        /// The path.
        path: PathBuf,
    },
    /// The file system refused.
    #[error("{what} {}: {source}", path.display())]
    Io {
        /// What was being done.
        what: &'static str,
        /// The path.
        path: PathBuf,
        /// The cause.
        source: io::Error,
    },
}

impl From<PrivateError> for io::Error {
    fn from(e: PrivateError) -> io::Error {
        let kind = match &e {
            PrivateError::NotOurs { .. } => io::ErrorKind::PermissionDenied,
            PrivateError::NotADirectory { .. } => io::ErrorKind::AlreadyExists,
            PrivateError::Io { source, .. } => source.kind(),
        };
        io::Error::new(kind, e.to_string())
    }
}

fn io_error<'a>(what: &'static str, path: &'a Path) -> impl FnOnce(io::Error) -> PrivateError + 'a {
    move |source| PrivateError::Io {
        what,
        path: path.to_path_buf(),
        source,
    }
}

/// Make every file this process creates from now on private (umask 077).
/// Affects the whole process and what it starts; call it only in services
/// that run no user command.
pub fn restrict_umask() {
    nix::sys::stat::umask(nix::sys::stat::Mode::from_bits_truncate(PRIVATE_UMASK as _));
}

/// Create `path` as a private directory (0700), its missing parents with the
/// usual mode; an existing one must be ours and is tightened to 0700.
pub fn create_dir(path: &Path) -> Result<(), PrivateError> {
    if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
        std::fs::create_dir_all(parent).map_err(io_error("cannot create", parent))?;
    }
    match std::fs::DirBuilder::new().mode(DIR_MODE).create(path) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::AlreadyExists => tighten_dir(path),
        Err(e) => Err(io_error("cannot create", path)(e)),
    }
}

/// An existing directory: ours, and 0700 from now on.
fn tighten_dir(path: &Path) -> Result<(), PrivateError> {
    let meta = std::fs::metadata(path).map_err(io_error("cannot read", path))?;
    if !meta.is_dir() {
        return Err(PrivateError::NotADirectory {
            path: path.to_path_buf(),
        });
    }
    let me = nix::unistd::geteuid().as_raw();
    if meta.uid() != me {
        return Err(PrivateError::NotOurs {
            path: path.to_path_buf(),
            owner: meta.uid(),
            me,
        });
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(DIR_MODE))
            .map_err(io_error("cannot restrict", path))?;
    }
    Ok(())
}

/// Open `path` for writing, created 0600 and truncated. A file that was
/// there before with looser bits is tightened through the open descriptor,
/// before anything is written to it.
pub fn create_file(path: &Path) -> Result<File, PrivateError> {
    let file = OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(FILE_MODE)
        .open(path)
        .map_err(io_error("cannot create", path))?;
    let meta = file.metadata().map_err(io_error("cannot read", path))?;
    if meta.mode() & 0o077 != 0 {
        file.set_permissions(std::fs::Permissions::from_mode(FILE_MODE))
            .map_err(io_error("cannot restrict", path))?;
    }
    Ok(file)
}

/// Write `bytes` to `path` as a private file with `mode` (0600 or tighter,
/// 0700 for a script), replacing it whole: readers see the old or the new
/// content, never a part, and never a moment of looser bits.
pub fn write_file_mode(path: &Path, bytes: &[u8], mode: u32) -> Result<(), PrivateError> {
    let mut name = path.file_name().unwrap_or_default().to_os_string();
    name.push(".tmp");
    let tmp = path.with_file_name(name);
    let _ = std::fs::remove_file(&tmp);
    let mut file = OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(mode & 0o700)
        .open(&tmp)
        .map_err(io_error("cannot create", &tmp))?;
    let written = file.write_all(bytes).and_then(|()| file.sync_all());
    if let Err(e) = written {
        let _ = std::fs::remove_file(&tmp);
        return Err(io_error("cannot write", &tmp)(e));
    }
    std::fs::rename(&tmp, path).map_err(io_error("cannot replace", path))
}

/// Write `bytes` to `path` as a private file (0600), replacing it whole.
pub fn write_file(path: &Path, bytes: &[u8]) -> Result<(), PrivateError> {
    write_file_mode(path, bytes, FILE_MODE)
}

/// A user's own directory for the credentials of the instances they run
/// inside jobs: `$TMPDIR/fluxgate-UID` (else `/tmp`), 0700, theirs. It is
/// on the machine the instance's first node runs on; `fluxgate proxy`,
/// `uri` and `alloc` read it there (or wherever the temporary directory is
/// shared).
pub fn user_dir(uid: u32) -> PathBuf {
    std::env::temp_dir().join(format!("fluxgate-{uid}"))
}

/// Where the owner's token of the instance serving at `uri` is kept in
/// `uid`'s [`user_dir`]: one file per address, named after it.
pub fn instance_token_path(uid: u32, uri: &str) -> PathBuf {
    let name: String = uri
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    user_dir(uid).join(format!("{name}.token"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().mode() & 0o777
    }

    #[test]
    fn a_new_directory_and_its_files_are_private() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("a/b/state");
        create_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        let log = dir.join("x.log");
        create_file(&log).unwrap().write_all(b"hi").unwrap();
        assert_eq!(mode(&log), 0o600);
        write_file(&dir.join("token"), b"secret").unwrap();
        assert_eq!(mode(&dir.join("token")), 0o600);
        assert_eq!(std::fs::read(dir.join("token")).unwrap(), b"secret");
        write_file_mode(&dir.join("script"), b"#!/bin/sh\n", 0o755).unwrap();
        assert_eq!(mode(&dir.join("script")), 0o700);
        let names: Vec<_> = std::fs::read_dir(&dir).unwrap().collect();
        assert_eq!(names.len(), 3, "no temporary file left behind");
    }

    #[test]
    fn an_existing_loose_directory_and_file_are_tightened() {
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("state");
        std::fs::create_dir(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let log = dir.join("old.log");
        std::fs::write(&log, "old").unwrap();
        std::fs::set_permissions(&log, std::fs::Permissions::from_mode(0o644)).unwrap();
        create_dir(&dir).unwrap();
        assert_eq!(mode(&dir), 0o700);
        create_file(&log).unwrap();
        assert_eq!(mode(&log), 0o600);
        assert_eq!(std::fs::read(&log).unwrap(), b"", "truncated");
    }

    #[test]
    fn an_instance_token_is_named_after_its_address() {
        let p = instance_token_path(1001, "http://127.0.0.1:4000");
        assert!(
            p.ends_with("fluxgate-1001/http___127_0_0_1_4000.token"),
            "{p:?}"
        );
        assert_ne!(p, instance_token_path(1001, "http://127.0.0.1:4001"));
        assert_ne!(p, instance_token_path(1002, "http://127.0.0.1:4000"));
    }

    #[test]
    fn a_file_is_not_a_directory() {
        let top = tempfile::tempdir().unwrap();
        let f = top.path().join("f");
        std::fs::write(&f, "").unwrap();
        assert!(matches!(
            create_dir(&f),
            Err(PrivateError::NotADirectory { .. })
        ));
    }

    #[test]
    fn a_directory_of_another_user_is_refused() {
        if !nix::unistd::geteuid().is_root() {
            eprintln!("skipped: only root can make a directory owned by another user");
            return;
        }
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("theirs");
        std::fs::create_dir(&dir).unwrap();
        let nobody = nix::unistd::Uid::from_raw(65534);
        nix::unistd::chown(&dir, Some(nobody), None).unwrap();
        let e = create_dir(&dir).unwrap_err();
        assert!(
            matches!(e, PrivateError::NotOurs { owner: 65534, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("uid 65534"), "{e}");
    }
}
