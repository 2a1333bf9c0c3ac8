//! A job's temporary directory on a node (flux's `FLUX_JOB_TMPDIR`):
//! `jobtmp-SHELLRANK-ID` under the configured parent, private to the job's
//! owner, holding the files the jobspec carries (RFC 37, `--add-file`,
//! the batch script), removed with everything in it when the job ends here.
//!
//! A service running as root makes it root's and 0700, extracts the files
//! into it and only then gives it and them to the owner: until that last
//! step no one else can enter the directory, so no link planted by a user
//! can redirect a write done with root's rights.

use std::io;
use std::os::fd::{AsFd, OwnedFd};
use std::path::{Path, PathBuf};

use fluxgate_shared::JobId;
use fluxgate_shared::jobspec::{FileKind, JobFile};
use rustix::fs::{AtFlags, Gid, Mode, OFlags, Uid};

use crate::run_as::RunAs;

/// The parent the directories are made in when none is configured: the
/// service's `$TMPDIR`, else `/tmp` (flux's fallback).
pub fn default_parent() -> PathBuf {
    std::env::var_os("TMPDIR")
        .filter(|t| !t.is_empty())
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from("/tmp"))
}

/// The directory of shell rank `shell_rank` of job `id` under `parent`;
/// the id in F58 with flux's `ƒ`, or `f` when the job's environment sets
/// `FLUX_F58_FORCE_ASCII` (as flux's shell reads it).
pub fn path(parent: &Path, shell_rank: u32, id: JobId, ascii: bool) -> PathBuf {
    let id = if ascii {
        id.to_f58_ascii()
    } else {
        id.to_f58()
    };
    parent.join(format!("jobtmp-{shell_rank}-{id}"))
}

/// A job's temporary directory, made; [`JobTmp::remove`] takes it away.
#[derive(Debug)]
pub struct JobTmp {
    path: PathBuf,
}

impl JobTmp {
    /// Make `path` for `owner` (this process's own identity when `None`)
    /// and extract `files` into it; the note to end the job with when it
    /// cannot be.
    pub async fn create(
        path: PathBuf,
        owner: Option<RunAs>,
        files: Vec<JobFile>,
    ) -> Result<JobTmp, String> {
        let shown = path.display().to_string();
        tokio::task::spawn_blocking(move || make(&path, owner.as_ref(), &files).map(|()| path))
            .await
            .map_err(|e| format!("cannot make FLUX_JOB_TMPDIR {shown}: {e}"))?
            .map(|path| JobTmp { path })
    }

    /// Where it is.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Remove it and all the job left in it.
    pub async fn remove(self) {
        let path = self.path;
        let done = tokio::task::spawn_blocking(move || {
            // Symbolic links inside are removed, never followed.
            std::fs::remove_dir_all(&path).map_err(|e| (path, e))
        })
        .await;
        if let Ok(Err((path, e))) = done
            && e.kind() != io::ErrorKind::NotFound
        {
            tracing::warn!(path = %path.display(), error = %e, "cannot remove FLUX_JOB_TMPDIR");
        }
    }
}

fn make(path: &Path, owner: Option<&RunAs>, files: &[JobFile]) -> Result<(), String> {
    let shown = path.display();
    let fail = |what: &str, e: io::Error| format!("cannot {what} FLUX_JOB_TMPDIR {shown}: {e}");
    match rustix::fs::mkdir(path, Mode::from_raw_mode(0o700)) {
        Ok(()) => {}
        Err(rustix::io::Errno::EXIST) => {
            // Left by an earlier run of this job here (a service that was
            // killed): taken back only when it is a directory of ours or the
            // owner's, never through a link.
            let meta = std::fs::symlink_metadata(path).map_err(|e| fail("inspect", e))?;
            use std::os::unix::fs::MetadataExt;
            let ours = rustix::process::geteuid().as_raw();
            let theirs = owner.map_or(ours, |o| o.uid);
            if !meta.is_dir() || (meta.uid() != ours && meta.uid() != theirs) {
                return Err(format!(
                    "cannot make FLUX_JOB_TMPDIR {shown}: it exists and is not the job's"
                ));
            }
            std::fs::remove_dir_all(path).map_err(|e| fail("clear", e))?;
            rustix::fs::mkdir(path, Mode::from_raw_mode(0o700))
                .map_err(|e| fail("make", e.into()))?;
        }
        Err(e) => return Err(fail("make", e.into())),
    }
    fill(path, owner, files).inspect_err(|_| {
        let _ = std::fs::remove_dir_all(path);
    })
}

/// Extract `files` into the directory just made at `path`, then give it all
/// to `owner`.
fn fill(path: &Path, owner: Option<&RunAs>, files: &[JobFile]) -> Result<(), String> {
    let shown = path.display();
    let fail = |what: &str, e: io::Error| format!("cannot {what} FLUX_JOB_TMPDIR {shown}: {e}");
    let dir = rustix::fs::open(
        path,
        OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
        Mode::empty(),
    )
    .map_err(|e| fail("open", e.into()))?;
    let mut made = Vec::with_capacity(files.len());
    for f in files {
        extract(&dir, f, &mut made).map_err(|e| {
            format!(
                "cannot extract {} into FLUX_JOB_TMPDIR {shown}: {e}",
                f.name
            )
        })?;
    }
    if let Some(o) = owner {
        let (uid, gid) = (Uid::from_raw(o.uid), Gid::from_raw(o.gid));
        for name in &made {
            rustix::fs::chownat(&dir, name, Some(uid), Some(gid), AtFlags::SYMLINK_NOFOLLOW)
                .map_err(|e| fail("give the job", e.into()))?;
        }
        // Last: from here on the owner may enter.
        rustix::fs::fchown(&dir, Some(uid), Some(gid))
            .map_err(|e| fail("give the job", e.into()))?;
    }
    Ok(())
}

