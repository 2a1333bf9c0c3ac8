//! `fluxgate hostlist` against flux-hostlist(1)'s own test expectations.

use std::process::{Command, Stdio};

use fluxgate_integration_tests::output_with_stdin;

struct Out {
    stdout: String,
    stderr: String,
    code: i32,
}

fn run(args: &[&str], stdin: Option<&str>) -> Out {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fluxgate"));
    let out = output_with_stdin(cmd.arg("hostlist").args(args), stdin.unwrap_or(""));
    Out {
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
        code: out.status.code().unwrap(),
    }
}

/// Run with arguments and assert exact stdout and success.
fn ok(args: &[&str], expect: &str) {
    let out = run(args, None);
    assert_eq!(out.code, 0, "{args:?}: {}", out.stderr);
    assert_eq!(out.stdout, expect, "{args:?}");
}

fn fails(args: &[&str]) -> Out {
    let out = run(args, None);
    assert_ne!(out.code, 0, "{args:?} should fail");
    assert_eq!(out.stdout, "", "{args:?}");
    out
}

#[test]
fn literal_sources_are_concatenated_in_order() {
    ok(&["foo[1-3]"], "foo[1-3]\n");
    ok(&["host1", "host0", "host5", "host4"], "host[1,0,5,4]\n");
    ok(&["host1", "host1", "host1"], "host[1,1,1]\n");
    ok(&["-c", "foo[1-10]"], "10\n");
    ok(&["-c", ""], "0\n");
    ok(&[""], "");
}

#[test]
fn stdin_is_the_default_source() {
    for input in ["foo1 foo2 foo3", "foo1\nfoo2\nfoo3", "foo1,foo2\nfoo3\n"] {
        let out = run(&[], Some(input));
        assert_eq!(out.stdout, "foo[1-3]\n", "{input:?}");
    }
    let out = run(&["-", "bar"], Some("foo[1-2]\n"));
    assert_eq!(out.stdout, "foo[1-2],bar\n");
    let out = run(&["stdin"], Some("foo[\n"));
    assert_eq!(out.code, 1);
    assert!(
        out.stderr
            .starts_with("fluxgate-hostlist: invalid hostlist \"foo[\""),
        "{}",
        out.stderr
    );
}

/// Run `fluxgate hostlist` with `env` set and a stdin that stays open and
/// empty, as when a script still expects the old default source.
fn run_waiting(env: &[(&str, &str)]) -> Out {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_fluxgate"));
    cmd.arg("hostlist")
        .env_remove("FLUXGATE_HOSTLIST_STDIN_TIMEOUT")
        .env_remove("FLUX_HOSTLIST_STDIN_TIMEOUT")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().unwrap();
    // Held open until the command has ended.
    let pipe = child.stdin.take();
    let out = child.wait_with_output().unwrap();
    drop(pipe);
    Out {
        stdout: String::from_utf8(out.stdout).unwrap(),
        stderr: String::from_utf8(out.stderr).unwrap(),
        code: out.status.code().unwrap(),
    }
}

#[test]
fn stdin_wait_is_bounded_as_in_flux() {
    let out = run_waiting(&[("FLUX_HOSTLIST_STDIN_TIMEOUT", "0.2")]);
    assert_eq!(out.code, 1);
    assert_eq!(out.stdout, "");
    assert_eq!(
        out.stderr,
        "fluxgate-hostlist: timeout after 0.2s waiting for stdin\n"
    );
    // Ours wins over flux's.
    let out = run_waiting(&[
        ("FLUXGATE_HOSTLIST_STDIN_TIMEOUT", "0"),
        ("FLUX_HOSTLIST_STDIN_TIMEOUT", "600"),
    ]);
    assert_eq!(
        out.stderr,
        "fluxgate-hostlist: timeout after 0.0s waiting for stdin\n"
    );
    let out = run_waiting(&[("FLUX_HOSTLIST_STDIN_TIMEOUT", "soon")]);
    assert_eq!(out.code, 1);
    assert!(
        out.stderr.contains("FLUX_HOSTLIST_STDIN_TIMEOUT=\"soon\""),
        "{}",
        out.stderr
    );
    // Input that has ended is read at once, with no wait.
    let out = run(&["-c"], Some(""));
    assert_eq!((out.code, out.stdout.as_str()), (0, "0\n"));
}

#[test]
fn expand_and_delimiter() {
    ok(&["-e", "foo[1-3]"], "foo1 foo2 foo3\n");
    ok(
        &["--expand", "--delimiter=\\n", "foo[1-3]"],
        "foo1\nfoo2\nfoo3\n",
    );
    ok(&["-e", "-d", ",", "foo[1-3]"], "foo1,foo2,foo3\n");
    ok(&["-e", ""], "");
}

#[test]
fn nth() {
    ok(&["--nth=1", "foo[1-10]"], "foo2\n");
    ok(&["--nth=-1", "foo[1-10]"], "foo10\n");
    ok(&["--nth=1,3-4", "foo[1-10]"], "foo[2,4-5]\n");
    ok(&["--nth=-1,3-4", "foo[1-10]"], "foo[7-8,10]\n");
    ok(&["-e", "--nth=1,3-4", "foo[1-10]"], "foo2 foo4 foo5\n");
    fails(&["-n", "10", "foo[1-10]"]);
    let out = fails(&["-n", "1,10", "foo[1-10]"]);
    assert_eq!(out.code, 1);
    assert_eq!(out.stderr.lines().count(), 1);
    fails(&["-n", "x", "foo[1-10]"]);
}

