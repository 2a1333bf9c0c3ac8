//! Live output: what an interactive terminal shows (`pty.interactive`
//! without `pty.capture`), which goes to the job's watchers and is never
//! stored, as flux's shell leaves it out of the output eventlog.
//!
//! Such a line reaches the watchers following the job's live output when
//! it comes. While nobody follows it, the job's terminal output is held
//! here, a bounded tail, as flux's pty holds it for the client it waits
//! for: `fluxgate run` (whose watch may open after the task has spoken)
//! and an attach after a detach see what the terminal showed meanwhile.
//! Once the job is inactive nothing of it is left: a late `job attach`
//! sees none of it.
//!
//! Each line is numbered as it is published, so that a watcher that took
//! the held lines skips them when the broadcast brings them again.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use fluxgate_shared::JobId;

/// Bytes of a job's live output held while nobody follows it; older lines
/// go first (the newest are what the terminal shows now).
pub const LIVE_HELD_BYTES: usize = 64 * 1024;

/// Jobs whose live output is held at once: with [`LIVE_HELD_BYTES`] this
/// bounds what terminals nobody watches cost the service (16 MiB).
pub const LIVE_HELD_JOBS: usize = 256;

/// One line of live output, numbered in publishing order.
pub type LiveLine = (u64, Arc<str>);

/// Who follows each job's live output, and what is held for those who do not yet.
#[derive(Debug, Default)]
pub struct LiveOutput {
    next: u64,
    followers: HashMap<JobId, usize>,
    held: HashMap<JobId, Held>,
}

#[derive(Debug, Default)]
struct Held {
    lines: VecDeque<LiveLine>,
    bytes: usize,
}

impl LiveOutput {
    /// Number job `id`'s `line`, holding it when nobody follows the job.
    pub fn publish(&mut self, id: JobId, line: Arc<str>) -> u64 {
        let n = self.next;
        self.next += 1;
        if self.followers.contains_key(&id) {
            return n;
        }
        if !self.held.contains_key(&id) && self.held.len() >= LIVE_HELD_JOBS {
            return n;
        }
        let held = self.held.entry(id).or_default();
        held.bytes += line.len();
        held.lines.push_back((n, line));
        while held.bytes > LIVE_HELD_BYTES {
            match held.lines.pop_front() {
                Some((_, old)) => held.bytes -= old.len(),
                None => break,
            }
        }
        n
    }

    /// One more follower of job `id`: what was held for it, in order.
    pub fn follow(&mut self, id: JobId) -> Vec<LiveLine> {
        *self.followers.entry(id).or_default() += 1;
        self.held
            .remove(&id)
            .map(|h| h.lines.into())
            .unwrap_or_default()
    }

    /// One follower of job `id` fewer.
    pub fn unfollow(&mut self, id: JobId) {
        if let Some(n) = self.followers.get_mut(&id) {
            *n -= 1;
            if *n == 0 {
                self.followers.remove(&id);
            }
        }
    }

    /// Job `id` is inactive: nothing of its live output is kept.
    pub fn forget(&mut self, id: JobId) {
        self.held.remove(&id);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(lines: &[LiveLine]) -> Vec<&str> {
        lines.iter().map(|(_, l)| &**l).collect()
    }

    #[test]
    fn lines_are_held_only_while_nobody_follows() {
        let mut live = LiveOutput::default();
        let (a, b) = (JobId::from(1u64), JobId::from(2u64));
        live.publish(a, "one".into());
        live.publish(b, "other".into());
        live.publish(a, "two".into());
        let got = live.follow(a);
        assert_eq!(texts(&got), ["one", "two"]);
        assert!(got[0].0 < got[1].0);
        // Followed: shown, not held; a second follower gets nothing old.
        live.publish(a, "three".into());
        assert!(live.follow(a).is_empty());
        live.unfollow(a);
        live.unfollow(a);
        // Nobody follows again: held for the next one.
        live.publish(a, "four".into());
        assert_eq!(texts(&live.follow(a)), ["four"]);
        // An inactive job's held lines go.
        live.forget(b);
        assert!(live.follow(b).is_empty());
    }

    #[test]
    fn what_is_held_is_bounded() {
        let mut live = LiveOutput::default();
        let id = JobId::from(1u64);
        let line: Arc<str> = "x".repeat(1000).into();
        for _ in 0..1000 {
            live.publish(id, Arc::clone(&line));
        }
        let got = live.follow(id);
        assert_eq!(got.len(), LIVE_HELD_BYTES / 1000);
        // The newest are kept.
        assert_eq!(got.last().map(|l| l.0), Some(999));
        let mut live = LiveOutput::default();
        for j in 0..(LIVE_HELD_JOBS as u64 + 10) {
            live.publish(JobId::from(j + 1), "x".into());
        }
        assert_eq!(live.held.len(), LIVE_HELD_JOBS);
    }
}
