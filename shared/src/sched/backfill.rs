//! EASY backfill (Mu'alem and Feitelson, 2001) over the real pool.
//!
//! When the job at the head of the queue cannot start, it gets a
//! reservation: the earliest time (the shadow time) at which it fits, found
//! by returning the resources of running jobs to a copy of the pool in the
//! order their time limits end, and the resources it would get then. A job
//! behind it may start now only if that cannot delay the reservation: it
//! ends by the shadow time, or it leaves alone the reserved resources that
//! are free now (the rest of the reservation is held by jobs that end by
//! then). Placement is the pool's own, so constraints, exclusivity and GPUs
//! hold exactly; a job without a time limit is never backfilled, and one
//! running without a limit never frees anything in the reckoning.
//!
//! Pure: no clock (the time is an argument), no I/O.

use crate::rset::{AllocError, AllocRequest, Pool, ResourceSet};

/// Where and when the head of the queue will start.
#[derive(Debug, Clone, PartialEq)]
pub struct Reservation {
    /// The shadow time: when it fits at the latest, as the time limits say.
    pub start: f64,
    /// The resources it would get then.
    pub r: ResourceSet,
    /// The part of `r` free now: what a job running past `start` must not take.
    pub free_now: ResourceSet,
}

/// The reservation of a job asking `req` that does not fit now, given the
/// running jobs with a time limit as `(end, R)` sorted by end; `None` when
/// it does not fit even once they have all ended.
pub fn reserve(
    pool: &Pool,
    ending: &[(f64, &ResourceSet)],
    req: &AllocRequest,
    now: f64,
) -> Option<Reservation> {
    let mut later = pool.clone();
    let free_now = pool.available();
    let need = u64::from(req.nslots) * u64::from(req.cores_per_slot);
    let mut i = 0;
    while i < ending.len() {
        // Every job ending at the same time frees at once.
        let t = ending[i].0;
        while i < ending.len() && ending[i].0 <= t {
            // A job's resources are in the pool it came from; an error here
            // (a rank gone from the inventory) frees what remains.
            let _ = later.free_tolerant(ending[i].1);
            i += 1;
        }
        // Not enough cores yet: no placement to try.
        if later.avail_cores() < need {
            continue;
        }
        if let Some(r) = place(&mut later, &free_now, req) {
            let free_now = pool.free_part(&r);
            return Some(Reservation {
                start: t.max(now),
                r,
                free_now,
            });
        }
    }
    None
}

/// Place the head in `later` (the pool once running jobs have ended),
/// preferring what those jobs give back to what is free now (`free_now`): every
/// resource free now that the reservation leaves alone is one more a long
/// job may take at once. When the released resources are not enough, the
/// pool's own first fit decides.
fn place(later: &mut Pool, free_now: &ResourceSet, req: &AllocRequest) -> Option<ResourceSet> {
    if later.mark_allocated(free_now).is_ok() {
        let released_only = later.alloc(req);
        let _ = later.free(free_now);
        if let Ok(r) = released_only {
            return Some(r);
        }
    }
    later.alloc(req).ok()
}

