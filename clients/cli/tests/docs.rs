//! Completions and man pages come from the command definitions: every
//! command is in them.

use std::process::Command;

fn fluxgate(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_fluxgate"))
        .args(args)
        .output()
        .expect("run fluxgate")
}

#[test]
fn completions_name_the_commands_for_each_shell() {
    for (shell, marker) in [
        ("bash", "_fluxgate()"),
        ("zsh", "#compdef fluxgate"),
        ("fish", "complete -c fluxgate"),
    ] {
        let out = fluxgate(&["completions", shell]);
        assert!(out.status.success(), "{shell}");
        let text = String::from_utf8(out.stdout).unwrap();
        assert!(text.contains(marker), "{shell}: {marker}");
        for cmd in ["submit", "jobs", "resource", "completions"] {
            assert!(text.contains(cmd), "{shell}: {cmd}");
        }
    }
    let bad = fluxgate(&["completions", "tcsh"]);
    assert!(!bad.status.success());
}

#[test]
fn man_pages_are_written_for_every_visible_command() {
    let dir = tempfile::tempdir().unwrap();
    let out = fluxgate(&["man", dir.path().to_str().unwrap()]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    for page in [
        "fluxgate.1",
        "fluxgate-submit.1",
        "fluxgate-job-eventlog.1",
        "fluxgate-resource-drain.1",
    ] {
        let text = std::fs::read_to_string(dir.path().join(page))
            .unwrap_or_else(|e| panic!("{page}: {e}"));
        assert!(
            text.starts_with(".ie") || text.contains(".TH"),
            "{page} is a man page"
        );
    }
    // Hidden commands (the in-job instance) get none.
    assert!(!dir.path().join("fluxgate-instance.1").exists());
}
