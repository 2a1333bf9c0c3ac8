//! `fluxgate idset`: decode, combine, encode.

use std::process::Command;

use fluxgate_integration_tests::output_with_stdin;

fn run(args: &[&str], stdin: &str) -> (i32, String, String) {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fluxgate"));
    let out = output_with_stdin(cmd.arg("idset").args(args), stdin);
    (
        out.status.code().unwrap(),
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

fn ok(args: &[&str], expect: &str) {
    let (code, stdout, stderr) = run(args, "");
    assert_eq!(code, 0, "{args:?}: {stderr}");
    assert_eq!(stdout, expect, "{args:?}");
}

#[test]
fn encodes_canonically() {
    ok(&["0-3,5"], "0-3,5\n");
    ok(&["[0,1,2,3]"], "0-3\n");
    ok(&["2,3"], "2-3\n");
    ok(&["-e", "0-3,5"], "0,1,2,3,5\n");
    ok(&["-b", "0-3,5"], "[0-3,5]\n");
    ok(&["-b", "7"], "7\n");
    ok(&["-e", "-b", "1-3"], "[1,2,3]\n");
    ok(&[""], "");
    ok(&["[]"], "");
}

#[test]
fn combines() {
    ok(&["0-3", "7", "2-5"], "0-5,7\n");
    ok(&["-u", "1", "3"], "1,3\n");
    ok(&["-i", "0-10", "5-20", "7-8"], "7-8\n");
    ok(&["--intersect", "0-1", "2-3"], "");
    ok(&["-m", "0-10", "2-3", "5"], "0-1,4,6-10\n");
    ok(&["--minus", "2-4,6-8", "0-100"], "");
}

#[test]
fn count_first_last() {
    ok(&["-c", "0-3", "7"], "5\n");
    ok(&["-c", ""], "0\n");
    ok(&["--first", "3-5,9"], "3\n");
    ok(&["--last", "3-5,9"], "9\n");
    ok(&["--last", "2147483647"], "2147483647\n");
    let (code, stdout, _) = run(&["--first", "-m", "1", "1"], "");
    assert_eq!((code, stdout.as_str()), (1, ""));
    let (code, _, _) = run(&["--first", "--last", "1"], "");
    assert_eq!(code, 2);
}

#[test]
fn reads_stdin_without_arguments() {
    let (code, stdout, _) = run(&[], "1 3\n4-6\t10\n");
    assert_eq!((code, stdout.as_str()), (0, "1,3-6,10\n"));
    let (code, stdout, _) = run(&["-c"], "");
    assert_eq!((code, stdout.as_str()), (0, "0\n"));
}

#[test]
fn bad_argument_is_one_line_error() {
    for bad in ["1-1", "3,2", "2147483648", "x", "[0"] {
        let (code, stdout, stderr) = run(&[bad], "");
        assert_eq!(code, 1, "{bad}");
        assert_eq!(stdout, "");
        assert_eq!(stderr.lines().count(), 1, "{stderr}");
        assert!(
            stderr.starts_with("fluxgate-idset: invalid idset"),
            "{stderr}"
        );
    }
    let (_, _, stderr) = run(&["0", "1-1"], "");
    assert_eq!(
        stderr,
        "fluxgate-idset: invalid idset \"1-1\": range \"1-1\" at position 0: range end must be greater than start\n"
    );
}
