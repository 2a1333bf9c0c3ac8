//! How much of one resource (nodes, or cores) is free over time: a step
//! function kept as its change points, as Fluxion's planner keeps its
//! scheduled points.
//!
//! The points live in a treap ordered by time, each holding the amount
//! free from its time until the next point, with a lazy add and each
//! subtree's minimum and maximum. Taking or giving back an amount over a
//! span is an O(log S) range add (S: points); "the earliest time `need`
//! is free for `duration`" descends by those minima and maxima, O(log S)
//! per step, so no query looks at points one by one.
//!
//! Times are non-negative seconds; `f64::INFINITY` ends a span that never
//! ends. Amounts are signed: running work the inventory no longer holds
//! (a node went down under a job) may take more than there is.

const NIL: u32 = u32::MAX;

/// Ordering key of a time: non-negative times order as their bits.
fn key(t: f64) -> u64 {
    t.max(0.0).to_bits()
}

fn time(k: u64) -> f64 {
    f64::from_bits(k)
}

#[derive(Debug, Clone)]
struct Point {
    key: u64,
    /// Free from this point to the next, all adds above it applied but
    /// those still pending in an ancestor's `add`.
    val: i64,
    /// Pending for the children.
    add: i64,
    min: i64,
    max: i64,
    prio: u32,
    /// Span ends at this point; the point goes when none is left.
    refs: u32,
    left: u32,
    right: u32,
}

/// A span taken from a [`Profile`], to give back.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct SpanId(u32);

#[derive(Debug, Clone, Copy)]
struct Span {
    start: u64,
    end: u64,
    amount: i64,
}

/// One resource's free amount as a function of time.
#[derive(Debug, Clone)]
pub struct Profile {
    points: Vec<Point>,
    unused: Vec<u32>,
    root: u32,
    /// Spans by id; a slot of one given back is reused.
    spans: Vec<Option<Span>>,
    free_spans: Vec<u32>,
    /// xorshift state for the treap's priorities: fixed seed, so a
    /// profile behaves the same in every run.
    rng: u64,
    total: i64,
}

impl Profile {
    /// `total` free at all times.
    pub fn new(total: i64) -> Self {
        let mut p = Profile {
            points: Vec::new(),
            unused: Vec::new(),
            root: NIL,
            spans: Vec::new(),
            free_spans: Vec::new(),
            rng: 0x9E37_79B9_7F4A_7C15,
            total,
        };
        // The origin: never removed, so every time has a point at or before it.
        let origin = p.point(0, total);
        p.points[origin as usize].refs = 1;
        p.root = origin;
        p
    }

    /// The amount free when nothing is taken.
    pub fn total(&self) -> i64 {
        self.total
    }

    /// Change the amount there is at all times by `delta` (nodes came up
    /// or went down).
    pub fn grow(&mut self, delta: i64) {
        self.total += delta;
        self.apply(self.root, delta);
    }

    /// Spans taken and not given back.
    pub fn spans(&self) -> usize {
        self.spans.len() - self.free_spans.len()
    }

    /// Change points, the origin included.
    pub fn points(&self) -> usize {
        self.points.len() - self.unused.len()
    }

    /// Take `amount` over `[start, end)`; `end` may be infinite.
    pub fn take(&mut self, start: f64, end: f64, amount: i64) -> SpanId {
        let (s, e) = (key(start), key(end).max(key(start)));
        let span = Span {
            start: s,
            end: e,
            amount,
        };
        let id = match self.free_spans.pop() {
            Some(i) => {
                self.spans[i as usize] = Some(span);
                i
            }
            None => {
                self.spans.push(Some(span));
                (self.spans.len() - 1) as u32
            }
        };
        if s < e {
            // One split into before, during and after; the ends become
            // points (or count once more on the ones there).
            let (a, b) = self.split(self.root, s);
            let (m, c) = self.split(b, e);
            let before = self.last_value(a);
            let m = self.mark_first(m, s, before);
            let during = if m == NIL { before } else { self.last_value(m) };
            let c = self.mark_first(c, e, during);
            self.apply(m, -amount);
            let am = self.merge(a, m);
            self.root = self.merge(am, c);
        }
        SpanId(id)
    }

