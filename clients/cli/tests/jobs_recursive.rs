//! `fluxgate jobs -R`: jobs of instances inside jobs, each listing under its
//! job id path, as flux jobs --recursive prints them.

mod common;

use common::{in_instance, text};

#[test]
fn recursive_listing_under_id_paths() {
    let out = in_instance(
        r#"d=$(mktemp -d)
           printf '#!/bin/sh\n$F submit --job-name=inner sleep 30 >/dev/null\nsleep 30\n' > $d/b.sh
           b=$($F batch -n1 --job-name=outer $d/b.sh); echo "id $b"
           for i in $(seq 1 200); do $F pstree | grep -q inner && break; sleep 0.1; done
           echo "== R"; $F jobs -R -o '{name} {state}'
           echo "== L0"; $F jobs -R -L0 -o '{name}'
           echo "== I"; $F jobs -a -o '{name} {instance.stats.total} {instance.resources.all.nnodes} {instance.resources.allocated.ncores}'
           $F cancel $b; rm -r $d"#,
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    let id = stdout
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("id "))
        .unwrap_or_default()
        .to_string();
    let section = |name: &str| common::section(&stdout, name);
    assert_eq!(
        section("R"),
        [
            "NAME STATE".to_string(),
            "outer RUN".to_string(),
            String::new(),
            format!("{id}:"),
            "NAME STATE".to_string(),
            "inner RUN".to_string()
        ],
        "{stdout} {stderr}"
    );
    assert_eq!(section("L0"), ["NAME", "outer"], "{stdout} {stderr}");
    // The instance inside `outer` runs one job on one core of its one node;
    // a job that runs no instance shows the fields empty.
    let rows = section("I");
    assert_eq!(
        rows.first().map(String::as_str),
        Some("NAME NJOBS NODES USED"),
        "{stdout}"
    );
    assert!(
        rows.contains(&"outer 1 1 1".to_string()),
        "{stdout} {stderr}"
    );
}
