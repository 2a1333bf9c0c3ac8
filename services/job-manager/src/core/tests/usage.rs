//! What a job used, as its exec services report with `finish`: kept in the
//! store per node, its total in listings, through a restart.

use fluxgate_shared::job::StateMask;
use fluxgate_shared::job::usage::{self, JobUsage};

use super::*;

fn used() -> JobUsage {
    let node = |ranks: &str, user: f64, max_rss| usage::NodeUsage {
        ranks: ranks.into(),
        hostname: format!("node{ranks}"),
        user,
        system: 0.5,
        max_rss,
    };
    JobUsage::new(vec![node("1", 2.0, 3 << 20), node("0", 1.0, 1 << 20)])
}

fn listed(b: &Bench, id: JobId) -> JobInfo {
    b.core
        .list(&ListFilter {
            states: Some(StateMask::ALL),
            ..ListFilter::default()
        })
        .into_iter()
        .find(|j| j.id == id)
        .expect("listed")
}

async fn finish_with(b: &mut Bench, id: JobId, usage: Option<JobUsage>) {
    b.exec(ExecMsg::Started { id }).await;
    b.exec(ExecMsg::Finish {
        id,
        status: 0,
        usage,
    })
    .await;
}

#[tokio::test]
async fn usage_is_stored_per_node_listed_in_total_and_kept_across_a_restart() {
    let store = Arc::new(MemoryStore::new());
    let (ended, cleaning) = {
        let mut b = Bench::over(Arc::clone(&store), 2, config(), true).await;
        let ended = b.submit(ONE).await;
        finish_with(&mut b, ended, Some(used())).await;
        assert_eq!(listed(&b, ended).usage, Some(used().total));
        b.exec(ExecMsg::Release {
            id: ended,
            ranks: "all".into(),
            last: true,
        })
        .await;
        assert_eq!(b.inactive(ended).usage, Some(used().total));
        // Finished, not yet released when the job manager stops.
        let cleaning = b.submit(ONE).await;
        finish_with(&mut b, cleaning, Some(used())).await;
        (ended, cleaning)
    };
    let stored = crate::core::usage::stored(&*store, ended).unwrap().unwrap();
    assert_eq!(stored, used());
    assert_eq!(stored.nodes[0].hostname, "node0");
    assert_eq!(stored.total.cpu_time(), 4.0);
    // Not an eventlog: nothing of it in the exec eventlog.
    let exec = store.read_log(ended.into(), Log::Exec).unwrap();
    assert!(
        exec.unwrap_or_default()
            .iter()
            .all(|l| !l.contains("max_rss")),
        "usage leaked into the exec eventlog"
    );

    let b = Bench::over(store, 2, config(), false).await;
    assert_eq!(b.inactive(ended).usage, Some(used().total));
    let rows = crate::core::list::stored_inactive(
        &*b.store,
        &ListFilter {
            states: Some(StateMask::ALL),
            ..ListFilter::default()
        },
    )
    .unwrap();
    let row = rows
        .iter()
        .find(|r| r.id == ended)
        .expect("listed from the store");
    assert_eq!(row.usage, Some(used().total));
    // A job in cleanup at the restart ends then, with what it used.
    assert_eq!(b.inactive(cleaning).usage, Some(used().total));
}

#[tokio::test]
async fn a_job_whose_nodes_do_not_contain_it_has_no_usage() {
    let store = Arc::new(MemoryStore::new());
    let mut b = Bench::over(Arc::clone(&store), 1, config(), true).await;
    let id = b.submit(ONE).await;
    finish_with(&mut b, id, None).await;
    assert_eq!(listed(&b, id).usage, None);
    assert_eq!(crate::core::usage::stored(&*store, id).unwrap(), None);
}
