//! `fluxgate completions` and `fluxgate man`: generated from the clap
//! definitions, so every subcommand appears.

use std::process::Command;

fn fluxgate(args: &[&str]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_fluxgate"))
        .args(args)
        .output()
        .unwrap()
}

#[test]
fn completions_for_each_shell_name_the_subcommands() {
    for (shell, marker) in [
        ("bash", "_fluxgate()"),
        ("zsh", "#compdef fluxgate"),
        ("fish", "complete -c fluxgate"),
    ] {
        let out = fluxgate(&["completions", shell]);
        assert!(out.status.success(), "{shell}: {out:?}");
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains(marker), "{shell}");
        for sub in ["bulksubmit", "submit", "jobs"] {
            assert!(text.contains(sub), "{shell} lacks {sub}");
        }
    }
    assert!(!fluxgate(&["completions", "nosuchshell"]).status.success());
}

#[test]
fn man_pages_for_the_command_and_its_subcommands() {
    let dir = tempfile::tempdir().unwrap();
    let out = fluxgate(&["man", dir.path().to_str().unwrap()]);
    assert!(out.status.success(), "{out:?}");
    let top = std::fs::read_to_string(dir.path().join("fluxgate.1")).unwrap();
    assert!(top.contains(".TH fluxgate 1"), "{top}");
    let page = std::fs::read_to_string(dir.path().join("fluxgate-job-submit.1")).unwrap();
    assert!(page.contains("urgency"), "{page}");
}
