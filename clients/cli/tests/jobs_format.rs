//! `fluxgate jobs -o` formats against a real instance (`fluxgate start
//! --size 2`; the job manager and exec binaries must sit beside the CLI
//! binary: `cargo build --workspace`), compared with what flux-jobs(1)
//! prints for the same jobs.

mod common;

use common::{in_instance, text};

#[test]
fn jobs_formats_as_flux_jobs() {
    let out = in_instance(
        r#"a=$($F submit true); $F job wait-event -q $a clean;
           b=$($F submit false); $F job wait-event -q $b clean;
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
    // Inactive jobs are listed most recent first, as job-list orders them;
    // `false` is submitted once `true` is clean, so it ends last.
    assert_eq!(
        section("f58"),
        [
            "JOBID RESULT".to_string(),
            format!("{b} FAILED"),
            format!("{a} COMPLETED")
        ]
    );

    let long = section("long");
    assert_eq!(
        long[0],
        "       JOBID USER     NAME          STATUS NTASKS NNODES     T_SUBMIT  T_REMAINING     TIME INFO"
    );
    assert!(long[1].starts_with(&format!("{b:>12} ")), "{long:?}");
    assert!(
        long[1].contains(" false         FAILED      1      1 "),
        "{long:?}"
    );
    assert!(
        long[2].contains(" true       COMPLETED      1      1 "),
        "{long:?}"
    );

    let deps = section("deps");
    assert_eq!(
        deps[0],
        "       JOBID NAME       URG PRI          STATE    DEPENDENCIES"
    );
    assert!(
        deps[1].starts_with(&format!("{b:>12} false      16  ")),
        "{deps:?}"
    );
    assert!(deps[1].ends_with(" INACTIVE "), "{deps:?}");

    let end = section("endreason");
    assert_eq!(
        end[0],
        "       JOBID USER     NAME       ST   T_INACTIVE INACTIVE-REASON"
    );
    assert!(
        end[1].contains(" false       F ") && end[1].ends_with(" Exit 1"),
        "{end:?}"
    );
    assert!(
        end[2].contains(" true       CD ") && end[2].ends_with(" Exit 0"),
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