/// Start a job asking `req` now if it cannot delay `rsv`: it ends at `end`
/// (`None`: it has no time limit, and is not backfilled). The pool is left
/// as it was unless resources are granted.
pub fn backfill(
    pool: &mut Pool,
    req: &AllocRequest,
    end: Option<f64>,
    rsv: &Reservation,
) -> Result<ResourceSet, AllocError> {
    let Some(end) = end else {
        return Err(AllocError::Busy);
    };
    if end <= rsv.start {
        return pool.alloc(req);
    }
    // Fence off the reserved resources that are free now, try, and give
    // them back: what was granted cannot overlap them.
    if pool.mark_allocated(&rsv.free_now).is_err() {
        return Err(AllocError::Busy);
    }
    let got = pool.alloc(req);
    if let Err(e) = pool.free(&rsv.free_now) {
        debug_assert!(false, "the fence could not be lifted: {e}");
    }
    got
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::IdSet;
    use crate::rset::Node;

    fn pool(nodes: u32) -> Pool {
        Pool::new(
            ResourceSet::from_nodes((0..nodes).map(|r| {
                Node::new(
                    r,
                    Some(&format!("n{r}")),
                    IdSet::from_range(0, 3),
                    IdSet::new(),
                )
            }))
            .unwrap(),
        )
    }

    fn whole(n: u32) -> AllocRequest {
        let mut r = AllocRequest::slots(n, 4);
        r.nnodes = n;
        r.exclusive = true;
        r
    }

    #[test]
    fn the_head_is_reserved_when_enough_running_jobs_end() {
        let mut p = pool(4);
        let a = p.alloc(&whole(3)).unwrap(); // ends at 100
        let b = p.alloc(&whole(1)).unwrap(); // ends at 50
        let ending = [(50.0, &b), (100.0, &a)];
        assert!(reserve(&p, &ending[..1], &whole(4), 0.0).is_none());
        let rsv = reserve(&p, &ending, &whole(4), 0.0).unwrap();
        assert_eq!(rsv.start, 100.0);
        assert_eq!(rsv.r.ranks(), IdSet::from_range(0, 3));
        assert!(rsv.free_now.nodes().is_empty(), "nothing free now");
        // Two nodes are enough once b ends.
        let rsv = reserve(&p, &ending, &whole(1), 0.0).unwrap();
        assert_eq!(rsv.start, 50.0);
    }

    #[test]
    fn a_short_job_backfills_and_a_long_one_does_not() {
        let mut p = pool(4);
        let a = p.alloc(&whole(3)).unwrap(); // nodes 0-2 until 100
        let ending = [(100.0, &a)];
        let rsv = reserve(&p, &ending, &whole(4), 10.0).unwrap();
        assert_eq!(rsv.start, 100.0);
        assert_eq!(rsv.free_now.ranks(), IdSet::from_range(3, 3));
        // Ends by the shadow time: may use the free node.
        let short = backfill(&mut p, &whole(1), Some(60.0), &rsv).unwrap();
        assert_eq!(short.ranks(), IdSet::from_range(3, 3));
        p.free(&short).unwrap();
        // Runs past it, and the only free node is reserved: waits.
        assert!(matches!(
            backfill(&mut p, &whole(1), Some(500.0), &rsv),
            Err(AllocError::Busy)
        ));
        // No time limit: never backfilled.
        assert!(matches!(
            backfill(&mut p, &whole(1), None, &rsv),
            Err(AllocError::Busy)
        ));
        // The fence was lifted: the node is free again.
        assert_eq!(p.alloc(&whole(1)).unwrap().ranks(), IdSet::from_range(3, 3));
    }

    #[test]
    fn the_reservation_takes_what_running_jobs_give_back_before_free_nodes() {
        let mut p = pool(4);
        let first = p.alloc(&whole(1)).unwrap(); // node 0, free again below
        let rest = p.alloc(&whole(3)).unwrap(); // nodes 1-3 until 100
        p.free(&first).unwrap();
        let ending = [(100.0, &rest)];
        // At 100 nodes 0-3 are free; first fit would pick 0-2 and fence the
        // free node 0. Preferring what the job gives back leaves node 0 to a
        // long job at once, as counting free nodes (EASY's extra nodes) does.
        let rsv = reserve(&p, &ending, &whole(3), 0.0).unwrap();
        assert_eq!(rsv.r.ranks(), IdSet::from_range(1, 3));
        assert!(rsv.free_now.nodes().is_empty());
        let long = backfill(&mut p, &whole(1), Some(1000.0), &rsv).unwrap();
        assert_eq!(long.ranks(), IdSet::from_range(0, 0));
    }

    #[test]
    fn a_long_job_may_use_what_the_reservation_leaves() {
        let mut p = pool(4);
        let a = p.alloc(&whole(2)).unwrap(); // nodes 0-1 until 100
        let ending = [(100.0, &a)];
        // The head needs 3 nodes: 0-2 at 100, so node 3 is spare.
        let rsv = reserve(&p, &ending, &whole(3), 0.0).unwrap();
        assert_eq!(rsv.r.ranks(), IdSet::from_range(0, 2));
        let long = backfill(&mut p, &whole(1), Some(1000.0), &rsv).unwrap();
        assert_eq!(long.ranks(), IdSet::from_range(3, 3));
        // Node 2 is reserved: a second long job waits.
        assert!(backfill(&mut p, &whole(1), Some(1000.0), &rsv).is_err());
    }
}
