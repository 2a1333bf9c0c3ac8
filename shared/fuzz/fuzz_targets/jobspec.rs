//! Any text, JSON or YAML: jobspec parsing never panics, and what validates
//! re-emits to JSON that validates to the same derived values.
//!
//! Seeds in `seeds/jobspec` (real jobspecs with anchors, and alias bombs of
//! every shape: nested sequences, mappings, merge keys, long strings) start
//! the search where parsing costs the most; with `-timeout=2` a slow input
//! is reported as a crash:
//! `cargo fuzz run jobspec corpus/jobspec seeds/jobspec -s none -- -timeout=2`
#![no_main]

use fluxgate_shared::Jobspec;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let Ok(js) = Jobspec::parse(s) else {
        return;
    };
    let again = Jobspec::parse(&js.to_json()).expect("emitted jobspec parses");
    assert_eq!(again.nslots(), js.nslots());
    assert_eq!(again.ntasks(), js.ntasks());
    assert_eq!(again.nnodes(), js.nnodes());
    assert_eq!(again.command(), js.command());
});
