//! The instance key and the tokens the job manager hands out at start.
//!
//! ```text
//! STATEDIR/instance.key   32 random bytes as hex, 0600; signs every token
//! STATEDIR/owner.token    the instance owner's token (no expiry), 0600
//! STATEDIR/node.token     the node credential exec services present, 0600
//! ```
//!
//! Both tokens are issued at time 0, so they are the same text at every
//! start for as long as the key is: exec services keep working across a job
//! manager restart. Replacing the key invalidates every token.

use std::fmt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use fluxgate_shared::auth::Claims;
use fluxgate_shared::auth::token::{TokenError, key_from_text, key_to_text};

use crate::config::Config;

/// File name of the instance key in the state directory.
pub const KEY_FILE: &str = "instance.key";
/// File name of the owner's token in the state directory.
pub const OWNER_TOKEN_FILE: &str = "owner.token";
/// File name of the node credential in the state directory.
pub const NODE_TOKEN_FILE: &str = "node.token";
/// Bytes of a new instance key.
const KEY_BYTES: usize = 32;

/// The key and the two standing tokens of an instance.
#[derive(Clone)]
pub struct InstanceKeys {
    /// The signing key.
    pub key: Vec<u8>,
    /// The instance owner's token.
    pub owner_token: String,
    /// The node credential.
    pub node_token: String,
}

impl fmt::Debug for InstanceKeys {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // Never the secrets themselves, in logs or panics.
        f.debug_struct("InstanceKeys").finish_non_exhaustive()
    }
}

/// Where the instance key is: `auth.key_file` or the state directory's.
pub fn key_path(config: &Config) -> PathBuf {
    config
        .auth
        .key_file
        .clone()
        .unwrap_or_else(|| config.statedir.join(KEY_FILE))
}

/// Read the instance key (creating it when missing), and write the owner's
/// token and the node credential beside the store.
pub fn load_or_create(config: &Config) -> Result<InstanceKeys, KeyError> {
    let path = key_path(config);
    let key = match std::fs::read_to_string(&path) {
        Ok(text) => {
            warn_if_readable_by_others(&path);
            key_from_text(&text).map_err(|error| KeyError::BadKey {
                path: path.clone(),
                error,
            })?
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            let mut key = vec![0u8; KEY_BYTES];
            getrandom::fill(&mut key).map_err(|e| KeyError::Random(e.to_string()))?;
            write_private(&path, &format!("{}\n", key_to_text(&key)))?;
            tracing::info!(path = %path.display(), "created the instance key");
            key
        }
        Err(error) => return Err(KeyError::Read { path, error }),
    };
    let owner = super::user_name(config.owner_uid);
    let sign = |c: Claims| c.sign(&key).map_err(KeyError::Sign);
    let owner_token = sign(Claims::user(&owner, config.owner_uid, 0, None))?;
    let node_token = sign(Claims::node(config.owner_uid, 0))?;
    write_private(
        &config.statedir.join(OWNER_TOKEN_FILE),
        &format!("{owner_token}\n"),
    )?;
    write_private(
        &config.statedir.join(NODE_TOKEN_FILE),
        &format!("{node_token}\n"),
    )?;
    Ok(InstanceKeys {
        key,
        owner_token,
        node_token,
    })
}

fn warn_if_readable_by_others(path: &Path) {
    if let Ok(meta) = std::fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(
            path = %path.display(),
            "the instance key is readable by other users: anyone who can read it can \
             make tokens for any user; chmod 600 it"
        );
    }
}

/// Write `text` to `path` readable by its owner only, replacing it whole.
fn write_private(path: &Path, text: &str) -> Result<(), KeyError> {
    Ok(fluxgate_os::private::write_file(path, text.as_bytes())?)
}

/// Why the instance key or the tokens beside it cannot be had.
#[derive(Debug, thiserror::Error)]
pub enum KeyError {
    /// The key file exists but cannot be read.
    #[error("cannot read instance key {}: {error}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        error: std::io::Error,
    },
    /// The key file does not hold a key.
    #[error("instance key {}: {error}", path.display())]
    BadKey {
        path: PathBuf,
        #[source]
        error: TokenError,
    },
    /// The system gave no random bytes.
    #[error("cannot draw random bytes for the instance key: {0}")]
    Random(String),
    /// A token could not be made.
    #[error("cannot sign a token: {0}")]
    Sign(#[source] TokenError),
    /// A file cannot be written (the error names it).
    #[error(transparent)]
    Write(#[from] fluxgate_os::private::PrivateError),
}

#[cfg(test)]
mod tests {
    use super::*;
    use fluxgate_shared::auth::TokenRole;
    use fluxgate_shared::auth::token::verify;

    #[test]
    fn the_key_is_made_once_and_the_tokens_are_stable() {
        let dir = tempfile::tempdir().unwrap();
        let config = Config {
            statedir: dir.path().to_path_buf(),
            owner_uid: 4242,
            ..Config::default()
        };
        let first = load_or_create(&config).unwrap();
        let mode = std::fs::metadata(dir.path().join(KEY_FILE))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        let second = load_or_create(&config).unwrap();
        assert_eq!(first.key, second.key);
        assert_eq!(first.node_token, second.node_token);
        let owner = verify(&first.owner_token, &first.key, 1).unwrap();
        assert_eq!((owner.uid, owner.role), (4242, TokenRole::User));
        let node = verify(&first.node_token, &first.key, 1).unwrap();
        assert_eq!(node.role, TokenRole::Node);
        let on_disk = std::fs::read_to_string(dir.path().join(OWNER_TOKEN_FILE)).unwrap();
        assert_eq!(on_disk.trim(), first.owner_token);
    }

    #[test]
    fn a_bad_key_file_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(KEY_FILE), "not hex").unwrap();
        let config = Config {
            statedir: dir.path().to_path_buf(),
            ..Config::default()
        };
        let e = load_or_create(&config).unwrap_err().to_string();
        assert!(e.contains("instance.key") && e.contains("hex"), "{e}");
    }
}
