//! `fluxgate pstree` on a 2-node instance: jobs and the jobs of an instance
//! inside a batch job, drawn as flux-pstree(1) draws them.

mod common;

use common::{in_instance, text};

#[test]
fn jobs_and_nested_instances_as_a_tree() {
    let out = in_instance(
        r#"d=$(mktemp -d)
           printf '#!/bin/sh\n$F submit --job-name=inner sleep 30 >/dev/null\nsleep 30\n' > $d/b.sh
           b=$($F batch --job-name=outer $d/b.sh)
           s=$($F submit --job-name=single sleep 30)
           $F run --job-name=done true
           $F job wait-event -q $s start
           for i in $(seq 1 200); do $F pstree | grep -q inner && break; sleep 0.1; done
           echo "== default"; $F pstree
           echo "== all"; $F pstree -a -L0
           echo "== x"; $F pstree -x
           echo "== label"; $F pstree -o '{name}!' --parent-label '[{name}]' -L1
           echo "== pids"; $F pstree -p --skip-root=yes
           echo "== filter"; $F pstree -f completed -L0
           echo "== one"; $F pstree $s
           echo "== format"; $F pstree --detail-format '{name:>8}' -n -L0 --skip-root=no
           echo "== count"; $F pstree -a -c 1 -L0 --skip-root=yes
           echo "== bad"; $F pstree -d nosuch 2>&1 || echo "exit $?"
           $F cancel $b $s; rm -r $d"#,
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    let section = |name: &str| common::section(&stdout, name);
    assert_eq!(
        section("default"),
        [".", "├── outer", "│   └── inner", "└── single"],
        "{stdout} {stderr}"
    );
    assert_eq!(
        section("all"),
        [".", "├── outer:R", "├── single:R", "└── done:CD"],
        "{stdout} {stderr}"
    );
    let x = section("x");
    assert_eq!(x.len(), 4, "{stdout} {stderr}");
    assert_eq!(x[0], "       JOBID USER     ST NTASKS NNODES  RUNTIME");
    assert!(
        x[1].ends_with("  R      1      1") || x[1].contains("  R      1      1 "),
        "{x:?}"
    );
    assert!(x[1].ends_with(" outer"), "{x:?}");
    assert!(x[2].ends_with(" └── inner"), "{x:?}");
    assert!(x[3].ends_with(" single"), "{x:?}");
    // -o labels leaves and, unless --parent-label says otherwise, parents.
    assert_eq!(
        section("label"),
        [".", "├── [outer]", "│   └── inner!", "└── single!"],
        "{stdout} {stderr}"
    );
    // -p puts the id before parents' labels; --skip-root=yes drops the `.`.
    let pids = section("pids");
    assert_eq!(pids.len(), 3, "{pids:?}");
    assert!(
        pids[0].starts_with('ƒ') && pids[0].ends_with(" outer"),
        "{pids:?}"
    );
    assert_eq!(pids[1], "└── inner");
    assert_eq!(pids[2], "single");
    assert_eq!(section("filter"), [".", "└── done"], "{stdout} {stderr}");
    assert_eq!(section("one"), ["single"], "{stdout} {stderr}");
    assert_eq!(
        section("format"),
        ["         .", "   outer ├── outer", "  single └── single"],
        "{stdout} {stderr}"
    );
    assert_eq!(section("count"), ["done:CD"], "{stdout} {stderr}");
    let bad = section("bad");
    assert!(
        bad.iter()
            .any(|l| l.contains("Unknown --details format 'nosuch'")),
        "{bad:?}"
    );
    assert!(bad.iter().any(|l| l == "exit 1"), "{bad:?}");
}
