//! `fluxgate watch` on a 2-node instance: the output of many jobs, to the
//! end, and the largest exit code, as flux-watch(1).

mod common;

use common::{in_instance, text};

#[test]
fn follows_every_job_to_the_end() {
    let out = in_instance(
        r#"a=$($F submit sh -c 'sleep 0.3; echo one'); b=$($F submit sh -c 'echo two; exit 3')
           $F watch $a $b | sort; echo "rc=$?"
           $F watch $a $b >/dev/null; echo "code=$?"
           $F watch --all | sort | tr '\n' ' '; echo
           $F watch; echo "none=$?""#,
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        ["one", "two", "rc=0", "code=3", "one two ", "none=1"],
        "{stdout} {stderr}"
    );
}
