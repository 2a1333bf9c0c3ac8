//! A job's queue of control requests (kill, exception, expiration,
//! shutdown), which never makes its sender wait.
//!
//! The queue is bounded and its reader is the job's driver, which may be
//! busy (opening files, waiting on a full response channel). A sender must
//! not wait for it: one session carries every job of a node, so a wait for
//! one job would stall them all. When the queue is full one more request
//! is kept aside and delivered as soon as there is room; a request like the
//! one kept aside (the same signal, another fatal exception, a newer
//! expiration) is merged into it; anything else is refused, and the caller
//! told to retry ([`QueueFull`]).

use std::sync::{Arc, Mutex};

use tokio::sync::mpsc;

use super::Control;

/// The job's control queue is full and already holds a different request
/// aside.
#[derive(Debug, Clone, Copy, thiserror::Error)]
#[error("{0} control requests are already waiting for this job")]
pub struct QueueFull(pub usize);

/// The sending end of a job's control queue.
#[derive(Debug)]
pub struct ControlQueue {
    tx: mpsc::Sender<Control>,
    /// The one request waiting for room, if any.
    aside: Arc<Mutex<Option<Control>>>,
    capacity: usize,
}

impl ControlQueue {
    /// A queue of `capacity` requests; its receiving end.
    pub fn new(capacity: usize) -> (ControlQueue, mpsc::Receiver<Control>) {
        let (tx, rx) = mpsc::channel(capacity);
        let queue = ControlQueue {
            tx,
            aside: Arc::new(Mutex::new(None)),
            capacity,
        };
        (queue, rx)
    }

    /// Queue `c` without waiting. `Ok(false)` when the job has ended.
    pub fn send(&self, c: Control) -> Result<bool, QueueFull> {
        let mut aside = self.aside.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(kept) = aside.as_mut() {
            // Behind the one kept aside, to keep the order.
            return match merge(kept, c) {
                Ok(()) => Ok(true),
                Err(c @ (Control::Shutdown(_) | Control::Fence(_))) => {
                    self.deliver_later(c);
                    Ok(true)
                }
                Err(_) => Err(QueueFull(self.capacity)),
            };
        }
        match self.tx.try_send(c) {
            Ok(()) => Ok(true),
            Err(mpsc::error::TrySendError::Closed(_)) => Ok(false),
            Err(mpsc::error::TrySendError::Full(c)) => {
                *aside = Some(c);
                drop(aside);
                self.deliver_aside();
                Ok(true)
            }
        }
    }

    /// Move the request kept aside into the queue once there is room (the
    /// newest version of it, if merged meanwhile).
    fn deliver_aside(&self) {
        let tx = self.tx.clone();
        let aside = Arc::clone(&self.aside);
        tokio::spawn(async move {
            let permit = tx.reserve().await;
            let kept = aside.lock().unwrap_or_else(|e| e.into_inner()).take();
            if let (Ok(permit), Some(c)) = (permit, kept) {
                permit.send(c);
            }
        });
    }

    /// A shutdown or a fence is never refused: it waits for room on its
    /// own (once per job, as the service stops or fences once).
    fn deliver_later(&self, c: Control) {
        let tx = self.tx.clone();
        tokio::spawn(async move {
            let _ = tx.send(c).await;
        });
    }
}

