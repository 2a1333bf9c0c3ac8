//! Who may use an instance that runs inside a job: the job's user, and only
//! with a credential, like any instance.
//!
//! The child job manager requires credentials (`auth.enabled`). Its key:
//!
//! ```text
//! with a job credential (FLUXGATE_TOKEN, which the enclosing instance gave
//! every task of the job):  key = HMAC-SHA256(job credential, KEY_LABEL)
//! without one (the enclosing instance runs open): a random key the child
//! job manager makes
//! ```
//!
//! With the derived key every task computes the child's node credential
//! itself, on whatever node it runs, and nothing secret travels: rank 0
//! writes the key to the child's state directory (0600 in 0700) before the
//! child job manager reads it, the other ranks sign the same node token for
//! their exec services. The job credential is known only to the job's tasks
//! (and the enclosing job manager), so no one else can compute the key.
//!
//! The child's owner token goes to the batch script (or alloc's command) as
//! `FLUXGATE_TOKEN`, and rank 0 keeps a copy where only the job's user can
//! read it: `$TMPDIR/fluxgate-UID/<uri>.token` (0600 in 0700, see
//! `fluxgate_os::private::instance_token_path`), written before the `uri`
//! memo is posted and removed at teardown. `fluxgate proxy`, `uri` and
//! `alloc`, run by the same user on that machine (or where that directory is
//! shared), read it there; root may read any user's. Without a job credential
//! rank 0 also keeps the node token there (`<uri>.node`) for the other ranks,
//! which then must share that directory (one machine).

use std::path::{Path, PathBuf};

use anyhow::Context;
use fluxgate_os::private;
use fluxgate_shared::auth::Claims;
use fluxgate_shared::auth::token::{derive_key, key_to_text};

use crate::client;

/// The label the child's key is derived under.
const KEY_LABEL: &str = "fluxgate instance-in-job key v1";

/// What one task of an instance job knows of the child's credentials.
#[derive(Clone)]
pub struct ChildKey {
    /// The derived key; none when the enclosing instance gave no credential.
    key: Option<Vec<u8>>,
    /// The job's user: the child's owner.
    uid: u32,
}

impl std::fmt::Debug for ChildKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the key itself.
        f.debug_struct("ChildKey")
            .field("derived", &self.key.is_some())
            .field("uid", &self.uid)
            .finish()
    }
}

impl ChildKey {
    /// From the job credential in this task's environment, if any.
    pub fn from_env() -> ChildKey {
        let key = std::env::var(client::TOKEN_ENV)
            .ok()
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
            .map(|t| derive_key(t.as_bytes(), KEY_LABEL));
        ChildKey {
            key,
            uid: nix::unistd::getuid().as_raw(),
        }
    }

    /// Rank 0, before the child job manager starts: give it the derived key
    /// (without one it makes a random key of its own).
    pub fn install(&self, statedir: &Path) -> anyhow::Result<()> {
        if let Some(key) = &self.key {
            let path = statedir.join("instance.key");
            private::write_file(&path, format!("{}\n", key_to_text(key)).as_bytes())?;
        }
        Ok(())
    }

    /// The child's node credential, for an exec service of rank > 0 of the
    /// child at `uri`, written to `statedir/node.token`; its path.
    pub fn node_token_file(&self, uri: &str, statedir: &Path) -> anyhow::Result<PathBuf> {
        let token = match &self.key {
            Some(key) => Claims::node(self.uid, 0).sign(key)?,
            None => {
                let path = node_token_path(self.uid, uri);
                let name = path
                    .file_name()
                    .and_then(|n| n.to_str())
                    .unwrap_or_default();
                private::open_dir(&private::user_dir(self.uid), self.uid)
                    .map_err(anyhow::Error::from)
                    .and_then(|dir| Ok(dir.read_file(name)?))
                    .with_context(|| {
                        format!(
                            "the enclosing instance gave this job no credential, so the \
                             instance's node credential is shared through {}, which this \
                             node cannot read",
                            path.display()
                        )
                    })?
                    .trim()
                    .to_string()
            }
        };
        let path = statedir.join("node.token");
        private::write_file(&path, format!("{token}\n").as_bytes())?;
        Ok(path)
    }

