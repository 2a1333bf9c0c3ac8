//! `fluxgate bulksubmit` as flux-bulksubmit(1): the dry-run lines of its man
//! page without an instance, and real jobs with --wait in one.

mod common;

use std::io::Write;
use std::process::{Command, Stdio};

use common::{in_instance, text};

/// Run `fluxgate bulksubmit --dry-run ARGS` with `stdin`, no instance.
fn dry_run(args: &[&str], stdin: &str) -> String {
    let mut child = Command::new(common::cli())
        .arg("bulksubmit")
        .arg("--dry-run")
        .args(args)
        .env("FLUXGATE_URI", "http://127.0.0.1:1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut pipe = child.stdin.take().unwrap();
    pipe.write_all(stdin.as_bytes()).unwrap();
    drop(pipe);
    let out = child.wait_with_output().unwrap();
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
