//! Any eventlog text: replaying it into a job never panics, and the owed
//! actions of whatever state it reaches can be listed.
#![no_main]

use fluxgate_shared::eventlog::parse_eventlog_lenient;
use fluxgate_shared::job;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let log = parse_eventlog_lenient(s);
    if let Ok(j) = job::replay(&log.events) {
        let _ = j.pending_actions();
        let _ = j.result();
    }
});