    /// A token making its holder the child's owner (for a task's own calls
    /// to the child at `uri`).
    pub fn owner_token(&self, uri: &str) -> anyhow::Result<String> {
        match &self.key {
            Some(key) => Ok(Claims::user("instance", self.uid, 0, None).sign(key)?),
            None => read_owner_token(uri, &[self.uid])
                .with_context(|| format!("no credential for the instance at {uri}")),
        }
    }
}

/// The node token file of the child at `uri` in `uid`'s directory.
fn node_token_path(uid: u32, uri: &str) -> PathBuf {
    private::instance_token_path(uid, uri).with_extension("node")
}

/// Rank 0, before the `uri` memo: keep the child's owner token (and, without
/// a derived key, its node token) where only this user can read them.
/// Returns the files to remove at teardown.
pub fn publish(key: &ChildKey, uri: &str, statedir: &Path) -> anyhow::Result<Vec<PathBuf>> {
    // Made and written through one descriptor: a link or another user's
    // directory in its place is an error, never followed or changed.
    let dir = private::create_dir(&private::user_dir(key.uid))?;
    let mut written = Vec::new();
    let mut copy = |from: &str, to: &Path| -> anyhow::Result<()> {
        let src = statedir.join(from);
        let text = std::fs::read(&src).with_context(|| format!("cannot read {}", src.display()))?;
        let name = to.file_name().and_then(|n| n.to_str()).unwrap_or(from);
        written.push(dir.write_file(name, &text)?);
        Ok(())
    };
    copy("owner.token", &private::instance_token_path(key.uid, uri))?;
    if key.key.is_none() {
        copy("node.token", &node_token_path(key.uid, uri))?;
    }
    Ok(written)
}

/// Remove what [`publish`] wrote.
pub fn unpublish(files: &[PathBuf]) {
    for f in files {
        let _ = std::fs::remove_file(f);
    }
}

/// The owner token of the instance at `uri`, from the directory of the
/// first of `uids` that has it.
pub fn read_owner_token(uri: &str, uids: &[u32]) -> Option<String> {
    uids.iter().find_map(|&uid| {
        // Only from a directory that is really `uid`'s, not through a link.
        private::open_dir(&private::user_dir(uid), uid)
            .ok()?
            .read_file(&private::instance_token_name(uri))
            .ok()
            .map(|t| t.trim().to_string())
            .filter(|t| !t.is_empty())
    })
}

/// Where this user (and, for root, the job's owner `owner`) keeps instance
/// credentials, in the order to look.
pub fn lookup_uids(owner: Option<u32>) -> Vec<u32> {
    let me = nix::unistd::getuid().as_raw();
    let mut uids = vec![me];
    if let Some(o) = owner
        && o != me
        && nix::unistd::geteuid().is_root()
    {
        uids.push(o);
    }
    uids
}

#[cfg(test)]
mod tests {
    use super::*;
    use fluxgate_shared::auth::token::verify;

    #[test]
    fn tasks_with_the_same_job_credential_derive_the_same_node_token() {
        let a = ChildKey {
            key: Some(derive_key(b"fgt1.job", KEY_LABEL)),
            uid: 4321,
        };
        let b = a.clone();
        let dirs = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
        let ta = a.node_token_file("http://x:1", dirs.0.path()).unwrap();
        let tb = b.node_token_file("http://x:1", dirs.1.path()).unwrap();
        assert_eq!(
            std::fs::read_to_string(ta).unwrap(),
            std::fs::read_to_string(tb).unwrap()
        );
        // What the child job manager signs with the installed key.
        a.install(dirs.0.path()).unwrap();
        let text = std::fs::read_to_string(dirs.0.path().join("instance.key")).unwrap();
        let key = fluxgate_shared::auth::token::key_from_text(&text).unwrap();
        let owner = verify(&a.owner_token("http://x:1").unwrap(), &key, 1).unwrap();
        assert_eq!(owner.uid, 4321);
        let other = ChildKey {
            key: Some(derive_key(b"fgt1.other", KEY_LABEL)),
            uid: 4321,
        };
        assert!(verify(&other.owner_token("u").unwrap(), &key, 1).is_err());
    }
}