    /// Give back a span; an unknown id is ignored.
    pub fn give_back(&mut self, id: SpanId) {
        let Some(span) = self.spans.get_mut(id.0 as usize).and_then(Option::take) else {
            return;
        };
        self.free_spans.push(id.0);
        if span.start < span.end {
            let (a, b) = self.split(self.root, span.start);
            let (m, c) = self.split(b, span.end);
            self.apply(m, span.amount);
            let m = self.unmark_first(m, span.start);
            let c = self.unmark_first(c, span.end);
            let am = self.merge(a, m);
            self.root = self.merge(am, c);
        }
    }

    /// Change what a span takes to `amount`.
    pub fn retake(&mut self, id: SpanId, amount: i64) {
        let Some(span) = self.spans.get_mut(id.0 as usize).and_then(Option::as_mut) else {
            return;
        };
        let delta = amount - span.amount;
        span.amount = amount;
        let (s, e) = (span.start, span.end);
        if s < e && delta != 0 {
            self.range_add(s, e, -delta);
        }
    }

    /// Subtree `n` (every key at or after `k`) with one more span end
    /// counted at `k`, a point made there (free: `val`) if there is none.
    fn mark_first(&mut self, n: u32, k: u64, val: i64) -> u32 {
        if let Some(f) = self.leftmost(n)
            && self.points[f as usize].key == k
        {
            self.points[f as usize].refs += 1;
            return n;
        }
        let m = self.point(k, val);
        self.points[m as usize].refs = 1;
        self.merge(m, n)
    }

    /// Subtree `n` (every key at or after `k`) with one span end fewer at
    /// `k`; the point goes with its last one.
    fn unmark_first(&mut self, n: u32, k: u64) -> u32 {
        let Some(f) = self
            .leftmost(n)
            .filter(|f| self.points[*f as usize].key == k)
        else {
            return n;
        };
        let p = &mut self.points[f as usize];
        p.refs -= 1;
        if p.refs > 0 {
            return n;
        }
        let (gone, rest) = self.pop_leftmost(n);
        self.unused.push(gone);
        rest
    }

    /// The first point of subtree `n` (keys need no pending adds).
    fn leftmost(&self, mut n: u32) -> Option<u32> {
        if n == NIL {
            return None;
        }
        while self.points[n as usize].left != NIL {
            n = self.points[n as usize].left;
        }
        Some(n)
    }

    /// Take the first point out of subtree `n` (not empty): the point and
    /// what is left.
    fn pop_leftmost(&mut self, n: u32) -> (u32, u32) {
        self.push(n);
        let left = self.points[n as usize].left;
        if left == NIL {
            let right = self.points[n as usize].right;
            self.points[n as usize].right = NIL;
            return (n, right);
        }
        let (gone, rest) = self.pop_leftmost(left);
        self.points[n as usize].left = rest;
        self.pull(n);
        (gone, n)
    }

    /// The amount free at `t`.
    pub fn free_at(&self, t: f64) -> i64 {
        let k = key(t);
        let (mut n, mut acc, mut best) = (self.root, 0, self.total);
        while n != NIL {
            let p = &self.points[n as usize];
            if p.key <= k {
                best = p.val + acc;
                acc += p.add;
                n = p.right;
            } else {
                acc += p.add;
                n = p.left;
            }
        }
        best
    }

    /// The least amount free over `[start, end)`.
    pub fn min_over(&self, start: f64, end: f64) -> i64 {
        let (s, e) = (key(start), key(end));
        let at = self.free_at(start);
        if e <= s {
            return at;
        }
        at.min(self.min_in(self.root, 0, s.saturating_add(1), e))
    }

