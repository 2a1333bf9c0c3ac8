//! How many long-lived streams (WatchEventlog, which `attach` and `--follow`
//! use, and the job journal) each user may hold open at once.
//!
//! Each open stream costs the job manager a task, a buffer and a hub
//! subscription; without a cap one guest's thousands of followers grow it
//! without bound. The instance owner and exec services are not counted.
//! A stream past the cap is refused with RESOURCE_EXHAUSTED naming the
//! limit; the count drops when the stream ends or its caller goes away.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use fluxgate_shared::auth::{Caller, Role};

use crate::error::Error;

/// Open streams per user, against `limits.max_streams_per_user`.
#[derive(Debug, Default)]
pub struct StreamCaps {
    max: usize,
    open: Mutex<HashMap<u32, usize>>,
}

/// One open stream of a user, counted until dropped.
#[derive(Debug)]
pub struct StreamPermit {
    caps: Option<(Arc<StreamCaps>, u32)>,
}

impl StreamCaps {
    /// At most `max` streams per user (0: no limit).
    pub fn new(max: usize) -> Arc<StreamCaps> {
        Arc::new(StreamCaps {
            max,
            open: Mutex::default(),
        })
    }

    /// Count one more stream of `caller`, or refuse it.
    pub fn open(self: &Arc<Self>, caller: &Caller) -> Result<StreamPermit, Error> {
        if self.max == 0 || matches!(caller.role, Role::Owner | Role::Node) {
            return Ok(StreamPermit { caps: None });
        }
        let mut open = self.lock();
        let n = open.entry(caller.uid).or_default();
        if *n >= self.max {
            return Err(Error::Exhausted(format!(
                "user {} (uid {}) has {} streams open, the limit \
                 (limits.max_streams_per_user); end one first",
                caller.user, caller.uid, self.max
            )));
        }
        *n += 1;
        Ok(StreamPermit {
            caps: Some((Arc::clone(self), caller.uid)),
        })
    }

    /// Streams `uid` holds open now.
    pub fn open_by(&self, uid: u32) -> usize {
        self.lock().get(&uid).copied().unwrap_or(0)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<u32, usize>> {
        self.open.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl Drop for StreamPermit {
    fn drop(&mut self) {
        if let Some((caps, uid)) = self.caps.take() {
            let mut open = caps.lock();
            if let Some(n) = open.get_mut(&uid) {
                *n = n.saturating_sub(1);
                if *n == 0 {
                    open.remove(&uid);
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn guest(uid: u32) -> Caller {
        Caller {
            user: format!("u{uid}"),
            uid,
            role: Role::Guest,
        }
    }

    #[test]
    fn a_user_past_the_cap_is_refused_until_one_ends() {
        let caps = StreamCaps::new(2);
        let a = caps.open(&guest(7)).unwrap();
        let _b = caps.open(&guest(7)).unwrap();
        let e: tonic::Status = caps.open(&guest(7)).unwrap_err().into();
        assert_eq!(e.code(), tonic::Code::ResourceExhausted);
        assert!(e.message().contains("limits.max_streams_per_user"), "{e:?}");
        // Others are not held back, nor the owner.
        let _c = caps.open(&guest(8)).unwrap();
        for _ in 0..10 {
            std::mem::forget(caps.open(&Caller::owner(0)).unwrap());
        }
        drop(a);
        assert_eq!(caps.open_by(7), 1);
        let _d = caps.open(&guest(7)).unwrap();
    }
}
