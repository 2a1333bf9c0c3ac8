//! `fluxgate job id` against the outputs of `flux job id` (flux-core t2201-job-cmd.t
//! and the RFC 19 vectors).

use std::process::{Command, Output};

use fluxgate_integration_tests::output_with_stdin;

/// Run `fluxgate job id ARGS` with `stdin` and a UTF-8 or C locale.
fn job_id(args: &[&str], stdin: Option<&str>, utf8: bool) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fluxgate"));
    cmd.arg("job").arg("id").args(args);
    for var in [
        "LC_ALL",
        "LC_CTYPE",
        "LANG",
        "FLUX_F58_FORCE_ASCII",
        "FLUXGATE_F58_FORCE_ASCII",
    ] {
        cmd.env_remove(var);
    }
    if utf8 {
        cmd.env("LANG", "C.UTF-8");
    }
    output_with_stdin(&mut cmd, stdin.unwrap_or(""))
}

fn ok(args: &[&str]) -> String {
    let out = job_id(args, None, true);
    assert!(out.status.success(), "{args:?}: {out:?}");
    String::from_utf8(out.stdout).unwrap()
}

const MAX_DEC: &str = "18446744073709551615";

#[test]
fn default_is_dec_to_dec() {
    assert_eq!(ok(&["42"]), "42\n");
}

#[test]
fn every_to_value() {
    let cases = [
        ("dec", MAX_DEC),
        ("kvs", "job.ffff.ffff.ffff.ffff"),
        ("hex", "0xffffffffffffffff"),
        ("dothex", "ffff.ffff.ffff.ffff"),
        ("words", "natural-analyze-verbal--natural-analyze-verbal"),
        ("f58", "ƒjpXCZedGfVQ"),
        ("f58plain", "fjpXCZedGfVQ"),
        ("emoji", "🚹💗💧👗😷📷📚"),
    ];
    for (to, want) in cases {
        assert_eq!(ok(&[&format!("--to={to}"), MAX_DEC]), format!("{want}\n"));
        assert_eq!(ok(&["-t", to, MAX_DEC]), format!("{want}\n"));
        // Every output reads back as the same id.
        assert_eq!(ok(&[want]), format!("{MAX_DEC}\n"), "{want}");
    }
    assert_eq!(ok(&["--to=kvs", "0"]), "job.0000.0000.0000.0000\n");
    assert_eq!(
        ok(&["--to=words", "0"]),
        "academy-academy-academy--academy-academy-academy\n"
    );
}

#[test]
fn to_is_case_insensitive() {
    assert_eq!(ok(&["--to=HEX", "42"]), "0x2a\n");
}

#[test]
fn several_ids_one_line_each() {
    assert_eq!(
        ok(&["--to=f58", "1", "0x2a", "job.0000.0000.0000.0001"]),
        "ƒ2\nƒj\nƒ2\n"
    );
}

#[test]
fn f58_prefix_follows_the_locale() {
    let out = job_id(&["--to=f58", "42"], None, false);
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "fj\n");
    let out = job_id(&["--to=f58", "42"], None, true);
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "ƒj\n");
    let out = Command::new(env!("CARGO_BIN_EXE_fluxgate"))
        .args(["job", "id", "--to=f58", "42"])
        .env("LANG", "C.UTF-8")
        .env("FLUX_F58_FORCE_ASCII", "1")
        .output()
        .unwrap();
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "fj\n");
}

#[test]
fn reads_stdin_when_no_ids() {
    let out = job_id(&[], Some("42\n"), true);
    assert!(out.status.success());
    assert_eq!(out.stdout, b"42\n");
    // Spaces around each line are ignored (t2201 "id works with spaces in input").
    let out = job_id(&["--to=hex"], Some("42 \n 42\n\t0x2a"), true);
    assert_eq!(String::from_utf8(out.stdout).unwrap(), "0x2a\n0x2a\n0x2a\n");
}

#[test]
fn no_input_fails_quietly() {
    let out = job_id(&[], Some(""), true);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert!(
        out.stderr.is_empty(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

#[test]
fn bad_ids_fail_with_one_line() {
    for bad in [
        "42plusbad",
        "meep",
        "18446744073709551616",
        "badwords",
        "job.0000.0000",
        "job.0000.0000.0000.000P",
    ] {
        let out = job_id(&[bad], None, true);
        assert_eq!(out.status.code(), Some(1), "{bad}");
        assert!(out.stdout.is_empty());
        assert_eq!(
            String::from_utf8(out.stderr).unwrap(),
            format!("fluxgate-job: {bad}: malformed input\n")
        );
    }
}

#[test]
fn a_negative_number_is_malformed_after_double_dash() {
    let out = job_id(&["--", "-1"], None, true);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(out.stderr, b"fluxgate-job: -1: malformed input\n");
}

#[test]
fn ids_before_a_bad_one_are_printed() {
    let out = job_id(&["1", "bad", "2"], None, true);
    assert_eq!(out.status.code(), Some(1));
    assert_eq!(out.stdout, b"1\n");
    assert_eq!(out.stderr, b"fluxgate-job: bad: malformed input\n");
    // From stdin, the trimmed line is named; an empty line is malformed too.
    let out = job_id(&[], Some("7\n\n8\n"), true);
    assert_eq!(out.stdout, b"7\n");
    assert_eq!(out.stderr, b"fluxgate-job: : malformed input\n");
}

#[test]
fn unknown_to_fails() {
    let out = job_id(&["--to=invalid", "42"], None, true);
    assert_eq!(out.status.code(), Some(1));
    assert!(out.stdout.is_empty());
    assert_eq!(out.stderr, b"fluxgate-job: Unknown to=invalid\n");
}