    /// The earliest time at or after `now` from which `need` is free for
    /// `duration` seconds (infinite: for good); `None` if never.
    pub fn earliest(&self, now: f64, duration: f64, need: i64) -> Option<f64> {
        if need <= 0 {
            return Some(now);
        }
        let mut t = key(now);
        if self.value_at_key(t) < need {
            t = self.first_at_least(self.root, 0, t.saturating_add(1), need)?;
        }
        loop {
            // What is free after a span that never ends is free never.
            if time(t).is_infinite() {
                return None;
            }
            let end = key(time(t) + duration.max(0.0));
            if end <= t {
                return Some(time(t));
            }
            match self.first_below(self.root, 0, t.saturating_add(1), end, need) {
                None => return Some(time(t)),
                Some(u) => t = self.first_at_least(self.root, 0, u.saturating_add(1), need)?,
            }
        }
    }

    fn value_at_key(&self, k: u64) -> i64 {
        self.free_at(time(k))
    }

    /// The leftmost point at or after key `from` whose amount is at least `need`.
    fn first_at_least(&self, n: u32, acc: i64, from: u64, need: i64) -> Option<u64> {
        if n == NIL {
            return None;
        }
        let p = &self.points[n as usize];
        if p.max + acc < need {
            return None;
        }
        let below = acc + p.add;
        if p.key < from {
            return self.first_at_least(p.right, below, from, need);
        }
        if let Some(k) = self.first_at_least(p.left, below, from, need) {
            return Some(k);
        }
        if p.val + acc >= need {
            return Some(p.key);
        }
        self.first_at_least(p.right, below, from, need)
    }

    /// The leftmost point with a key in `[from, to)` whose amount is below `need`.
    fn first_below(&self, n: u32, acc: i64, from: u64, to: u64, need: i64) -> Option<u64> {
        if n == NIL {
            return None;
        }
        let p = &self.points[n as usize];
        if p.min + acc >= need {
            return None;
        }
        let below = acc + p.add;
        if p.key < from {
            return self.first_below(p.right, below, from, to, need);
        }
        if p.key >= to {
            return self.first_below(p.left, below, from, to, need);
        }
        if let Some(k) = self.first_below(p.left, below, from, to, need) {
            return Some(k);
        }
        if p.val + acc < need {
            return Some(p.key);
        }
        self.first_below(p.right, below, from, to, need)
    }

    /// The least amount at points with a key in `[from, to)`.
    fn min_in(&self, n: u32, acc: i64, from: u64, to: u64) -> i64 {
        // Walk down to the split, then each side's boundary path: O(log S).
        let mut best = i64::MAX;
        let (mut n, mut acc) = (n, acc);
        while n != NIL {
            let p = &self.points[n as usize];
            let below = acc + p.add;
            if p.key < from {
                n = p.right;
                acc = below;
            } else if p.key >= to {
                n = p.left;
                acc = below;
            } else {
                best = best.min(p.val + acc);
                best = best.min(self.min_from(p.left, below, from));
                best = best.min(self.min_to(p.right, below, to));
                break;
            }
        }
        best
    }

    /// The least amount at points with a key at or after `from`.
    fn min_from(&self, mut n: u32, mut acc: i64, from: u64) -> i64 {
        let mut best = i64::MAX;
        while n != NIL {
            let p = &self.points[n as usize];
            let below = acc + p.add;
            if p.key >= from {
                best = best.min(p.val + acc);
                if p.right != NIL {
                    best = best.min(self.points[p.right as usize].min + below);
                }
                n = p.left;
            } else {
                n = p.right;
            }
            acc = below;
        }
        best
    }

    /// The least amount at points with a key before `to`.
    fn min_to(&self, mut n: u32, mut acc: i64, to: u64) -> i64 {
        let mut best = i64::MAX;
        while n != NIL {
            let p = &self.points[n as usize];
            let below = acc + p.add;
            if p.key < to {
                best = best.min(p.val + acc);
                if p.left != NIL {
                    best = best.min(self.points[p.left as usize].min + below);
                }
                n = p.right;
            } else {
                n = p.left;
            }
            acc = below;
        }
        best
    }

