//! `fluxgate job status` and `fluxgate job memo` against a real instance,
//! as flux-core t2201-job-cmd.t drives their flux namesakes.

mod common;

use common::{in_instance, text};

#[test]
fn status_exits_with_the_largest_code_and_memo_lands_in_the_eventlog() {
    // Memos go to active jobs only, as flux's job manager requires.
    let out = in_instance(
        r#"a=$($F submit true); b=$($F submit sh -c 'exit 4'); c=$($F submit sh -c 'exit 2')
           $F job status $a; echo "one=$?"
           $F job status -v $a $b $c; echo "all=$?"
           h=$($F submit --urgency=hold true); $F cancel $h
           $F job status -e 42 $h; echo "exc=$?"
           s=$($F submit sleep 30)
           $F job memo $s note=hello n=3 deep.key='[1]' || exit 90
           $F job eventlog $s | grep memo
           $F job memo $s noequals; echo "bad=$?"
           $F cancel $s"#,
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    let mut lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{stdout} {stderr}");
    assert_eq!(lines[0], "one=0");
    assert_eq!(lines[1], "all=4");
    assert_eq!(lines.remove(2), "exc=42");
    assert!(lines[2].contains(" memo "), "{stdout}");
    for part in [r#"note="hello""#, "n=3", r#"deep={"key":[1]}"#] {
        assert!(lines[2].contains(part), "{part}: {stdout}");
    }
    assert_eq!(lines[3], "bad=1");
    assert!(stderr.contains("exited with exit code 0"), "{stderr}");
}
