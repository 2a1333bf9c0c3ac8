//! CPU time a local instance spent on a run, per job: the job manager's,
//! the exec services' own, and their tasks' (children they reaped), read
//! from /proc before and after. On a shared machine a rate moves with what
//! else runs; the CPU a job costs moves far less, so it is what compares
//! two builds.

/// CPU seconds of an instance's processes, summed since they started.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct CpuTimes {
    /// The job manager's user and system time.
    pub job_manager: f64,
    /// The exec services' own user and system time.
    pub exec: f64,
    /// User and system time of the tasks the exec services reaped.
    pub tasks: f64,
}

/// Milliseconds of CPU per job over a run.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct CpuPerJob {
    /// The job manager's.
    pub job_manager: f64,
    /// The exec services' own.
    pub exec: f64,
    /// The tasks'.
    pub tasks: f64,
}

impl CpuTimes {
    /// Read the job manager `jm` and the exec services `execs`; `None` when
    /// one of them cannot be read (gone, or no /proc).
    pub fn read(jm: u32, execs: &[u32]) -> Option<CpuTimes> {
        let tick = clock_tick()?;
        let (job_manager, _) = stat_of(jm, tick)?;
        let mut times = CpuTimes {
            job_manager,
            ..CpuTimes::default()
        };
        for pid in execs {
            let (own, children) = stat_of(*pid, tick)?;
            times.exec += own;
            times.tasks += children;
        }
        Some(times)
    }

    /// What was spent from `before` to `self`, per job of `jobs`.
    pub fn per_job_since(self, before: CpuTimes, jobs: u64) -> Option<CpuPerJob> {
        if jobs == 0 {
            return None;
        }
        let ms = |after: f64, before: f64| (after - before).max(0.0) * 1000.0 / jobs as f64;
        Some(CpuPerJob {
            job_manager: ms(self.job_manager, before.job_manager),
            exec: ms(self.exec, before.exec),
            tasks: ms(self.tasks, before.tasks),
        })
    }
}

impl CpuPerJob {
    /// All three together.
    pub fn total(&self) -> f64 {
        self.job_manager + self.exec + self.tasks
    }
}

/// Seconds per clock tick, the unit of /proc/PID/stat's times.
fn clock_tick() -> Option<f64> {
    let hz = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK).ok()??;
    (hz > 0).then(|| 1.0 / hz as f64)
}

/// CPU seconds (user + system) process `pid` has used itself.
pub fn own_seconds(pid: u32) -> Option<f64> {
    stat_of(pid, clock_tick()?).map(|(own, _)| own)
}

fn stat_of(pid: u32, tick: f64) -> Option<(f64, f64)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text, tick)
}

/// A process's own CPU seconds (utime + stime) and its reaped children's
/// (cutime + cstime) from the text of /proc/PID/stat.
fn parse_stat(text: &str, tick: f64) -> Option<(f64, f64)> {
    // The command name is in parentheses and may hold spaces or ')': the
    // fields that follow start after the last ')'. utime is the 14th field,
    // the 12th after the name.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let field = |n: usize| fields.get(n)?.parse::<u64>().ok();
    let own = field(11)? + field(12)?;
    let children = field(13)? + field(14)?;
    Some((own as f64 * tick, children as f64 * tick))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stat_times_are_read_after_the_name() {
        // A name with a space and a ')' must not shift the fields.
        let text = "1234 (odd) name) S 1 1234 1234 0 -1 4194560 100 0 0 0 \
                    250 50 30 20 20 0 4 0 12345 100000 200 18446744073709551615";
        let (own, children) = parse_stat(text, 0.01).expect("parsed");
        assert!((own - 3.0).abs() < 1e-9, "{own}");
        assert!((children - 0.5).abs() < 1e-9, "{children}");
        assert_eq!(parse_stat("1234 (x) S 1", 0.01), None);
    }

    #[test]
    fn this_process_can_be_read() {
        let me = std::process::id();
        let t = CpuTimes::read(me, &[me]).expect("own /proc/PID/stat");
        // Read twice, the second time no earlier than the first.
        assert!(t.job_manager >= 0.0 && t.exec >= t.job_manager, "{t:?}");
    }

    #[test]
    fn per_job_is_the_difference_over_the_jobs() {
        let before = CpuTimes {
            job_manager: 1.0,
            exec: 2.0,
            tasks: 3.0,
        };
        let after = CpuTimes {
            job_manager: 1.5,
            exec: 2.4,
            tasks: 3.6,
        };
        let p = after.per_job_since(before, 1000).expect("jobs");
        assert!((p.job_manager - 0.5).abs() < 1e-9);
        assert!((p.exec - 0.4).abs() < 1e-9);
        assert!((p.tasks - 0.6).abs() < 1e-9);
        assert!((p.total() - 1.5).abs() < 1e-9);
        assert_eq!(after.per_job_since(before, 0), None);
    }
}
