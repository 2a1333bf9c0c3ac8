//! `fluxgate jobs -o` formats against a real instance (`fluxgate start
//! --size 2`; the job manager and exec binaries must sit beside the CLI
//! binary: `cargo build --workspace`), compared with what flux-jobs(1)
//! prints for the same jobs.

mod common;

use common::{in_instance, text};

/// The row of `lines` (a listing without its header) for job `id`: rows
/// are found by id, since two jobs that run at once may end in either
/// order, and inactive jobs are listed most recent first.
fn row<'a>(lines: &'a [String], id: &str) -> &'a str {
    let rows: Vec<&String> = lines
        .iter()
        .filter(|l| l.split_whitespace().next() == Some(id))
        .collect();
    assert_eq!(rows.len(), 1, "one row for {id}: {lines:?}");
    rows[0]
}

#[test]
fn jobs_formats_as_flux_jobs() {
    let out = in_instance(
        r#"a=$($F submit true); b=$($F submit false);
           $F job wait-event -q $a clean; $F job wait-event -q $b clean;
           echo "ids $a $b"
           echo "== f58"; $F jobs -a -o '{id.f58} {result}'
           echo "== long"; $F jobs -a -o long
           echo "== deps"; $F jobs -a -o deps
           echo "== endreason"; $F jobs -a -o endreason
           echo "== stats"; $F jobs --stats-only; echo "rc=$?"
           echo "== bad"; $F jobs -a -o '{nosuch}'; echo "rc=$?""#,
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    let section = |name: &str| common::section(&stdout, name);
    let ids: Vec<&str> = stdout
        .lines()
        .next()
        .and_then(|l| l.strip_prefix("ids "))
        .map(|l| l.split(' ').collect())
        .unwrap_or_default();
    assert_eq!(ids.len(), 2, "{stdout} {stderr}");
    let (a, b) = (ids[0], ids[1]);
    // `true` (a) and `false` (b) run at once: whichever ends first is
    // listed last, so each row is looked up by its id.
    let f58 = section("f58");
    assert_eq!(f58.len(), 3, "{f58:?}");
    assert_eq!(f58[0], "JOBID RESULT");
    assert_eq!(row(&f58[1..], a), format!("{a} COMPLETED"));
    assert_eq!(row(&f58[1..], b), format!("{b} FAILED"));

    let long = section("long");
    assert_eq!(
        long[0],
        "       JOBID USER     NAME          STATUS NTASKS NNODES     T_SUBMIT  T_REMAINING     TIME INFO"
    );
    assert_eq!(long.len(), 3, "{long:?}");
    assert!(
        row(&long[1..], b).starts_with(&format!("{b:>12} ")),
        "{long:?}"
    );
    assert!(
        row(&long[1..], b).contains(" false         FAILED      1      1 "),
        "{long:?}"
    );
    assert!(
        row(&long[1..], a).contains(" true       COMPLETED      1      1 "),
        "{long:?}"
    );

    let deps = section("deps");
    assert_eq!(
        deps[0],
        "       JOBID NAME       URG PRI          STATE    DEPENDENCIES"
    );
    let false_deps = row(&deps[1..], b);
    assert!(
        false_deps.starts_with(&format!("{b:>12} false      16  ")),
        "{deps:?}"
    );
    assert!(false_deps.ends_with(" INACTIVE "), "{deps:?}");

    let end = section("endreason");
    assert_eq!(
        end[0],
        "       JOBID USER     NAME       ST   T_INACTIVE INACTIVE-REASON"
    );
    let (false_end, true_end) = (row(&end[1..], b), row(&end[1..], a));
    assert!(
        false_end.contains(" false       F ") && false_end.ends_with(" Exit 1"),
        "{end:?}"
    );
    assert!(
        true_end.contains(" true       CD ") && true_end.ends_with(" Exit 0"),
        "{end:?}"
    );

    // No job is active: flux exits 1 so `while flux jobs --stats-only` ends.
    assert_eq!(
        section("stats"),
        [
            "0 running, 1 completed, 1 failed, 0 pending, 0 inactive purged",
            "rc=1"
        ]
    );
    assert_eq!(section("bad"), ["rc=1"]);
    assert!(
        stderr.contains("fluxgate-jobs: Error in user format: Unknown format field: nosuch\n"),
        "{stderr}"
    );
}

#[test]
fn jobs_carries_job_list_fields() {
    let out = in_instance(
        r#"a=$($F submit -n2 -c1 -t 5m --cwd=/tmp --setattr=project=p1 --urgency=20 true)
           $F job wait-event -q $a clean
           c=$($F submit --job-name=s sleep 300)
           b=$($F submit --job-name=s -c2 --dependency=afterany:$a --dependency=singleton true)
           echo "== done"
           $F jobs -n -o '{cwd} {project} {ncores} {ranks} {duration:.0f} {priority} {t_priority:.0f}' $a
           echo "== exp"
           $F jobs -n -o '{expiration}' $a | awk '{ print ($1 > 1000000000) }'
           echo "== times"
           $F jobs -n -o '{t_submit} {t_priority} {t_sched} {t_run} {t_cleanup} {t_inactive}' $a
           echo "== held"
           $F jobs -n -o '{ncores} {priority} {dependencies}.' $b
           $F cancel $b $c"#,
    );
    let stdout = text(&out.stdout);
    assert!(out.status.success(), "{stdout} {}", text(&out.stderr));
    let section = |name: &str| common::section(&stdout, name);
    // An inactive job keeps its last priority (urgency 20, not held).
    let done = section("done");
    let f: Vec<&str> = done[0].split_whitespace().collect();
    assert_eq!(&f[..5], ["/tmp", "p1", "2", "0", "300"], "{done:?}");
    assert_ne!(f[5], "", "{done:?}");
    assert_ne!(f[6], "0", "t_priority is set: {done:?}");
    assert_eq!(section("exp"), ["1"]);
    let times: Vec<f64> = section("times")[0]
        .split_whitespace()
        .map(|t| t.parse().unwrap())
        .collect();
    assert!(times.iter().all(|t| *t > 0.0), "{times:?}");
    assert!(
        times.windows(2).all(|w| w[0] <= w[1]),
        "in state order: {times:?}"
    );
    // A held job: the cores it asked for, no priority yet, what it waits on
    // (the afterany one is satisfied at submit).
    assert_eq!(section("held"), ["2  singleton."]);
}
