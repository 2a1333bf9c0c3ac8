//! `fluxgate cancel` with -u, -S, --dry-run and -m, as flux cancel: a user
//! or states filter implies --all, and the summaries are worded as flux's.

mod common;

use common::{in_instance, text};

#[test]
fn filters_imply_all_and_summaries_match_flux() {
    let out = in_instance(
        r#"a=$($F submit --urgency=hold true); b=$($F submit --urgency=hold true)
           $F cancel -S pending --dry-run 2>&1
           $F cancel -u $(id -u) -m "no longer needed" 2>&1
           $F job eventlog $a | grep -c "no longer needed"
           $F cancel -S pending 2>&1; echo "rc=$?"
           $F cancel -q -S pending 2>&1; echo "quiet=$?"
           $F cancel -S pending $a 2>&1; echo "mixed=$?""#,
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        [
            "fluxgate-cancel: Would cancel 2 jobs",
            "fluxgate-cancel: Canceled 2 jobs (0 errors)",
            "1",
            "fluxgate-cancel: Matched 0 jobs",
            "rc=0",
            "quiet=0",
            "fluxgate-cancel: Do not specify a list of jobids with --all,--user,--states options",
            "mixed=1"
        ],
        "{stdout} {stderr}"
    );
}
