//! User-chosen strings (job names, cancel notes, queue and drain reasons)
//! carrying a terminal escape sequence and a bidi override go through the real
//! CLI into a real instance (`fluxgate start --size 2`; the job manager and
//! exec binaries must sit beside the CLI binary: `cargo build --workspace`).
//! Human output must show them escaped and never emit the raw characters;
//! `--json` output keeps the exact string.

mod common;

use std::process::Command;

use common::{cli, in_instance_with, text};

/// Clears the screen when printed raw.
const CLEAR: &str = "\x1b[2J";
/// RIGHT-TO-LEFT OVERRIDE: reverses the text that follows it on screen.
const RLO: &str = "\u{202e}";

/// The section of `out` between `== NAME ==` and the next marker.
fn section<'a>(out: &'a str, name: &str) -> &'a str {
    let start = format!("== {name} ==\n");
    let Some(i) = out.find(&start) else {
        panic!("no section {name} in:\n{out}");
    };
    let rest = &out[i + start.len()..];
    match rest.find("\n== ") {
        Some(j) => &rest[..=j],
        None => rest,
    }
}

/// Neither the escape character nor the override reached the output.
fn assert_no_raw(what: &str, bytes: &[u8]) {
    assert!(
        !bytes.contains(&0x1b),
        "{what} holds a raw ESC byte: {:?}",
        text(bytes)
    );
    assert!(
        !text(bytes).contains(RLO),
        "{what} holds a raw U+202E: {:?}",
        text(bytes)
    );
}

#[test]
fn hostile_strings_are_escaped_in_human_output() {
    let out = in_instance_with(
        r#"a=$($F submit --job-name="$NAME_A" true)
           b=$($F submit --job-name="$NAME_B" true)
           c=$($F submit sleep 30)
           $F job wait-event -q -t 30 $a clean
           $F job wait-event -q -t 30 $b clean
           $F job wait-event -q -t 30 $c start
           $F cancel -m "$NOTE" $c
           $F job wait-event -q -t 30 $c clean
           echo "== jobs =="; $F jobs -a
           echo "== eventlog =="; $F job eventlog $c
           echo "== attach =="; $F job attach $c 2>&1
           $F queue stop "$REASON"
           echo "== queue =="; $F queue status
           $F queue start
           $F resource drain 1 "$REASON"
           echo "== drain =="; $F resource drain
           $F resource undrain 1
           echo "== json =="; $F jobs -a --json
           echo "== end =="
        "#,
        &[
            ("NAME_A", format!("{CLEAR}{RLO}")),
            ("NAME_B", format!("x{RLO}a")),
            ("NOTE", format!("bye{CLEAR}{RLO}gnp.exe")),
            ("REASON", format!("fan{CLEAR}{RLO}dead")),
        ],
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout}\n{}", text(&out.stderr));
    let human_end = stdout.find("== json ==").expect("json section");
    assert_no_raw("human output", &out.stdout[..human_end]);
    assert_no_raw("standard error", &out.stderr);

    // The NAME column is 10 wide (flux's `{name:<10.10+}`): the escaped form
    // is what is counted and cut.
    let jobs = section(&stdout, "jobs");
    assert!(jobs.contains(r"\x1b[2J\u+"), "{jobs}");
    assert!(jobs.contains(r"x\u{202e}a "), "{jobs}");
    let rows: Vec<&str> = jobs.lines().collect();
    assert_eq!(rows.len(), 4, "{jobs}");
    let st: Vec<&str> = rows[1..]
        .iter()
        .filter_map(|l| l.split_whitespace().nth(3))
        .collect();
    assert_eq!(st, ["CA", "CD", "CD"], "{jobs}");

    let note = r"bye\x1b[2J\u{202e}gnp.exe";
    // Eventlog text shows context values as JSON, as flux does: ESC is
    // escaped by JSON, the override (which JSON leaves alone) by us.
    let eventlog = section(&stdout, "eventlog");
    assert!(
        eventlog.contains(r#"note="bye\u001b[2J\u{202e}gnp.exe""#),
        "{eventlog}"
    );
    let attach = section(&stdout, "attach");
    assert!(attach.contains(note), "{attach}");

    let reason = r"fan\x1b[2J\u{202e}dead";
    let queue = section(&stdout, "queue");
    assert!(
        queue.contains(&format!("Scheduling is stopped: {reason}")),
        "{queue}"
    );
    let drain = section(&stdout, "drain");
    assert!(drain.contains(reason), "{drain}");

    // Machine output keeps the exact names, with ESC escaped by JSON itself.
    let json = section(&stdout, "json");
    assert!(!json.as_bytes().contains(&0x1b), "{json}");
    let v: serde_json::Value = serde_json::from_str(json.trim()).expect("jobs --json");
    let names: Vec<&str> = v["jobs"]
        .as_array()
        .expect("jobs array")
        .iter()
        .filter_map(|j| j["name"].as_str())
        .collect();
    assert!(
        names.contains(&format!("{CLEAR}{RLO}").as_str()),
        "{names:?}"
    );
    assert!(names.contains(&format!("x{RLO}a").as_str()), "{names:?}");
}

#[test]
fn error_echoing_a_name_is_escaped() {
    // The argument is echoed in the error message; it must come back escaped.
    let out = Command::new(cli())
        .args(["jobs", "--user", &format!("nobody{CLEAR}{RLO}x")])
        .env_remove("FLUXGATE_URI")
        .output()
        .expect("run fluxgate jobs");
    assert!(!out.status.success());
    assert_no_raw("standard error", &out.stderr);
    let err = text(&out.stderr);
    assert!(err.contains(r"nobody\x1b[2J\u{202e}x"), "{err}");
}
