//! Doubling benchmarks: every builder of the data model at n, 2n and 4n, in
//! the orders that used to make them quadratic (ranks out of order, ids in
//! random order, hosts unsorted). Linear or n·log n code takes about twice
//! as long per doubling; a quadratic path takes four times as long.
//!
//! After the criterion measurements, a check times each builder again
//! (median of [`CHECK_RUNS`] runs per size, the sizes taking turns), prints
//! the ratio per doubling and fails if any ratio is above [`MAX_RATIO`].

use std::hint::black_box;
use std::time::{Duration, Instant};

use criterion::{BenchmarkId, Criterion, criterion_group};
use fluxgate_shared::ResourceSet;
use fluxgate_shared::hostlist::Hostlist;
use fluxgate_shared::idset::IdSet;
use serde_json::json;

/// Largest time ratio allowed between a size and its half (n·log n at these
/// sizes is about 2.1; quadratic is 4).
const MAX_RATIO: f64 = 2.2;

/// Timed runs per size in the ratio check; the median is compared.
const CHECK_RUNS: usize = 9;

/// xorshift64*: a fixed, dependency-free pseudo-random sequence, so every
/// run measures the same inputs.
struct XorShift(u64);

impl XorShift {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// `0..n` in a random order (Fisher–Yates).
    fn permutation(&mut self, n: u32) -> Vec<u32> {
        let mut v: Vec<u32> = (0..n).collect();
        for i in (1..v.len()).rev() {
            let j = (self.next() % (i as u64 + 1)) as usize;
            v.swap(i, j);
        }
        v
    }
}

/// R of `n` nodes, 64 cores and 8 gpus each, with one R_lite entry per
/// rank in a random order (a fragmented R, as a scheduler writes after
/// many allocations) and a nodelist.
fn fragmented_r(n: u32) -> String {
    let entries: Vec<_> = XorShift(0x5eed_0018 + u64::from(n))
        .permutation(n)
        .into_iter()
        .map(|r| json!({"rank": r.to_string(), "children": {"core": "0-63", "gpu": "0-7"}}))
        .collect();
    json!({
        "version": 1,
        "execution": {
            "R_lite": entries,
            "starttime": 0.0,
            "expiration": 0.0,
            "nodelist": [format!("node[0-{}]", n - 1)],
        }
    })
    .to_string()
}

/// Two halves of an `n`-node set: even ranks and odd ranks, so a union
/// interleaves every node.
fn halves(n: u32) -> (ResourceSet, ResourceSet) {
    let half = |odd: u32| {
        let entries: Vec<_> = (0..n / 2)
            .map(|i| json!({"rank": (2 * i + odd).to_string(), "children": {"core": "0-63"}}))
            .collect();
        ResourceSet::from_json(&json!({"version": 1, "execution": {"R_lite": entries}}))
            .expect("valid R")
    };
    (half(0), half(1))
}

/// `n` nodes whose shape alternates by rank (gpu on odd ranks only), so
/// emitting R groups ranks into two long, gapped idsets.
fn two_shapes(n: u32) -> ResourceSet {
    let ranks = |odd: u32| IdSet::from_ids((0..n / 2).map(|i| 2 * i + odd)).to_string();
    let r = json!({"version": 1, "execution": {"R_lite": [
        {"rank": ranks(0), "children": {"core": "0-63"}},
        {"rank": ranks(1), "children": {"core": "0-63", "gpu": "0"}},
    ]}});
    ResourceSet::from_json(&r).expect("valid R")
}

/// `resource.config` of `n` hosts in one entry with a property, as a site
/// configures a cluster.
fn config(n: u32) -> serde_json::Value {
    json!([{"hosts": format!("node[0-{}]", n - 1), "cores": "0-63", "properties": ["batch"]}])
}

/// `n` ids out of `0..2n` (every other pair) in a random order, so the
/// set is many ranges until the end.
fn random_ids(n: u32) -> Vec<u32> {
    XorShift(0x1d5e_7000 + u64::from(n))
        .permutation(n)
        .into_iter()
        .map(|i| i / 2 * 4 + i % 2)
        .collect()
}

/// `n` host names, every third number missing (runs that touch and runs
/// that do not), in a random order.
fn unsorted_hosts(n: u32) -> Vec<String> {
    XorShift(0x4057_0000 + u64::from(n))
        .permutation(n)
        .into_iter()
        .map(|i| format!("node{}", i / 2 * 3 + i % 2))
        .collect()
}

fn build_hostlist(hosts: &[String]) -> String {
    let mut hl = Hostlist::new();
    for h in hosts {
        hl.push(h).expect("valid host");
    }
    hl.sort();
    hl.encode()
}

