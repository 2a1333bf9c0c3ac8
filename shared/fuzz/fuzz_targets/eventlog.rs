//! Any bytes: single lines, whole logs and the follower never panic, and every
//! event that parses re-emits to the same event.
#![no_main]

use fluxgate_shared::Event;
use fluxgate_shared::eventlog::{LineSplitter, parse_eventlog_lenient};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(s) = std::str::from_utf8(data) {
        if let Ok(e) = Event::parse_line(s) {
            let line = e.to_line();
            let again = Event::parse_line(&format!("{line}\n")).expect("emitted line parses");
            assert_eq!(again.to_line(), line);
        }
        let log = parse_eventlog_lenient(s);
        assert_eq!(
            log.events.len() + log.errors.len(),
            s.split_inclusive('\n').count()
        );
    }
    // The follower, fed in chunks sized by the first byte.
    let Some((&n, rest)) = data.split_first() else {
        return;
    };
    let chunk = usize::from(n % 16) + 1;
    let mut split = LineSplitter::default();
    for piece in rest.chunks(chunk) {
        split.push(piece);
        while split.next_event().is_some() {}
    }
});
