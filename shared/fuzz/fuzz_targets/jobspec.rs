//! Any text, JSON or YAML: jobspec parsing never panics, and what validates
//! re-emits to JSON that validates to the same derived values.
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