/// One builder at three sizes: its name, the sizes, and a function that
/// makes the input of a size and returns the work to time on it.
struct Case {
    name: &'static str,
    sizes: [u32; 3],
    prepare: fn(u32) -> Box<dyn FnMut()>,
}

fn cases() -> Vec<Case> {
    vec![
        Case {
            name: "R parse+count (fragmented)",
            sizes: [16_384, 32_768, 65_536],
            prepare: |n| {
                let text = fragmented_r(n);
                Box::new(move || {
                    let rs = ResourceSet::parse(black_box(&text)).expect("valid R");
                    black_box(rs.ncores());
                })
            },
        },
        Case {
            name: "R union (interleaved halves)",
            sizes: [16_384, 32_768, 65_536],
            prepare: |n| {
                let (a, b) = halves(n);
                Box::new(move || {
                    black_box(black_box(&a).union(black_box(&b)));
                })
            },
        },
        Case {
            name: "R emit (two shapes interleaved)",
            sizes: [16_384, 32_768, 65_536],
            prepare: |n| {
                let rs = two_shapes(n);
                Box::new(move || {
                    black_box(black_box(&rs).to_json_string());
                })
            },
        },
        Case {
            name: "R from config (one property)",
            sizes: [16_384, 32_768, 65_536],
            prepare: |n| {
                let conf = config(n);
                Box::new(move || {
                    black_box(ResourceSet::from_config(black_box(&conf)).expect("valid config"));
                })
            },
        },
        Case {
            name: "idset collect (random order)",
            sizes: [250_000, 500_000, 1_000_000],
            prepare: |n| {
                let ids = random_ids(n);
                Box::new(move || {
                    let set: IdSet = black_box(&ids).iter().copied().collect();
                    black_box(set);
                })
            },
        },
        Case {
            name: "hostlist push+sort+encode (unsorted)",
            sizes: [25_000, 50_000, 100_000],
            prepare: |n| {
                let hosts = unsorted_hosts(n);
                Box::new(move || {
                    black_box(build_hostlist(black_box(&hosts)));
                })
            },
        },
    ]
}

fn scaling(c: &mut Criterion) {
    for case in cases() {
        let mut group = c.benchmark_group(format!("scaling/{}", case.name));
        // The largest inputs take tens of milliseconds per run.
        group.sample_size(10);
        for n in case.sizes {
            let mut work = (case.prepare)(n);
            group.bench_with_input(BenchmarkId::from_parameter(n), &n, |b, _| b.iter(&mut work));
        }
        group.finish();
    }
}

/// Median time of each work, timed in interleaved rounds (one run of each
/// per round), so that the machine's own drift, on a shared host, falls on
/// every size alike rather than on whichever size ran during it.
fn median_times(works: &mut [Box<dyn FnMut()>]) -> Vec<Duration> {
    for work in works.iter_mut() {
        work(); // warm up caches and the allocator
    }
    let mut times: Vec<Vec<Duration>> = vec![Vec::with_capacity(CHECK_RUNS); works.len()];
    for _ in 0..CHECK_RUNS {
        for (work, times) in works.iter_mut().zip(&mut times) {
            let t = Instant::now();
            work();
            times.push(t.elapsed());
        }
    }
    times
        .into_iter()
        .map(|mut t| {
            t.sort_unstable();
            t[CHECK_RUNS / 2]
        })
        .collect()
}

/// Time each builder at its three sizes, print the ratios per doubling and
/// fail when one is above [`MAX_RATIO`].
fn check_ratios() {
    let mut failed = Vec::new();
    println!("\nratio per doubling (median of {CHECK_RUNS} interleaved runs, limit {MAX_RATIO}x):");
    for case in cases() {
        let mut works: Vec<Box<dyn FnMut()>> =
            case.sizes.iter().map(|&n| (case.prepare)(n)).collect();
        let times = median_times(&mut works);
        drop(works);
        let mut line = format!("  {:<40}", case.name);
        for (i, (n, t)) in case.sizes.iter().zip(&times).enumerate() {
            line += &format!(" {n:>9}: {:>9.3} ms", t.as_secs_f64() * 1e3);
            if i > 0 {
                let ratio = t.as_secs_f64() / times[i - 1].as_secs_f64();
                line += &format!(" ({ratio:.2}x)");
                if ratio > MAX_RATIO {
                    failed.push(format!("{} at {n}: {ratio:.2}x", case.name));
                }
            }
        }
        println!("{line}");
    }
    assert!(
        failed.is_empty(),
        "not linear (more than {MAX_RATIO}x per doubling): {failed:?}"
    );
}

criterion_group!(benches, scaling);

fn main() {
    benches();
    Criterion::default().configure_from_args().final_summary();
    check_ratios();
}
