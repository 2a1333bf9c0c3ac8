//! Hostlist expand/encode at scale: 100,000 hosts, contiguous and fragmented.

use std::hint::black_box;

use criterion::{Criterion, criterion_group, criterion_main};
use fluxgate_shared::hostlist::Hostlist;

fn hostlist(c: &mut Criterion) {
    let contiguous = "node[0-99999]".to_string();
    // Ten racks of every other number: 100,000 hosts in 100,000 runs
    // (one bracket holds at most 10,240 ranges).
    let evens: Vec<String> = (0..10_000).map(|i| (i * 2).to_string()).collect();
    let fragmented = (0..10)
        .map(|r| format!("rack{r}n[{}]", evens.join(",")))
        .collect::<Vec<_>>()
        .join(",");
    for (name, text) in [("contiguous", &contiguous), ("fragmented", &fragmented)] {
        let hl = Hostlist::parse(text).unwrap();
        c.bench_function(
            &format!("hostlist/decode {name} ({} hosts)", hl.len()),
            |b| b.iter(|| Hostlist::parse(black_box(text)).unwrap()),
        );
        c.bench_function(
            &format!("hostlist/expand {name} (iter, a String per host)"),
            |b| b.iter(|| black_box(&hl).iter().count()),
        );
        c.bench_function(&format!("hostlist/expand {name} (for_each_host)"), |b| {
            b.iter(|| {
                let mut sum = 0usize;
                black_box(&hl).for_each_host(|h| sum += usize::from(h.as_bytes()[4]));
                sum
            })
        });
        // The C comparison: decode, visit every host name, encode again.
        c.bench_function(&format!("hostlist/decode+expand+encode {name}"), |b| {
            b.iter(|| {
                let h = Hostlist::parse(black_box(text)).unwrap();
                let mut sum = 0usize;
                h.for_each_host(|n| sum += usize::from(n.as_bytes()[4]));
                (sum, h.encode())
            })
        });
        c.bench_function(
            &format!("hostlist/decode+expand+encode {name} (iter)"),
            |b| {
                b.iter(|| {
                    let h = Hostlist::parse(black_box(text)).unwrap();
                    let sum: usize = h.iter().map(|n| usize::from(n.as_bytes()[4])).sum();
                    (sum, h.encode())
                })
            },
        );
        c.bench_function(&format!("hostlist/encode {name}"), |b| {
            b.iter(|| black_box(&hl).encode())
        });
        let names: Vec<String> = hl.iter().collect();
        c.bench_function(&format!("hostlist/push+encode {name} from names"), |b| {
            b.iter(|| {
                let mut h = Hostlist::new();
                for n in &names {
                    h.push(n).unwrap();
                }
                h.encode()
            })
        });
        c.bench_function(&format!("hostlist/find last {name}"), |b| {
            let last = names.last().unwrap();
            b.iter(|| black_box(&hl).find(black_box(last)))
        });
    }
}

criterion_group!(benches, hostlist);
criterion_main!(benches);
