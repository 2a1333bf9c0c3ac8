//! What containment costs a job on this machine, and how long the
//! whole-tree kill takes (run as root, on the machine's own cgroups):
//!
//! ```sh
//! cargo bench -p fluxgate-exec --bench contain            # 500 jobs, 1000 procs
//! cargo bench -p fluxgate-exec --bench contain -- 2000 1000
//! ```
//!
//! `jobs`: N jobs of one `true` task each, spawned and reaped the way the
//! exec service does, once without cgroups and once in a cgroup each
//! (made with a memory and CPU limit, the task born inside, then the end:
//! empty check, usage, OOM check, removal). Prints this process's CPU
//! (user + system, which is where the kernel's cgroup work is charged)
//! and wall time per job for both, and the difference.
//!
//! `kill`: a job of P sleeping processes (in several process groups and
//! sessions), then `kill_all`: the time until its cgroup is empty.

use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fluxgate_exec::cgroup::{Cgroups, Limits, Policy};
use fluxgate_shared::IdSet;

fn cpu_now() -> Duration {
    let u = nix::sys::resource::getrusage(nix::sys::resource::UsageWho::RUSAGE_SELF)
        .expect("getrusage");
    let tv = |t: nix::sys::time::TimeVal| {
        Duration::from_secs(t.tv_sec() as u64) + Duration::from_micros(t.tv_usec() as u64)
    };
    tv(u.user_time()) + tv(u.system_time())
}

fn spawn_true() -> std::process::Child {
    Command::new("/bin/true")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("spawn true")
}

/// CPU and wall time per job of `n` jobs run by `one`.
fn per_job(n: u32, mut one: impl FnMut(u64)) -> (f64, f64) {
    let (c0, t0) = (cpu_now(), Instant::now());
    for i in 0..n {
        one(u64::from(i));
    }
    let (cpu, wall) = (cpu_now() - c0, t0.elapsed());
    (
        cpu.as_secs_f64() * 1e3 / f64::from(n),
        wall.as_secs_f64() * 1e3 / f64::from(n),
    )
}

fn jobs(cgroups: &Cgroups, n: u32) {
    let limits = Limits {
        cpus: Some(IdSet::from_range(0, 0).to_string()),
        memory: Some(1 << 30),
        pids: None,
    };
    let (off_cpu, off_wall) = per_job(n, |_| {
        let mut child = spawn_true();
        child.wait().expect("wait");
    });
    let (on_cpu, on_wall) = per_job(n, |i| {
        let cg = cgroups
            .job(1_000_000 + i, &limits)
            .expect("make the job's cgroup")
            .expect("contained");
        let mut child = cg.spawn_inside(|| Ok(spawn_true())).expect("spawn inside");
        child.wait().expect("wait");
        cg.reaped();
        assert!(cg.is_empty());
        let _ = (cg.usage(), cg.oom());
        cg.retire().expect("retire");
    });
    println!(
        "jobs={n} mode={} off: cpu_ms_per_job={off_cpu:.3} wall_ms_per_job={off_wall:.3}",
        cgroups.mode()
    );
    println!(
        "jobs={n} mode={} on:  cpu_ms_per_job={on_cpu:.3} wall_ms_per_job={on_wall:.3}",
        cgroups.mode()
    );
    println!(
        "added: cpu_ms_per_job={:.3} wall_ms_per_job={:.3}",
        on_cpu - off_cpu,
        on_wall - off_wall
    );
}

fn kill(cgroups: &Cgroups, procs: u32) {
    let cg = cgroups
        .job(2_000_000, &Limits::default())
        .expect("make the job's cgroup")
        .expect("contained");
    // Groups of 100 sleepers, each in a session of its own (setsid), as a
    // job's processes that left its process groups would be.
    let script = "for i in $(seq 100); do sleep 600 & done; wait";
    let mut leaders = Vec::new();
    for _ in 0..procs.div_ceil(100) {
        let child = cg
            .spawn_inside(|| {
                Command::new("setsid")
                    .args(["sh", "-c", script])
                    .stdin(Stdio::null())
                    .stdout(Stdio::null())
                    .stderr(Stdio::null())
                    .spawn()
            })
            .expect("spawn inside");
        leaders.push(child);
    }
    let want = procs.div_ceil(100) as usize * 101;
    let until = Instant::now() + Duration::from_secs(60);
    while cg.procs().len() < want && Instant::now() < until {
        std::thread::sleep(Duration::from_millis(20));
    }
    let n = cg.procs().len();
    let t0 = Instant::now();
    let empty = cg.kill_all(Duration::from_secs(10));
    let took = t0.elapsed();
    for mut l in leaders {
        let _ = l.wait();
    }
    println!(
        "kill: procs={n} empty={empty} ms_to_empty={:.1}",
        took.as_secs_f64() * 1e3
    );
    cg.remove().expect("remove");
}

fn main() {
    // `cargo bench` passes --bench; numbers are ours.
    let nums: Vec<u32> = std::env::args()
        .skip(1)
        .filter_map(|a| a.parse().ok())
        .collect();
    let n = nums.first().copied().unwrap_or(500);
    let procs = nums.get(1).copied().unwrap_or(1000);
    let cgroups = Cgroups::init(Policy::default(), 1);
    if cgroups.mode() == "off" {
        eprintln!("no cgroups here: {:?}", cgroups.off_reason());
        return;
    }
    jobs(&cgroups, n);
    kill(&cgroups, procs);
}
