//! Idset decode/encode and set operations at scale: 1,000,000 ids in 1,000 ranges.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use fluxgate_shared::idset::{EncodeFlags, IdSet};

/// 1,000 ranges of 1,000 ids each, with a gap of 1,000 between ranges.
fn big() -> IdSet {
    IdSet::from_ranges((0..1000u32).map(|i| (i * 2000, i * 2000 + 999)))
}

fn idset(c: &mut Criterion) {
    let set = big();
    assert_eq!(set.count(), 1_000_000);
    let ranged = set.encode(EncodeFlags::RANGE);
    let plain = set.encode(EncodeFlags::PLAIN);

    c.bench_function("idset/decode 1M ids in 1k ranges (ranged)", |b| {
        b.iter(|| IdSet::parse(black_box(&ranged)).unwrap())
    });
    c.bench_function("idset/encode 1M ids in 1k ranges (RANGE)", |b| {
        b.iter(|| black_box(&set).encode(EncodeFlags::RANGE))
    });
    c.bench_function("idset/decode 1M ids (plain list)", |b| {
        b.iter(|| IdSet::parse(black_box(&plain)).unwrap())
    });
    c.bench_function("idset/encode 1M ids (plain list)", |b| {
        b.iter(|| black_box(&set).encode(EncodeFlags::PLAIN))
    });

    let other = IdSet::from_ranges((0..1000u32).map(|i| (i * 2000 + 500, i * 2000 + 1499)));
    c.bench_function("idset/union 1k x 1k ranges", |b| {
        b.iter(|| black_box(&set).union(black_box(&other)))
    });
    c.bench_function("idset/difference 1k x 1k ranges", |b| {
        b.iter(|| black_box(&set).difference(black_box(&other)))
    });
    c.bench_function("idset/intersection 1k x 1k ranges", |b| {
        b.iter(|| black_box(&set).intersection(black_box(&other)))
    });
}

criterion_group!(benches, idset);
criterion_main!(benches);
