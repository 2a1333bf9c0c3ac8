//! Parse and replay a realistic 100-event job eventlog.
//!
//! The log is a dependency-held job from a real flux run, stretched with the
//! events a busy job collects: memos, urgency changes and reprioritization,
//! a jobspec update, prolog/epilog, expiration updates, non-fatal
//! exceptions and debug events.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use fluxgate_shared::Event;
use fluxgate_shared::job::{JobState, replay};

const LOG: &str = include_str!("../tests/data/job/bench-100.eventlog.json");

fn parse(text: &str) -> Vec<Event> {
    text.split_inclusive('\n')
        .map(|l| Event::parse_line(l).expect("bench eventlog is valid"))
        .collect()
}

fn bench(c: &mut Criterion) {
    let events = parse(LOG);
    assert_eq!(events.len(), 100);
    assert_eq!(replay(&events).unwrap().state(), JobState::Inactive);

    let mut g = c.benchmark_group("eventlog-100");
    g.bench_function("parse", |b| b.iter(|| parse(black_box(LOG))));
    g.bench_function("replay", |b| b.iter(|| replay(black_box(&events)).unwrap()));
    g.bench_function("parse+replay", |b| {
        b.iter(|| replay(&parse(black_box(LOG))).unwrap())
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
