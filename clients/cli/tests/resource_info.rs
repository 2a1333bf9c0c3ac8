//! `fluxgate resource info` on a 2-node instance: flux's one-line summary,
//! and how the nodes contain jobs.

mod common;

use common::{in_instance, text};

#[test]
fn one_line_of_nodes_cores_and_gpus() {
    let out = in_instance(
        r#"$F resource info; $F resource info -s free; $F resource info -s down
           $F resource info -s bogus; echo "bad=$?""#,
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    // After flux's line, how the selected nodes contain jobs (none selected
    // when down).
    let (contained, lines): (Vec<&str>, Vec<&str>) =
        stdout.lines().partition(|l| l.starts_with("Containment: "));
    assert_eq!(contained.len(), 2, "{stdout} {stderr}");
    let mode = contained[0].split(' ').nth(1).unwrap_or_default();
    assert!(["v1", "v2", "off"].contains(&mode), "{stdout}");
    assert_eq!(lines.len(), 4, "{stdout} {stderr}");
    let words: Vec<&str> = lines[0].split(' ').collect();
    assert_eq!(words.len(), 6, "{stdout}");
    assert_eq!(
        [words[0], words[1], words[3], words[4], words[5]],
        ["2", "Nodes,", "Cores,", "0", "GPUs"],
        "{stdout}"
    );
    assert!(words[2].parse::<u32>().unwrap() >= 2, "{stdout}");
    assert_eq!(lines[1], lines[0], "nothing runs, so all is free");
    assert_eq!(lines[2], "0 Nodes, 0 Cores, 0 GPUs");
    assert_eq!(lines[3], "bad=1");
}
