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
//! A private directory's last component is never a symbolic link: it is made
//! with `mkdirat` and opened with `O_NOFOLLOW|O_DIRECTORY`, its owner and
//! mode read from that descriptor (`fstat`), and files made in it through the
//! same descriptor ([`PrivateDir`]), so a path swapped in between is never
//! followed, chmod-ed or written. A squatted path is an error naming it.

use std::ffi::OsStr;
use std::fs::{File, OpenOptions};
use std::io::{self, Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

use nix::fcntl::{AtFlags, OFlag};
use nix::sys::stat::Mode;

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
    /// The path is a symbolic link (made by someone to redirect what is
    /// written there); it is neither followed nor changed.
    #[error(
        "{} is a symbolic link, not a directory: it is not followed (another user \
         may have made it to redirect private files); remove it or choose another \
         directory",
        path.display()
    )]
    Symlink {
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
            PrivateError::NotADirectory { .. } | PrivateError::Symlink { .. } => {
                io::ErrorKind::AlreadyExists
            }
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
/// usual mode; an existing one must be ours (not a link) and is tightened to
/// 0700 through its descriptor.
pub fn create_dir(path: &Path) -> Result<PrivateDir, PrivateError> {
    let (parent, name) = split(path)?;
    std::fs::create_dir_all(&parent).map_err(io_error("cannot create", &parent))?;
    let parent_fd = open_parent(&parent)?;
    match nix::sys::stat::mkdirat(&parent_fd, name, Mode::from_bits_truncate(DIR_MODE as _)) {
        Ok(()) | Err(nix::errno::Errno::EEXIST) => {}
        Err(e) => return Err(io_error("cannot create", path)(e.into())),
    }
    let dir = open_in(&parent_fd, name, path)?;
    let me = nix::unistd::geteuid().as_raw();
    let st = dir.stat()?;
    if st.st_uid != me {
        return Err(PrivateError::NotOurs {
            path: path.to_path_buf(),
            owner: st.st_uid,
            me,
        });
    }
    if st.st_mode & 0o077 != 0 {
        nix::sys::stat::fchmod(&dir.fd, Mode::from_bits_truncate(DIR_MODE as _))
            .map_err(|e| io_error("cannot restrict", path)(e.into()))?;
    }
    Ok(dir)
}

/// Open the existing private directory `path` of `owner`, changing nothing:
/// a link, another owner or bits open to others are refused.
pub fn open_dir(path: &Path, owner: u32) -> Result<PrivateDir, PrivateError> {
    let (parent, name) = split(path)?;
    let parent_fd = open_parent(&parent)?;
    let dir = open_in(&parent_fd, name, path)?;
    let st = dir.stat()?;
    if st.st_uid != owner || st.st_mode & 0o077 != 0 {
        return Err(PrivateError::NotOurs {
            path: path.to_path_buf(),
            owner: st.st_uid,
            me: owner,
        });
    }
    Ok(dir)
}

/// `path`'s parent (`.` for a bare name) and last component.
fn split(path: &Path) -> Result<(PathBuf, &OsStr), PrivateError> {
    let name = path
        .file_name()
        .ok_or_else(|| PrivateError::NotADirectory {
            path: path.to_path_buf(),
        })?;
    let parent = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    Ok((parent, name))
}

fn open_parent(parent: &Path) -> Result<OwnedFd, PrivateError> {
    nix::fcntl::open(
        parent,
        OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| io_error("cannot open", parent)(e.into()))
}

/// `name` in `parent`, opened as a directory without following a link.
fn open_in(parent: &OwnedFd, name: &OsStr, path: &Path) -> Result<PrivateDir, PrivateError> {
    let flags = OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
    match nix::fcntl::openat(parent, name, flags, Mode::empty()) {
        Ok(fd) => Ok(PrivateDir {
            fd,
            path: path.to_path_buf(),
        }),
        Err(nix::errno::Errno::ELOOP) => Err(PrivateError::Symlink {
            path: path.to_path_buf(),
        }),
        Err(nix::errno::Errno::ENOTDIR) => {
            // O_NOFOLLOW|O_DIRECTORY on a link may say ENOTDIR: tell which.
            let link = nix::sys::stat::fstatat(parent, name, AtFlags::AT_SYMLINK_NOFOLLOW)
                .is_ok_and(|st| st.st_mode & nix::libc::S_IFMT == nix::libc::S_IFLNK);
            Err(if link {
                PrivateError::Symlink {
                    path: path.to_path_buf(),
                }
            } else {
                PrivateError::NotADirectory {
                    path: path.to_path_buf(),
                }
            })
        }
        Err(e) => Err(io_error("cannot open", path)(e.into())),
    }
}

/// A private directory held open: what is made in it is made through this
/// descriptor, whatever becomes of its path meanwhile.
#[derive(Debug)]
pub struct PrivateDir {
    fd: OwnedFd,
    path: PathBuf,
}

impl PrivateDir {
    /// The path it was opened at.
    pub fn path(&self) -> &Path {
        &self.path
    }

    fn stat(&self) -> Result<nix::sys::stat::FileStat, PrivateError> {
        nix::sys::stat::fstat(&self.fd).map_err(|e| io_error("cannot read", &self.path)(e.into()))
    }

    /// Write `bytes` to the file `name` in it (0600), replacing it whole;
    /// its path.
    pub fn write_file(&self, name: &str, bytes: &[u8]) -> Result<PathBuf, PrivateError> {
        let path = self.path.join(name);
        let tmp = format!("{name}.tmp");
        let _ = nix::unistd::unlinkat(
            &self.fd,
            tmp.as_str(),
            nix::unistd::UnlinkatFlags::NoRemoveDir,
        );
        let flags =
            OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = nix::fcntl::openat(
            &self.fd,
            tmp.as_str(),
            flags,
            Mode::from_bits_truncate(FILE_MODE as _),
        )
        .map_err(|e| io_error("cannot create", &path)(e.into()))?;
        let mut file = File::from(fd);
        let written = file.write_all(bytes).and_then(|()| file.sync_all());
        let renamed = written.and_then(|()| {
            nix::fcntl::renameat(&self.fd, tmp.as_str(), &self.fd, name).map_err(io::Error::from)
        });
        if let Err(e) = renamed {
            self.remove_file(&tmp);
            return Err(io_error("cannot write", &path)(e));
        }
        Ok(path)
    }

    /// The text of the file `name` in it (not a link).
    pub fn read_file(&self, name: &str) -> io::Result<String> {
        let flags = OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC;
        let fd = nix::fcntl::openat(&self.fd, name, flags, Mode::empty())?;
        let mut text = String::new();
        File::from(fd).read_to_string(&mut text)?;
        Ok(text)
    }

    /// Remove the file `name` from it, if there.
    pub fn remove_file(&self, name: &str) {
        let _ = nix::unistd::unlinkat(&self.fd, name, nix::unistd::UnlinkatFlags::NoRemoveDir);
    }
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
/// inside jobs, on the machine the instance's first node runs on (`fluxgate
/// proxy`, `uri` and `alloc` read it there). Never a name another user could
/// make first: `$XDG_RUNTIME_DIR/fluxgate` (the caller's own, when it is
/// theirs and private), `/run/user/UID/fluxgate`, `/run/fluxgate` for root,
/// `~/.fluxgate` when the home directory is theirs; only without any of
/// those `$TMPDIR/fluxgate-UID`, where a squatted name is refused by
/// [`create_dir`] and [`open_dir`] rather than used.
pub fn user_dir(uid: u32) -> PathBuf {
    let own = |p: &Path, private: bool| {
        std::fs::symlink_metadata(p).is_ok_and(|m| {
            let open_bits = if private { 0o077 } else { 0o022 };
            m.is_dir() && m.uid() == uid && m.mode() & open_bits == 0
        })
    };
    if uid == nix::unistd::getuid().as_raw()
        && let Some(xdg) = std::env::var_os("XDG_RUNTIME_DIR").map(PathBuf::from)
        && xdg.is_absolute()
        && own(&xdg, true)
    {
        return xdg.join(USER_DIR_NAME);
    }
    let run_user = PathBuf::from(format!("/run/user/{uid}"));
    if own(&run_user, true) {
        return run_user.join(USER_DIR_NAME);
    }
    if uid == 0 && own(Path::new("/run"), false) {
        return Path::new("/run").join(USER_DIR_NAME);
    }
    let home = nix::unistd::User::from_uid(nix::unistd::Uid::from_raw(uid))
        .ok()
        .flatten()
        .map(|u| u.dir)
        .filter(|h| h.is_absolute() && h != Path::new("/") && own(h, false));
    if let Some(home) = home {
        return home.join(format!(".{USER_DIR_NAME}"));
    }
    std::env::temp_dir().join(format!("{USER_DIR_NAME}-{uid}"))
}

/// The name under which [`user_dir`] keeps a directory's files.
const USER_DIR_NAME: &str = "fluxgate";

/// The file name of the owner's token of the instance serving at `uri`: one
/// file per address, named after it.
pub fn instance_token_name(uri: &str) -> String {
    let name: String = uri
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect();
    format!("{name}.token")
}

/// Where the owner's token of the instance serving at `uri` is kept in
/// `uid`'s [`user_dir`].
pub fn instance_token_path(uid: u32, uri: &str) -> PathBuf {
    user_dir(uid).join(instance_token_name(uri))
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
        assert!(p.ends_with("http___127_0_0_1_4000.token"), "{p:?}");
        assert_ne!(p, instance_token_path(1001, "http://127.0.0.1:4001"));
        assert_ne!(p, instance_token_path(1002, "http://127.0.0.1:4000"));
    }

    #[test]
    fn a_link_in_place_of_the_directory_is_refused_and_its_target_untouched() {
        let top = tempfile::tempdir().unwrap();
        let target = top.path().join("target");
        std::fs::create_dir(&target).unwrap();
        std::fs::set_permissions(&target, std::fs::Permissions::from_mode(0o755)).unwrap();
        let link = top.path().join("fluxgate-0");
        std::os::unix::fs::symlink(&target, &link).unwrap();
        let e = create_dir(&link).unwrap_err();
        assert!(matches!(e, PrivateError::Symlink { .. }), "{e}");
        assert!(e.to_string().contains("symbolic link"), "{e}");
        assert_eq!(mode(&target), 0o755, "the link's target was changed");
        let me = nix::unistd::geteuid().as_raw();
        assert!(matches!(
            open_dir(&link, me),
            Err(PrivateError::Symlink { .. })
        ));
        assert_eq!(std::fs::read_dir(&target).unwrap().count(), 0);
    }

    #[test]
    fn files_are_made_through_the_directory_descriptor() {
        let top = tempfile::tempdir().unwrap();
        let path = top.path().join("d");
        let dir = create_dir(&path).unwrap();
        // The path now names another directory: the files still go where
        // the descriptor points.
        std::fs::rename(&path, top.path().join("moved")).unwrap();
        std::fs::create_dir(&path).unwrap();
        let written = dir.write_file("t.token", b"secret").unwrap();
        assert_eq!(written, path.join("t.token"));
        assert!(!path.join("t.token").exists());
        let kept = top.path().join("moved/t.token");
        assert_eq!(mode(&kept), 0o600);
        assert_eq!(dir.read_file("t.token").unwrap(), "secret");
        dir.remove_file("t.token");
        assert!(!kept.exists());
        // A link planted inside is not read through.
        std::os::unix::fs::symlink("/etc/hostname", top.path().join("moved/x")).unwrap();
        assert!(dir.read_file("x").is_err());
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
        // Never a silent pass: only root can make a directory owned by
        // another user, and the suite runs as root (as CI does).
        assert!(
            nix::unistd::geteuid().is_root(),
            "this test needs root: run the suite as root, as CI does"
        );
        let top = tempfile::tempdir().unwrap();
        let dir = top.path().join("theirs");
        std::fs::create_dir(&dir).unwrap();
        let nobody = nix::unistd::Uid::from_raw(65534);
        nix::unistd::chown(&dir, Some(nobody), None).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let e = create_dir(&dir).unwrap_err();
        assert!(
            matches!(e, PrivateError::NotOurs { owner: 65534, .. }),
            "{e}"
        );
        assert!(e.to_string().contains("uid 65534"), "{e}");
        assert_eq!(mode(&dir), 0o755, "another user's directory was changed");
        assert!(open_dir(&dir, 0).is_err());
    }
}
