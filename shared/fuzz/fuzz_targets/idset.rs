//! Any string: decode never panics, and what decodes re-encodes to an equal set.
#![no_main]

use fluxgate_shared::IdSet;
use fluxgate_shared::idset::EncodeFlags;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(set) = IdSet::parse(s) {
        for (range, brackets) in [(false, false), (true, false), (true, true), (false, true)] {
            let text = set.encode(EncodeFlags { range, brackets });
            assert_eq!(IdSet::parse(&text).ok().as_ref(), Some(&set), "{text}");
        }
    }
});
