//! Any resource eventlog text and drain target: replay and drain planning never
//! panic.
#![no_main]

use fluxgate_shared::eventlog::parse_eventlog_lenient;
use fluxgate_shared::resource::{self, ResourceState};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Ok(s) = std::str::from_utf8(data) else {
        return;
    };
    let (log, target) = s.split_once('\u{0}').unwrap_or((s, "0"));
    let events = parse_eventlog_lenient(log).events;
    let state = resource::replay(&events).unwrap_or_else(|_| ResourceState::new());
    let _ = state.resolve_targets(target);
    let _ = state.drained();
});
