//! `fluxgate bulksubmit` as flux-bulksubmit(1): the dry-run lines of its man
//! page without an instance, and real jobs with --wait in one.

mod common;

use std::process::{Command, Stdio};

use common::{in_instance, text};
use fluxgate_integration_tests::output_with_stdin;

/// Run `fluxgate bulksubmit --dry-run ARGS` with `stdin`, no instance.
fn dry_run(args: &[&str], stdin: &str) -> String {
    let mut cmd = Command::new(common::cli());
    cmd.args(["bulksubmit", "--dry-run"])
        .args(args)
        .env("FLUXGATE_URI", "http://127.0.0.1:1");
    let out = output_with_stdin(&mut cmd, stdin);
    assert!(out.status.success(), "{args:?}: {out:?}");
    text(&out.stdout)
}

#[test]
fn dry_run_lines_match_the_man_page() {
    assert_eq!(
        dry_run(&["echo", "{}"], "1\n2\n3\n4\n"),
        "bulksubmit: submit echo 1\nbulksubmit: submit echo 2\n\
         bulksubmit: submit echo 3\nbulksubmit: submit echo 4\n"
    );
    assert_eq!(
        dry_run(
            &["echo", "{1}", "{0}", ":::", "1", "2", ":::", "3", "4"],
            ""
        ),
        "bulksubmit: submit echo 3 1\nbulksubmit: submit echo 4 1\n\
         bulksubmit: submit echo 3 2\nbulksubmit: submit echo 4 2\n"
    );
    assert_eq!(
        dry_run(&["--cc=1-2", "echo", "{}.{cc}", ":::", "a"], ""),
        "bulksubmit: submit echo a.1\nbulksubmit: submit echo a.2\n"
    );
    // Linked inputs, attributes and a separator, as the man page shows them.
    assert_eq!(
        dry_run(
            &["echo", "{0}", "{1}", ":::", "1", "2", ":::+", "3", "4"],
            ""
        ),
        "bulksubmit: submit echo 1 3\nbulksubmit: submit echo 2 4\n"
    );
    assert_eq!(
        dry_run(&["cp", "{0}", "{0./%}.bak", ":::", "d/x.txt"], ""),
        "bulksubmit: submit cp d/x.txt x.bak\n"
    );
    assert_eq!(
        dry_run(&["--sep=none", "echo", "{}"], "a b\nc\n"),
        "bulksubmit: submit echo a\nbulksubmit: submit echo b\n\
         bulksubmit: submit echo c\n"
    );
}

/// Run `fluxgate bulksubmit --dry-run ARGS` expecting it to fail before
/// anything is submitted; its stderr (there is no instance to submit to).
fn dry_run_fails(args: &[&str], path: Option<&std::path::Path>) -> String {
    let mut cmd = Command::new(common::cli());
    cmd.arg("bulksubmit")
        .arg("--dry-run")
        .args(args)
        .env("FLUXGATE_URI", "http://127.0.0.1:1")
        .stdin(Stdio::null());
    if let Some(p) = path {
        cmd.env("PATH", p);
    }
    let out = cmd.output().unwrap();
    assert!(!out.status.success(), "{args:?}: {out:?}");
    assert!(out.stdout.is_empty(), "{args:?}: {out:?}");
    text(&out.stderr)
}