#[test]
fn exclude_by_host_or_index() {
    ok(&["-x", "foo1", "foo[0-10]"], "foo[0,2-10]\n");
    ok(&["-x", "foo[0-9]", "foo[0-10]"], "foo10\n");
    ok(&["-x", "1", "foo[0-10]"], "foo[0,2-10]\n");
    ok(&["-x", "0-9", "foo[0-10]"], "foo10\n");
    ok(&["-x", "foo5", "-n", "5-6", "foo[1-10]"], "foo[7-8]\n");
    ok(&["-x", "foo1", "foo[1,1,2]"], "foo2\n");
    ok(&["-x", "bar", "foo[1-2]"], "foo[1-2]\n");
    // An invalid hostlist is a usage error, as an argparse type error.
    let out = fails(&["-x", "a[", "foo1"]);
    assert_eq!(out.code, 2);
}

#[test]
fn limit_sort_union() {
    ok(&["-L", "2", "foo[1-10]"], "foo[1-2]\n");
    ok(&["-L", "-2", "foo[1-10]"], "foo[9-10]\n");
    ok(&["-L", "20", "foo[1-3]"], "foo[1-3]\n");
    ok(&["-S", "host3", "host2", "host1", "host0"], "host[0-3]\n");
    ok(&["-S", "host2", "host1", "host3", "host1"], "host[1,1-3]\n");
    ok(&["-u", "host2", "host1", "host3", "host1"], "host[1-3]\n");
    ok(&["-u", "host[1-3]", "host2"], "host[1-3]\n");
    ok(
        &["--unique", "host[1-3]", "bar", "baz"],
        "bar,baz,host[1-3]\n",
    );
}

#[test]
fn set_operations() {
    ok(&["-i", "host[1-3]", "host[2-5]"], "host[2-3]\n");
    ok(&["-i", "host[1-3]", "host[2-5]", "host[3-10]"], "host3\n");
    ok(&["-X", "host[1-3]", "host[2-5]"], "host[1,4-5]\n");
    ok(
        &["-X", "host[1-3]", "host[2-5]", "host[3-10]"],
        "host[1,3,6-10]\n",
    );
    ok(
        &["-X", "host[3-10]", "host[1-3]", "host[2-5]"],
        "host[1,3,6-10]\n",
    );
    ok(&["-m", "host[1-10]", "host[2-3]"], "host[1,4-10]\n");
    ok(
        &["-m", "host[1-10]", "host[2-3]", "host[5-10]"],
        "host[1,4]\n",
    );
    ok(&["-m", "host[1-10]", "host[1-20]"], "");
    ok(&["-m", "host[1,1,1]", "host1"], "host[1,1]\n");
    ok(&["-um", "host[1,1,1]", "host1"], "host1\n");
    let out = run(&["-i", "-m", "a", "b"], None);
    assert_eq!(out.code, 2);
}

#[test]
fn quiet() {
    let out = run(&["--quiet", "host[1-10]"], None);
    assert_eq!((out.code, out.stdout.as_str()), (0, ""));
    let out = run(&["-qm", "host[1-10]", "host[1-20]"], None);
    assert_eq!((out.code, out.stdout.as_str()), (1, ""));
    let out = run(&["--quiet", "--intersect", "host1", "host2"], None);
    assert_eq!(out.code, 1);
}

#[test]
fn find() {
    ok(&["-F", "foo[3,1]", "foo[1-10]"], "2 0\n");
    ok(&["--find", "foo10", "foo[1-10]"], "9\n");
    let out = fails(&["-F", "foo[11-12]", "foo[1-10]"]);
    assert_eq!(
        out.stderr,
        "fluxgate-hostlist: hosts 'foo[11-12]' not found\n"
    );
    let out = fails(&["-F", "bar", "foo[1-10]"]);
    assert_eq!(out.stderr, "fluxgate-hostlist: host 'bar' not found\n");
}

#[test]
fn sources_needing_an_instance_fail_clearly() {
    for src in ["instance", "local", "avail", "available"] {
        let out = fails(&[src]);
        assert!(
            out.stderr.contains("needs a running instance"),
            "{}",
            out.stderr
        );
    }
    let out = fails(&["-l"]);
    assert!(out.stderr.contains("'local' needs a running instance"));
    // foo1 reads as a job id (F58), as in flux-core.
    let out = fails(&["foo1"]);
    assert!(out.stderr.contains("job foo1"), "{}", out.stderr);
    ok(&["--fallback", "foo1", "foo2", "foo3"], "foo[1-3]\n");
}

#[test]
fn invalid_hostlist_is_one_line_error() {
    let out = fails(&["foo[1-"]);
    assert_eq!(out.code, 1);
    assert_eq!(out.stderr.lines().count(), 1);
    assert!(
        out.stderr.starts_with("fluxgate-hostlist: "),
        "{}",
        out.stderr
    );
}

#[test]
fn help_lists_sources() {
    let out = run(&["--help"], None);
    assert_eq!(out.code, 0);
    assert!(out.stdout.contains("SOURCES may include"));
}
