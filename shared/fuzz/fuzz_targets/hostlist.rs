//! Any string: decode never panics, and encode/decode keeps the expanded list.
#![no_main]

use fluxgate_shared::Hostlist;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(hl) = Hostlist::parse(s) {
        // Cap the expansion so a short input naming a million hosts stays fast.
        if hl.len() > 100_000 {
            return;
        }
        let again = Hostlist::parse(&hl.encode()).expect("encoded hostlist decodes");
        assert!(hl.iter().eq(again.iter()));
    }
});
