//! `fluxgate token create`: tokens the instance accepts, and clear refusals.

use std::process::{Command, Output};

use fluxgate_shared::auth::TokenRole;
use fluxgate_shared::auth::token::{key_to_text, verify};

const KEY: &[u8] = b"0123456789abcdef0123456789abcdef";

fn token(args: &[&str], statedir: Option<&std::path::Path>) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fluxgate"));
    cmd.args(["token", "create"]).args(args);
    match statedir {
        Some(d) => cmd.env("FLUXGATE_STATEDIR", d),
        None => cmd.env_remove("FLUXGATE_STATEDIR"),
    };
    cmd.output().expect("run fluxgate token create")
}

fn now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

#[test]
fn a_token_names_the_user_and_expires_after_its_ttl() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("instance.key"), key_to_text(KEY)).unwrap();
    let out = token(
        &["--user", "alice", "--uid", "1001", "--ttl", "2h"],
        Some(dir.path()),
    );
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    let claims = verify(&text, KEY, now()).unwrap();
    assert_eq!((claims.user.as_str(), claims.uid), ("alice", 1001));
    assert_eq!(claims.role, TokenRole::User);
    let exp = claims.exp.expect("an expiry");
    assert!(exp >= now() + 7100 && exp <= now() + 7200, "{exp}");
    assert!(verify(&text, KEY, exp).is_err());

    let key = dir.path().join("instance.key");
    let out = Command::new(env!("CARGO_BIN_EXE_fluxgate"))
        .args([
            "token", "create", "--user", "bob", "--uid", "7", "--ttl", "never",
        ])
        .arg("--key")
        .arg(&key)
        .env_remove("FLUXGATE_STATEDIR")
        .output()
        .unwrap();
    let claims = verify(&String::from_utf8(out.stdout).unwrap(), KEY, u64::MAX).unwrap();
    assert_eq!(claims.exp, None);
}

#[test]
fn refusals_say_what_to_do() {
    let err = |out: Output| {
        assert!(!out.status.success());
        String::from_utf8(out.stderr).unwrap()
    };
    let e = err(token(&["--user", "a", "--uid", "1"], None));
    assert!(e.contains("--statedir") && e.contains("--key"), "{e}");
    let dir = tempfile::tempdir().unwrap();
    let e = err(token(&["--user", "a", "--uid", "1"], Some(dir.path())));
    assert!(e.contains("instance.key"), "{e}");
    let e = err(token(
        &["--user", "a", "--uid", "1", "--ttl", "soon"],
        Some(dir.path()),
    ));
    assert!(e.contains("--ttl"), "{e}");
    std::fs::write(dir.path().join("instance.key"), "not a key").unwrap();
    let e = err(token(&["--user", "a", "--uid", "1"], Some(dir.path())));
    assert!(e.contains("hex"), "{e}");
}

#[test]
fn a_node_token_is_the_one_the_job_manager_derives() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("instance.key"), key_to_text(KEY)).unwrap();
    let out = token(&["--node", "--uid", "1000"], Some(dir.path()));
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8(out.stdout).unwrap();
    // Exec services compare the credential byte for byte: it must be the
    // text the job manager signs at start (issued at 0, no expiry).
    let expected = fluxgate_shared::auth::Claims::node(1000, 0)
        .sign(KEY)
        .unwrap();
    assert_eq!(text.trim(), expected);
    let claims = verify(&text, KEY, u64::MAX).unwrap();
    assert_eq!((claims.role, claims.uid), (TokenRole::Node, 1000));
    let again = token(&["--node", "--uid", "1000"], Some(dir.path()));
    assert_eq!(String::from_utf8(again.stdout).unwrap(), text);
}