#[test]
fn defined_attributes_as_the_man_page() {
    // The man page's example: the count filled, shown as flux shows it.
    assert_eq!(
        dry_run(
            &[
                "--define=p2=2**int(x)",
                "-n",
                "{.p2}",
                "hostname",
                ":::",
                "0",
                "1",
                "2",
                "3",
                "4"
            ],
            ""
        ),
        "bulksubmit: submit -n1 hostname\nbulksubmit: submit -n2 hostname\n\
         bulksubmit: submit -n4 hostname\nbulksubmit: submit -n8 hostname\n\
         bulksubmit: submit -n16 hostname\n"
    );
    assert_eq!(
        dry_run(
            &["--define=p2=2**int(x)", "-n", "{.p2}", "hostname"],
            "1\n2\n3\n"
        ),
        "bulksubmit: submit -n2 hostname\nbulksubmit: submit -n4 hostname\n\
         bulksubmit: submit -n8 hostname\n"
    );
    // Two definitions together, on two inputs, beside {.%}; code with `==`.
    assert_eq!(
        dry_run(
            &[
                "--define=up=x.upper()",
                "--define=one=x == '1'",
                "cp",
                "{1}",
                "{1.%}.{0.up}",
                "{0.one}",
                ":::",
                "a",
                "1",
                ":::",
                "d/f.txt",
            ],
            ""
        ),
        "bulksubmit: submit cp d/f.txt d/f.A False\n\
         bulksubmit: submit cp d/f.txt d/f.1 True\n"
    );
    // A definition in an option beside {.%}; a later definition wins.
    assert_eq!(
        dry_run(
            &[
                "--define=n=1",
                "--define=n=len(x)",
                "--output={0.%}.{0.n}.log",
                "prog",
                ":::",
                "run.sh",
            ],
            ""
        ),
        "bulksubmit: submit --output=run.6.log prog\n"
    );
    // A list result becomes several arguments; os is at hand, as in flux.
    assert_eq!(
        dry_run(
            &[
                "--define=parts=x.split(':')",
                "--define=b=os.path.basename(x)",
                "ls",
                "{.parts}",
                "{0.b}",
                ":::",
                "/a:/b/c"
            ],
            ""
        ),
        "bulksubmit: submit ls /a /b/c c\n"
    );
}

#[test]
fn define_errors_stop_before_submitting() {
    let err = dry_run_fails(
        &["--define=p2=2**int(x)", "echo", "{.p2}", ":::", "1", "z"],
        None,
    );
    assert!(
        err.contains(
            "--define=p2=2**int(x): failed for input \"z\": ValueError: invalid literal for int()"
        ),
        "{err}"
    );
    let err = dry_run_fails(&["--define=p2=2**", "echo", "{}", ":::", "1"], None);
    assert!(
        err.contains("--define=p2=2**: not a Python expression: SyntaxError"),
        "{err}"
    );
    let err = dry_run_fails(&["--define=p2", "echo", "{}", ":::", "1"], None);
    assert!(err.contains("expected NAME=CODE"), "{err}");
    let err = dry_run_fails(&["--define=2p=x", "echo", "{}", ":::", "1"], None);
    assert!(err.contains("NAME \"2p\" is not an identifier"), "{err}");
    let err = dry_run_fails(&["echo", "{.p2}", ":::", "1"], None);
    assert!(err.contains("unknown replacement field {.p2}"), "{err}");
    let empty = tempfile::tempdir().unwrap();
    let err = dry_run_fails(
        &["--define=p=x", "echo", "{.p}", ":::", "1"],
        Some(empty.path()),
    );
    assert!(err.contains("--define needs python3 on PATH"), "{err}");
}

#[test]
fn submits_every_combination_and_waits() {
    let out = in_instance(
        r#"d=$(mktemp -d); printf '3\n5\n' > $d/codes
           $F bulksubmit --wait --quiet sh -c 'exit {}' :::: $d/codes; echo "rc=$?"
           $F bulksubmit sh -c 'exit 0' ::: a b c | wc -l
           rm -r $d"#,
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines, ["rc=5", "3"], "{stdout} {stderr}");
}

#[test]
fn every_option_flux_fills_is_filled_and_mustache_tags_are_kept() {
    // As flux's Xcmd: the queue, the time limit, list options (shown as
    // Python shows a list), and a mustache tag left for the job shell.
    assert_eq!(
        dry_run(
            &[
                "-q",
                "{}",
                "-t",
                "{0}m",
                "--env=X={}",
                "--setattr=user.tag={}",
                "--output=out.{{id}}.{}",
                "echo",
                "{{id}}",
                ":::",
                "1",
            ],
            ""
        ),
        "bulksubmit: submit -q1 -t1m --env=['X=1'] --setattr=['user.tag=1'] \
         --output=out.{{id}}.1 echo {{id}}\n"
    );
}
