//! Accounts for tests that need a user who is not root: a real account
//! made with `useradd` for one test, and the check that the suite runs as
//! root (as CI does) for the tests that need one.

use std::process::{Command, Stdio};

/// Fail the test, saying what needed root, unless it runs as root; the
/// suite runs as root in CI, so these tests run rather than pass unrun.
pub fn require_root(what: &str) {
    assert!(
        nix::unistd::geteuid().is_root(),
        "{what} needs root: run the suite as root, as CI does"
    );
}

/// A real unprivileged account made for one test with `useradd`, removed
/// with `userdel` when dropped, so attacks run as a user who is not root.
#[derive(Debug)]
pub struct GuestUser {
    /// Its login name (unique per test process and tag).
    pub name: String,
    /// Its uid.
    pub uid: u32,
}

impl GuestUser {
    /// A new account `fg<tag><pid>`; the test fails when not run as root.
    pub fn create(tag: &str) -> GuestUser {
        require_root("creating a guest account");
        let name = format!("fg{tag}{}", std::process::id());
        let _ = Command::new("userdel").arg("-r").arg(&name).output();
        let out = Command::new("useradd")
            .args(["-M", "-N", "-s", "/bin/sh"])
            .arg(&name)
            .output()
            .expect("run useradd");
        assert!(
            out.status.success(),
            "useradd {name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let uid = nix::unistd::User::from_name(&name)
            .expect("passwd")
            .expect("the new account exists")
            .uid
            .as_raw();
        GuestUser { name, uid }
    }

    /// `sh -c SCRIPT` run as this user (runuser), with `env` set.
    pub fn shell(&self, script: &str, env: &[(&str, &str)]) -> std::process::Output {
        let mut cmd = Command::new("runuser");
        cmd.args(["-u", &self.name, "--", "sh", "-c", script])
            .env_remove("FLUXGATE_TOKEN")
            .current_dir("/")
            .stdin(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        cmd.output().expect("run runuser")
    }
}

impl Drop for GuestUser {
    fn drop(&mut self) {
        // The test waited for the account's processes; should one linger,
        // the account goes anyway (-f) rather than outlive the test.
        let removed = Command::new("userdel")
            .arg(&self.name)
            .status()
            .is_ok_and(|s| s.success());
        if !removed {
            let _ = Command::new("userdel").arg("-f").arg(&self.name).status();
        }
    }
}
