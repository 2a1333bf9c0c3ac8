//! `fluxgate pstree` on a 2-node instance: jobs and the jobs of an instance
//! inside a batch job, drawn as flux-pstree(1) draws them, with the
//! `instance.*` details read from that instance.

mod common;

use common::{in_instance, text};

#[test]
fn jobs_and_nested_instances_as_a_tree() {
    let out = in_instance(
        // Piped output is cut at 132 columns unless $COLUMNS says otherwise.
        r#"unset COLUMNS; d=$(mktemp -d)
           printf '#!/bin/sh\n$F submit --job-name=inner sleep 30 >/dev/null\nsleep 30\n' > $d/b.sh
           b=$($F batch -n1 --job-name=outer $d/b.sh)
           $F job wait-event -q $b start
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
           echo "== one filtered"; $F pstree -a $s 2>&1
           echo "== format"; $F pstree --detail-format '{name:>8}' -n -L0 --skip-root=no
           echo "== count"; $F pstree -a -c 1 -L0 --skip-root=yes
           echo "== bad"; $F pstree -d nosuch 2>&1 || echo "exit $?"
           echo "== ascii"; $F pstree --ascii
           echo "== compact"; $F pstree --compact
           echo "== both"; $F pstree --ascii -C 2>/dev/null || echo "exit $?"
           echo "== narrow"; COLUMNS=9 $F pstree
           echo "== long"; COLUMNS=9 $F pstree -l
           echo "== progress"; $F pstree -d progress
           echo "== stats"; $F pstree -d stats
           echo "== resources"; $F pstree --details=resources
           echo "== progress root"; $F pstree -d progress --skip-root=no -L0
           $F cancel $b $s; rm -r $d"#,
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    let section = |name: &str| common::section(&stdout, name);
    assert_eq!(
        section("default"),
        [".", "├── single", "└── outer", "    └── inner"],
        "{stdout} {stderr}"
    );
    // In the job list's order, as flux: running jobs latest started first
    // (single was started after outer), then inactive ones. A job that runs
    // an instance takes the parent label ({name}, even with -a), also when
    // -L0 keeps its jobs out.
    assert_eq!(
        section("all"),
        [".", "├── single:R", "├── outer", "└── done:CD"],
        "{stdout} {stderr}"
    );
    let x = section("x");
    assert_eq!(x.len(), 4, "{stdout} {stderr}");
    assert_eq!(x[0], "       JOBID USER     ST NTASKS NNODES  RUNTIME");
    assert!(
        x[1].ends_with("  R      1      1") || x[1].contains("  R      1      1 "),
        "{x:?}"
    );
    assert!(x[1].ends_with(" single"), "{x:?}");
    assert!(x[2].ends_with(" outer"), "{x:?}");
    assert!(x[3].ends_with(" └── inner"), "{x:?}");
    // -o labels leaves and, unless --parent-label says otherwise, parents,
    // the enclosing instance `.` among them.
    assert_eq!(
        section("label"),
        ["[.]", "├── single!", "└── [outer]", "    └── inner!"],
        "{stdout} {stderr}"
    );
    // -p puts the id before parents' labels; --skip-root=yes drops the `.`.
    let pids = section("pids");
    assert_eq!(pids.len(), 3, "{pids:?}");
    assert_eq!(pids[0], "single");
    assert!(
        pids[1].starts_with('ƒ') && pids[1].ends_with(" outer"),
        "{pids:?}"
    );
    assert_eq!(pids[2], "└── inner");
    assert_eq!(section("filter"), [".", "└── done"], "{stdout} {stderr}");
    assert_eq!(section("one"), ["single"], "{stdout} {stderr}");
    assert_eq!(
        section("one filtered"),
        [
            "fluxgate-pstree: WARNING: filtering options ignored with jobid list",
            "single:R"
        ],
        "{stdout} {stderr}"
    );
    assert_eq!(
        section("format"),
        ["       . .", "  single ├── single", "   outer └── outer"],
        "{stdout} {stderr}"
    );
    // With the root skipped its level lists running jobs only, whatever the
    // filter (flux-pstree applies -a/-f below the root then); -c 1 keeps the
    // latest started.
    assert_eq!(section("count"), ["single:R"], "{stdout} {stderr}");
    let bad = section("bad");
    assert!(
        bad.iter()
            .any(|l| l.contains("Unknown --details format 'nosuch'")),
        "{bad:?}"
    );
    assert!(bad.iter().any(|l| l == "exit 1"), "{bad:?}");
    assert_eq!(
        section("ascii"),
        [".", "|-- single", "`-- outer", "    `-- inner"],
        "{stdout} {stderr}"
    );
    assert_eq!(
        section("compact"),
        [".", "├─single", "└─outer", "  └─inner"],
        "{stdout} {stderr}"
    );
    assert_eq!(section("both"), ["exit 2"], "{stdout} {stderr}");
    // Lines longer than $COLUMNS end in `+`; -l keeps them whole.
    assert_eq!(
        section("narrow"),
        [".", "├── sing+", "└── outer", "    └── +"],
        "{stdout} {stderr}"
    );
    assert_eq!(
        section("long"),
        [".", "├── single", "└── outer", "    └── inner"],
        "{stdout} {stderr}"
    );
    // The batch job's instance has one node and one core, and runs inner;
    // jobs that run no instance leave the instance columns empty.
    let runtime = 45..55;
    assert_eq!(
        masked(&section("progress"), runtime.clone()),
        [
            "       JOBID NTASKS  NJOBS  PROG CORE%  GPU%    RUNTIME",
            "          ID      1                             0:00:SS single",
            "          ID      1      1    0%  100%          0:00:SS outer",
            "          ID      1                             0:00:SS └── inner",
        ],
        "{stdout} {stderr}"
    );
    assert_eq!(
        masked(&section("stats"), 39..49),
        [
            "       JOBID           STATS              RUNTIME",
            "          ID                              0:00:SS single",
            "          ID     PD:0 R:1 CD:0 F:0        0:00:SS outer",
            "          ID                              0:00:SS └── inner",
        ],
        "{stdout} {stderr}"
    );
    assert_eq!(
        masked(&section("resources"), 0..0),
        [
            "       JOBID NODES  USED CORES  USED  GPUS  USED",
            "          ID                                     single",
            "          ID     1     1     1     1     0     0 outer",
            "          ID                                     └── inner",
        ],
        "{stdout} {stderr}"
    );
    // The enclosing instance as `.`: its 2 nodes, and its 3 jobs (outer,
    // single, done), one of them finished. Its core use depends on how many
    // cores the host gives each node, so the line is checked up to there.
    let root = section("progress root");
    assert_eq!(root.len(), 4, "{root:?}");
    assert!(
        root[1].starts_with("           .      2      3 33.3% ") && root[1].ends_with(" ."),
        "{root:?}"
    );
    assert_eq!(
        masked(&root[2..], runtime),
        [
            "          ID      1                             0:00:SS ├── single",
            "          ID      1      1    0%  100%          0:00:SS └── outer",
        ],
        "{stdout} {stderr}"
    );
}

/// Detail lines with what changes from run to run made constant: the job
/// id (the first 12 columns, but in the header) and a `0:00:NN` runtime in
/// the columns `runtime`.
fn masked(lines: &[String], runtime: std::ops::Range<usize>) -> Vec<String> {
    lines
        .iter()
        .map(|l| {
            if l.trim_start().starts_with("JOBID") {
                return l.clone();
            }
            let mut c: Vec<char> = l.chars().collect();
            if c.len() >= 12 {
                c.splice(0..12, format!("{:>12}", "ID").chars());
            }
            let t: String = c.get(runtime.clone()).unwrap_or_default().iter().collect();
            if let Some(secs) = t.trim_start().strip_prefix("0:00:")
                && secs.len() == 2
                && secs.chars().all(|d| d.is_ascii_digit())
            {
                c.splice(runtime.clone(), format!("{:>10}", "0:00:SS").chars());
            }
            c.into_iter().collect()
        })
        .collect()
}
