//! `fluxgate job timeleft` inside and outside a job, as flux job timeleft.

mod common;

use common::{in_instance, text};

#[test]
fn seconds_left_from_inside_and_outside() {
    let out = in_instance(
        r#"$F run -t 10m sh -c '$F job timeleft; $F job timeleft -H'
           a=$($F submit -t 1h sleep 30); $F job wait-event -q $a start
           $F job timeleft $a; $F cancel $a
           $F run true; $F job timeleft $($F job last); 
           h=$($F submit --urgency=hold true); $F job timeleft $h; echo "pending=$?"; $F cancel $h"#,
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(lines.len(), 5, "{stdout} {stderr}");
    let secs = |l: &str| l.parse::<u64>().unwrap_or_else(|_| panic!("{l}: {stdout}"));
    assert!((590..=600).contains(&secs(lines[0])), "{stdout}");
    // 10m less a moment, as an FSD: 9.99m, or 10m once rounded.
    let minutes = lines[1]
        .strip_suffix('m')
        .and_then(|m| m.parse::<f64>().ok());
    assert!(
        minutes.is_some_and(|m| (9.8..=10.0).contains(&m)),
        "{stdout}"
    );
    assert!((3590..=3600).contains(&secs(lines[2])), "{stdout}");
    assert!(lines[3] == "0" || lines[3] == "infinity", "{stdout}");
    assert_eq!(lines[4], "pending=1");
    assert!(stderr.contains("has not started"), "{stderr}");
}