    fn point(&mut self, k: u64, val: i64) -> u32 {
        self.rng ^= self.rng << 13;
        self.rng ^= self.rng >> 7;
        self.rng ^= self.rng << 17;
        let p = Point {
            key: k,
            val,
            add: 0,
            min: val,
            max: val,
            prio: self.rng as u32,
            refs: 0,
            left: NIL,
            right: NIL,
        };
        match self.unused.pop() {
            Some(i) => {
                self.points[i as usize] = p;
                i
            }
            None => {
                self.points.push(p);
                (self.points.len() - 1) as u32
            }
        }
    }

    /// The amount at the last point of subtree `n`.
    fn last_value(&mut self, mut n: u32) -> i64 {
        let mut v = self.total;
        while n != NIL {
            self.push(n);
            let p = &self.points[n as usize];
            v = p.val;
            n = p.right;
        }
        v
    }

    fn range_add(&mut self, from: u64, to: u64, delta: i64) {
        let (a, b) = self.split(self.root, from);
        let (m, c) = self.split(b, to);
        self.apply(m, delta);
        let ab = self.merge(a, m);
        self.root = self.merge(ab, c);
    }

    fn apply(&mut self, n: u32, d: i64) {
        if n == NIL {
            return;
        }
        let p = &mut self.points[n as usize];
        p.val += d;
        p.add += d;
        p.min += d;
        p.max += d;
    }

    fn push(&mut self, n: u32) {
        let p = &mut self.points[n as usize];
        let d = std::mem::take(&mut p.add);
        if d != 0 {
            let (l, r) = (p.left, p.right);
            self.apply(l, d);
            self.apply(r, d);
        }
    }

    fn pull(&mut self, n: u32) {
        let p = &self.points[n as usize];
        let (mut lo, mut hi) = (p.val, p.val);
        for c in [p.left, p.right] {
            if c != NIL {
                let q = &self.points[c as usize];
                lo = lo.min(q.min);
                hi = hi.max(q.max);
            }
        }
        let p = &mut self.points[n as usize];
        p.min = lo;
        p.max = hi;
    }

    /// Split `n` into keys below `k` and keys at or after it.
    fn split(&mut self, n: u32, k: u64) -> (u32, u32) {
        if n == NIL {
            return (NIL, NIL);
        }
        self.push(n);
        if self.points[n as usize].key < k {
            let (a, b) = self.split(self.points[n as usize].right, k);
            self.points[n as usize].right = a;
            self.pull(n);
            (n, b)
        } else {
            let (a, b) = self.split(self.points[n as usize].left, k);
            self.points[n as usize].left = b;
            self.pull(n);
            (a, n)
        }
    }

