//! `fluxgate job taskmap` on a 2-node instance, as flux job taskmap.

mod common;

use common::{in_instance, text};

#[test]
fn taskmap_of_a_two_node_job() {
    let out = in_instance(
        r#"a=$($F submit -N2 -n4 true); $F job wait-event -q $a clean
           $F job taskmap $a; $F job taskmap --to=raw $a; $F job taskmap --to=pmi $a
           $F job taskmap --to=multiline $a; $F job taskmap --to=hosts $a | wc -l
           h=$($F submit --urgency=hold true); $F job taskmap $h; echo "pending=$?"; $F cancel $h"#,
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            r#"{"version":1,"map":[[0,2,2,1]]}"#,
            "0-1;2-3",
            "(vector,(0,2,2))",
            "0: 0",
            "1: 0",
            "2: 1",
            "3: 1",
            "2",
            "pending=1"
        ],
        "{stdout} {stderr}"
    );
}
