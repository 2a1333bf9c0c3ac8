//! `fluxgate job submit` against a real instance (`fluxgate start --size 2`;
//! the job manager and exec binaries must sit beside the CLI binary), as
//! flux-core t2201-job-cmd.t drives `flux job submit`.

mod common;

use common::{in_instance, text};

#[test]
fn a_dry_run_jobspec_submits_from_a_file_and_from_stdin() {
    let out = in_instance(
        r#"d=$(mktemp -d); $F submit --dry-run sh -c 'exit 3' > $d/spec.json
           a=$($F job submit --flags=waitable $d/spec.json) || exit 90
           b=$($F job submit --urgency=hold - < $d/spec.json) || exit 91
           $F job wait $a; echo "wait=$?"
           $F job eventlog $b | grep -c priority; echo "held"
           $F cancel $b
           echo notjson > $d/bad; $F job submit $d/bad; echo "bad=$?"
           rm -r $d"#,
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    assert!(out.status.success(), "{stdout} {stderr}");
    assert!(stdout.contains("wait=1"), "{stdout} {stderr}");
    assert!(stdout.contains("held"), "{stdout} {stderr}");
    assert!(stdout.contains("bad=1"), "{stdout} {stderr}");
    assert!(stderr.contains("neither JSON nor"), "{stderr}");
}