    /// Join `a` and `b`, every key of `a` below every key of `b`.
    fn merge(&mut self, a: u32, b: u32) -> u32 {
        if a == NIL {
            return b;
        }
        if b == NIL {
            return a;
        }
        if self.points[a as usize].prio > self.points[b as usize].prio {
            self.push(a);
            let r = self.merge(self.points[a as usize].right, b);
            self.points[a as usize].right = r;
            self.pull(a);
            a
        } else {
            self.push(b);
            let l = self.merge(a, self.points[b as usize].left);
            self.points[b as usize].left = l;
            self.pull(b);
            b
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The same questions answered by looking at every span.
    struct Naive {
        total: i64,
        spans: Vec<(f64, f64, i64)>,
    }

    impl Naive {
        fn free_at(&self, t: f64) -> i64 {
            self.total
                - self
                    .spans
                    .iter()
                    .filter(|(s, e, _)| *s <= t && t < *e)
                    .map(|(_, _, a)| a)
                    .sum::<i64>()
        }
        fn fits(&self, t: f64, d: f64, need: i64) -> bool {
            let mut times: Vec<f64> = vec![t];
            for (s, e, _) in &self.spans {
                for x in [*s, *e] {
                    if x > t && x < t + d {
                        times.push(x);
                    }
                }
            }
            times.iter().all(|x| self.free_at(*x) >= need)
        }
        fn earliest(&self, now: f64, d: f64, need: i64) -> Option<f64> {
            let mut cands = vec![now];
            for (s, e, _) in &self.spans {
                for x in [*s, *e] {
                    if x > now && x.is_finite() {
                        cands.push(x);
                    }
                }
            }
            cands.sort_by(f64::total_cmp);
            cands.into_iter().find(|t| self.fits(*t, d, need))
        }
    }

    #[test]
    fn spans_take_and_give_back() {
        let mut p = Profile::new(10);
        let a = p.take(0.0, 100.0, 4);
        let b = p.take(50.0, f64::INFINITY, 3);
        assert_eq!(p.free_at(0.0), 6);
        assert_eq!(p.free_at(60.0), 3);
        assert_eq!(p.free_at(100.0), 7);
        assert_eq!(p.free_at(1e12), 7);
        assert_eq!(p.earliest(0.0, 10.0, 6), Some(0.0));
        assert_eq!(p.earliest(0.0, 60.0, 6), Some(100.0));
        assert_eq!(p.earliest(0.0, 10.0, 8), None, "3 are held for good");
        p.give_back(b);
        assert_eq!(p.earliest(0.0, 10.0, 8), Some(100.0));
        p.give_back(a);
        assert_eq!(p.free_at(60.0), 10);
        assert_eq!(p.points(), 1, "only the origin is left");
        p.grow(-2);
        assert_eq!(p.free_at(5.0), 8);
        assert_eq!(p.earliest(0.0, 1.0, 9), None);
    }

    #[test]
    fn a_gap_too_short_is_passed_over() {
        let mut p = Profile::new(4);
        p.take(0.0, 10.0, 4);
        p.take(20.0, 30.0, 4);
        assert_eq!(p.earliest(0.0, 5.0, 1), Some(10.0));
        assert_eq!(p.earliest(0.0, 15.0, 1), Some(30.0));
        assert_eq!(p.min_over(5.0, 25.0), 0);
        assert_eq!(p.min_over(10.0, 20.0), 4);
    }

    #[test]
    fn random_spans_answer_as_a_scan_does() {
        let mut seed = 7u64;
        let mut next = move |m: u64| {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) % m
        };
        for _ in 0..30 {
            let mut p = Profile::new(16);
            let mut naive = Naive {
                total: 16,
                spans: Vec::new(),
            };
            let mut ids = Vec::new();
            for _ in 0..60 {
                if next(4) == 0 && !ids.is_empty() {
                    let i = next(ids.len() as u64) as usize;
                    let (id, span) = ids.swap_remove(i);
                    p.give_back(id);
                    let j = naive.spans.iter().position(|s| *s == span).unwrap();
                    naive.spans.swap_remove(j);
                } else {
                    let s = next(50) as f64;
                    let e = if next(8) == 0 {
                        f64::INFINITY
                    } else {
                        s + 1.0 + next(30) as f64
                    };
                    let a = 1 + next(6) as i64;
                    ids.push((p.take(s, e, a), (s, e, a)));
                    naive.spans.push((s, e, a));
                }
                for t in [0.0, 3.0, 17.5, 40.0, 90.0] {
                    assert_eq!(p.free_at(t), naive.free_at(t), "free at {t}");
                }
                let now = next(40) as f64;
                let d = 1.0 + next(25) as f64;
                let need = 1 + next(16) as i64;
                assert_eq!(
                    p.earliest(now, d, need),
                    naive.earliest(now, d, need),
                    "earliest({now}, {d}, {need})"
                );
            }
        }
    }
}
