//! Waiting for a condition with a deadline: the one way the tests poll,
//! so none asserts on how long something took.

use std::future::Future;
use std::process::{Child, ExitStatus};
use std::time::{Duration, Instant};

/// The pause before the second ask; each later pause doubles, up to [`MAX_PAUSE`].
const FIRST_PAUSE: Duration = Duration::from_millis(10);
/// The longest pause between two asks.
const MAX_PAUSE: Duration = Duration::from_millis(100);

/// Ask `probe` until it answers `Ok`, pausing between asks; after `within`,
/// fail the test with the last `Err` (what was seen instead).
pub async fn eventually<T>(within: Duration, probe: impl AsyncFnMut() -> Result<T, String>) -> T {
    match poll_until(within, probe).await {
        Ok(v) => v,
        Err(seen) => panic!("not within {within:?}: {seen}"),
    }
}

/// As [`eventually`], answering the last `Err` instead of failing the test.
pub async fn poll_until<T>(
    within: Duration,
    mut probe: impl AsyncFnMut() -> Result<T, String>,
) -> Result<T, String> {
    let deadline = Instant::now() + within;
    let mut pause = FIRST_PAUSE;
    loop {
        let seen = match probe().await {
            Ok(v) => return Ok(v),
            Err(seen) => seen,
        };
        if Instant::now() >= deadline {
            return Err(seen);
        }
        tokio::time::sleep(pause).await;
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

/// As [`eventually`], for tests without a runtime (the thread sleeps).
pub fn eventually_blocking<T>(within: Duration, probe: impl FnMut() -> Result<T, String>) -> T {
    match poll_until_blocking(within, probe) {
        Ok(v) => v,
        Err(seen) => panic!("not within {within:?}: {seen}"),
    }
}

/// As [`poll_until`], for tests without a runtime (the thread sleeps).
pub fn poll_until_blocking<T>(
    within: Duration,
    mut probe: impl FnMut() -> Result<T, String>,
) -> Result<T, String> {
    let deadline = Instant::now() + within;
    let mut pause = FIRST_PAUSE;
    loop {
        let seen = match probe() {
            Ok(v) => return Ok(v),
            Err(seen) => seen,
        };
        if Instant::now() >= deadline {
            return Err(seen);
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(MAX_PAUSE);
    }
}

/// The exit status of `child` once it exits; after `within` it is killed
/// and the test fails with `what`.
pub async fn exits_within(child: &mut Child, within: Duration, what: &str) -> ExitStatus {
    let exited = poll_until(within, async || exit_of(child)).await;
    exited.unwrap_or_else(|_| {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{what}: still running after {within:?}")
    })
}

/// As [`exits_within`], for tests without a runtime.
pub fn exits_within_blocking(child: &mut Child, within: Duration, what: &str) -> ExitStatus {
    let exited = poll_until_blocking(within, || exit_of(child));
    exited.unwrap_or_else(|_| {
        let _ = child.kill();
        let _ = child.wait();
        panic!("{what}: still running after {within:?}")
    })
}

fn exit_of(child: &mut Child) -> Result<ExitStatus, String> {
    match child.try_wait() {
        Ok(Some(status)) => Ok(status),
        Ok(None) => Err("running".into()),
        Err(e) => panic!("wait for pid {}: {e}", child.id()),
    }
}

/// Await `fut`, failing the test with `what` after `within`.
pub async fn within<T>(within: Duration, what: &str, fut: impl Future<Output = T>) -> T {
    tokio::time::timeout(within, fut)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within {within:?}"))
}