/// Merge `new` into `kept` when it asks for nothing more; else give it back.
fn merge(kept: &mut Control, new: Control) -> Result<(), Control> {
    match (kept, new) {
        (Control::Signal(a), Control::Signal(b)) if *a == b => Ok(()),
        // One fatal exception ends the job; a second changes nothing.
        (Control::Exception { severity: 0, .. }, Control::Exception { severity: 0, .. }) => Ok(()),
        (Control::Expiration(a), Control::Expiration(b)) => {
            *a = b;
            Ok(())
        }
        (Control::Shutdown(_), Control::Shutdown(_)) => Ok(()),
        (Control::Fence(_), Control::Fence(_)) => Ok(()),
        (_, new) => Err(new),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fatal(note: &str) -> Control {
        Control::Exception {
            kind: "cancel".into(),
            severity: 0,
            note: note.into(),
        }
    }

    #[tokio::test]
    async fn a_full_queue_never_waits_and_merges_repeats() {
        let (q, mut rx) = ControlQueue::new(2);
        assert!(q.send(Control::Signal(15)).unwrap());
        assert!(q.send(Control::Signal(15)).unwrap());
        // Full: one kept aside, its repeats merged into it, however many.
        for _ in 0..1000 {
            assert!(q.send(Control::Signal(9)).unwrap());
        }
        let e = q.send(Control::Signal(2)).unwrap_err();
        assert!(e.to_string().contains("2 control requests"), "{e}");
        assert!(q.send(Control::Shutdown("stop".into())).unwrap());
        let mut got = Vec::new();
        while got.len() < 4 {
            got.push(rx.recv().await.unwrap());
        }
        assert_eq!(
            got[..3],
            [Control::Signal(15), Control::Signal(15), Control::Signal(9)]
        );
        assert_eq!(got[3], Control::Shutdown("stop".into()));
        // Room again: requests go straight in.
        assert!(q.send(Control::Signal(2)).unwrap());
        assert_eq!(rx.recv().await.unwrap(), Control::Signal(2));
    }

    #[tokio::test]
    async fn fatal_exceptions_and_expirations_merge() {
        let (q, mut rx) = ControlQueue::new(1);
        q.send(Control::Expiration(1.0)).unwrap();
        q.send(Control::Expiration(2.0)).unwrap();
        q.send(Control::Expiration(3.0)).unwrap();
        assert_eq!(rx.recv().await.unwrap(), Control::Expiration(1.0));
        assert_eq!(rx.recv().await.unwrap(), Control::Expiration(3.0));
        q.send(fatal("a")).unwrap();
        q.send(fatal("b")).unwrap();
        q.send(fatal("c")).unwrap();
        assert!(q.send(Control::Signal(1)).is_err());
        assert_eq!(rx.recv().await.unwrap(), fatal("a"));
        assert_eq!(rx.recv().await.unwrap(), fatal("b"));
    }

    /// Random interleavings of kills, signals, exceptions, expirations and
    /// shutdowns on a few jobs whose drivers read at random moments (or have
    /// ended): no send waits, a refusal happens only with a request aside,
    /// and every queue drains.
    #[tokio::test(flavor = "multi_thread", worker_threads = 2)]
    async fn random_interleavings_never_stall() {
        let mut seed: u64 = 0x9e37_79b9_7f4a_7c15;
        let mut next = move |n: u64| {
            seed ^= seed << 13;
            seed ^= seed >> 7;
            seed ^= seed << 17;
            seed % n
        };
        let run = async {
            for _round in 0..50 {
                let mut jobs: Vec<(ControlQueue, Option<mpsc::Receiver<Control>>)> = (0..4)
                    .map(|_| {
                        let (q, rx) = ControlQueue::new(1 + next(8) as usize);
                        (q, Some(rx))
                    })
                    .collect();
                for _ in 0..2000 {
                    let j = next(jobs.len() as u64) as usize;
                    let c = match next(6) {
                        0 => Control::Signal(9),
                        1 => Control::Signal(1 + next(3) as i32),
                        2 => fatal("cancel"),
                        3 => Control::Exception {
                            kind: "x".into(),
                            severity: 1,
                            note: String::new(),
                        },
                        4 => Control::Expiration(next(100) as f64),
                        _ => Control::Shutdown("stop".into()),
                    };
                    let had_aside = jobs[j].0.aside.lock().unwrap().is_some();
                    if jobs[j].0.send(c).is_err() {
                        assert!(had_aside, "refused without a request aside");
                    }
                    match next(10) {
                        0 => jobs[j].1 = None,
                        1..=4 => {
                            if let Some(rx) = jobs[j].1.as_mut() {
                                let _ = rx.try_recv();
                            }
                        }
                        _ => {}
                    }
                    tokio::task::yield_now().await;
                }
                for (q, rx) in &mut jobs {
                    if let Some(rx) = rx {
                        while q.aside.lock().unwrap().is_some() || !rx.is_empty() {
                            let _ = rx.recv().await;
                        }
                    }
                }
            }
        };
        tokio::time::timeout(std::time::Duration::from_secs(60), run)
            .await
            .expect("the control queues stalled");
    }

    #[tokio::test]
    async fn an_ended_job_says_so() {
        let (q, rx) = ControlQueue::new(1);
        drop(rx);
        assert!(!q.send(Control::Signal(15)).unwrap());
    }
}