/// Write one file under `dir`, its parent directories first; what was made
/// is added to `made` (parents before children) to be given to the owner.
fn extract(dir: &OwnedFd, f: &JobFile, made: &mut Vec<String>) -> io::Result<()> {
    let parts: Vec<&str> = f
        .name
        .split('/')
        .filter(|p| !p.is_empty() && *p != ".")
        .collect();
    let Some((leaf, parents)) = parts.split_last() else {
        return Ok(());
    };
    let mut at = String::new();
    for p in parents {
        if !at.is_empty() {
            at.push('/');
        }
        at.push_str(p);
        match rustix::fs::mkdirat(dir, at.as_str(), Mode::from_raw_mode(0o755)) {
            Ok(()) => made.push(at.clone()),
            Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        }
    }
    let name = if at.is_empty() {
        leaf.to_string()
    } else {
        format!("{at}/{leaf}")
    };
    // Parents were made here, never followed through a link: refuse one.
    if !parents.is_empty() {
        let parent = rustix::fs::openat(
            dir,
            at.as_str(),
            OFlags::DIRECTORY | OFlags::NOFOLLOW | OFlags::RDONLY | OFlags::CLOEXEC,
            Mode::empty(),
        )?;
        drop(parent);
    }
    let mode = Mode::from_raw_mode(f.perms);
    match &f.kind {
        FileKind::Directory => match rustix::fs::mkdirat(dir, name.as_str(), mode) {
            Ok(()) | Err(rustix::io::Errno::EXIST) => {}
            Err(e) => return Err(e.into()),
        },
        FileKind::Symlink(target) => rustix::fs::symlinkat(target.as_str(), dir, name.as_str())?,
        FileKind::Regular(data) => {
            let fd = rustix::fs::openat(
                dir,
                name.as_str(),
                OFlags::CREATE | OFlags::EXCL | OFlags::WRONLY | OFlags::NOFOLLOW | OFlags::CLOEXEC,
                mode,
            )?;
            let mut file = std::fs::File::from(fd);
            io::Write::write_all(&mut file, data)?;
            // The mode as given, whatever this process's umask.
            rustix::fs::fchmod(file.as_fd(), mode)?;
        }
    }
    made.push(name);
    Ok(())
}

#[cfg(test)]
mod tests {
    use std::os::unix::fs::PermissionsExt;

    use super::*;

    fn file(name: &str, perms: u32, kind: FileKind) -> JobFile {
        JobFile {
            name: name.into(),
            perms,
            kind,
        }
    }

    #[tokio::test]
    async fn files_are_extracted_with_their_modes_and_removed_with_the_directory() {
        let parent = tempfile::tempdir().unwrap();
        let p = path(parent.path(), 1, JobId::from(42u64), false);
        assert!(p.ends_with(format!("jobtmp-1-{}", JobId::from(42u64).to_f58())));
        let files = vec![
            file("script", 0o700, FileKind::Regular(b"#!/bin/sh\n".to_vec())),
            file("a/b/data", 0o640, FileKind::Regular(vec![0, 1])),
            file("link", 0o777, FileKind::Symlink("script".into())),
            file("empty", 0o750, FileKind::Directory),
        ];
        let tmp = JobTmp::create(p.clone(), None, files).await.unwrap();
        assert_eq!(tmp.path(), p);
        let mode = |n: &str| std::fs::metadata(p.join(n)).unwrap().permissions().mode() & 0o7777;
        assert_eq!(mode(""), 0o700);
        assert_eq!(std::fs::read(p.join("script")).unwrap(), b"#!/bin/sh\n");
        assert_eq!(mode("script"), 0o700);
        assert_eq!(std::fs::read(p.join("a/b/data")).unwrap(), vec![0, 1]);
        assert_eq!(mode("a/b/data"), 0o640);
        assert_eq!(
            std::fs::read_link(p.join("link")).unwrap(),
            Path::new("script")
        );
        assert_eq!(mode("empty"), 0o750);
        tmp.remove().await;
        assert!(!p.exists());
    }

    #[tokio::test]
    async fn a_leftover_directory_is_taken_back_but_a_link_is_not() {
        let parent = tempfile::tempdir().unwrap();
        let p = path(parent.path(), 0, JobId::from(7u64), true);
        assert!(p.ends_with("jobtmp-0-f8"));
        std::fs::create_dir(&p).unwrap();
        std::fs::write(p.join("old"), "x").unwrap();
        let tmp = JobTmp::create(p.clone(), None, Vec::new()).await.unwrap();
        assert!(!p.join("old").exists());
        tmp.remove().await;

        let elsewhere = tempfile::tempdir().unwrap();
        std::os::unix::fs::symlink(elsewhere.path(), &p).unwrap();
        let e = JobTmp::create(p.clone(), None, Vec::new())
            .await
            .unwrap_err();
        assert!(e.contains("exists and is not the job's"), "{e}");
        assert!(elsewhere.path().exists());
    }

    #[tokio::test]
    async fn a_file_that_cannot_be_written_names_itself() {
        let parent = tempfile::tempdir().unwrap();
        let p = path(parent.path(), 0, JobId::from(8u64), false);
        let files = vec![
            file("x", 0o644, FileKind::Regular(vec![])),
            file("x/y", 0o644, FileKind::Regular(vec![])),
        ];
        let e = JobTmp::create(p, None, files).await.unwrap_err();
        assert!(e.contains("cannot extract x/y into FLUX_JOB_TMPDIR"), "{e}");
    }
}
