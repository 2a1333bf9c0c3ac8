//! `# flux:` and `# fluxgate:` directives in batch scripts, as `flux batch`
//! reads them: they become options, and options on the command line win.

mod common;

use common::{in_instance, text};

#[test]
fn directives_become_options_and_the_command_line_wins() {
    let out = in_instance(
        r#"d=$(mktemp -d); s=$d/job.sh
           printf '#!/bin/sh\n# flux: -N2 --job-name=fromdirective\n# fluxgate: -t 5m\nhostname\n' > $s
           a=$($F batch $s) || exit 90
           b=$($F batch -N1 --job-name=given $s) || exit 91
           $F job wait-event -q $a clean; $F job wait-event -q $b clean
           $F jobs -a -o '{name} {nnodes}' | sort
           printf '#!/bin/sh\n# flux: -N '"'"'oops\ntrue\n' > $d/bad.sh
           $F batch $d/bad.sh; echo "bad=$?"
           rm -r $d"#,
    );
    let stdout = text(&out.stdout);
    let stderr = text(&out.stderr);
    let lines: Vec<&str> = stdout.lines().collect();
    assert_eq!(
        lines,
        ["NAME NNODES", "fromdirective 2", "given 1", "bad=1"],
        "{stdout} {stderr}"
    );
    assert!(
        stderr.contains("line 2: unterminated single quote"),
        "{stderr}"
    );
}
