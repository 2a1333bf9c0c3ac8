//! Parse and replay a realistic 100-event job eventlog.
//!
//! The log is a dependency-held job from a real flux run, stretched with the
//! events a busy job collects: memos, urgency changes and reprioritization,
//! a jobspec update, prolog/epilog, expiration updates, non-fatal
//! exceptions and debug events.
//!
//! `parse synthetic-100` reads the synthetic log the C comparison uses (100
//! events, each with a five-member context); it is not a job, so it is not
//! replayed.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use fluxgate_shared::eventlog::parse_eventlog;
use fluxgate_shared::job::{JobState, replay};

const LOG: &str = include_str!("../tests/data/job/bench-100.eventlog.json");

/// The synthetic log of the C comparison, generated the same way.
fn synthetic(n: usize) -> String {
    const NAMES: [&str; 16] = [
        "submit",
        "validate",
        "depend",
        "priority",
        "alloc",
        "prolog-start",
        "prolog-finish",
        "start",
        "release",
        "finish",
        "epilog-start",
        "epilog-finish",
        "free",
        "clean",
        "exception",
        "annotations",
    ];
    (0..n)
        .map(|i| {
            format!(
                "{{\"timestamp\":{:.6},\"name\":\"{}\",\"context\":{{\"userid\":1000,\"urgency\":16,\"flags\":0,\"seq\":{i},\"note\":\"event number {i}\"}}}}\n",
                1700000000.0 + i as f64 * 0.001234,
                NAMES[i % 16]
            )
        })
        .collect()
}

fn bench(c: &mut Criterion) {
    let events = parse_eventlog(LOG).expect("bench eventlog is valid");
    assert_eq!(events.len(), 100);
    assert_eq!(replay(&events).unwrap().state(), JobState::Inactive);
    let synth = synthetic(100);
    assert_eq!(parse_eventlog(&synth).unwrap().len(), 100);

    let mut g = c.benchmark_group("eventlog-100");
    g.bench_function("parse", |b| {
        b.iter(|| parse_eventlog(black_box(LOG)).unwrap())
    });
    g.bench_function("replay", |b| b.iter(|| replay(black_box(&events)).unwrap()));
    g.bench_function("parse+replay", |b| {
        b.iter(|| replay(&parse_eventlog(black_box(LOG)).unwrap()).unwrap())
    });
    g.bench_function("parse synthetic-100", |b| {
        b.iter(|| parse_eventlog(black_box(&synth)).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
