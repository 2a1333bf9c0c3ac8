//! `fluxgate submit --dry-run` prints the jobspec it would send, and sends
//! nothing (no instance is needed).

use std::process::Command;

fn dry_run(args: &[&str]) -> Vec<serde_json::Value> {
    let out = Command::new(env!("CARGO_BIN_EXE_fluxgate"))
        .arg("submit")
        .arg("--dry-run")
        .args(args)
        .env_remove("FLUXGATE_URI")
        .output()
        .expect("run fluxgate");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).expect("one JSON jobspec per line"))
        .collect()
}

#[test]
fn the_jobspec_is_printed_not_submitted() {
    let specs = dry_run(&[
        "-N2",
        "-n4",
        "-t",
        "10m",
        "--job-name",
        "dry",
        "hostname",
        "-s",
    ]);
    assert_eq!(specs.len(), 1);
    let spec = &specs[0];
    assert_eq!(spec["version"], 1);
    assert_eq!(
        spec["tasks"][0]["command"],
        serde_json::json!(["hostname", "-s"])
    );
    assert_eq!(spec["resources"][0]["type"], "node");
    assert_eq!(spec["resources"][0]["count"], 2);
    assert_eq!(spec["attributes"]["system"]["duration"], 600.0);
    assert_eq!(spec["attributes"]["system"]["job"]["name"], "dry");
}

#[test]
fn each_copy_is_printed_with_its_substitution() {
    let specs = dry_run(&["--cc", "1-3", "echo", "{cc}"]);
    let args: Vec<_> = specs
        .iter()
        .map(|s| s["tasks"][0]["command"][1].clone())
        .collect();
    assert_eq!(args, ["1", "2", "3"]);
}
