//! The formats flux-pstree(1) names: the `-d NAME` details columns and the
//! default labels (flux-core `flux-pstree.py`'s `DETAILS_FORMAT` and
//! `LABEL_FORMAT`). The `instance.*` fields are those of jobs that run
//! an instance, empty for other jobs.

/// The `-d` names, in the order `--help` lists them.
pub const DETAIL_NAMES: [&str; 4] = ["default", "resources", "progress", "stats"];

/// The details format `-d name` selects.
pub fn details(name: &str) -> Option<&'static str> {
    Some(match name {
        // Also -x.
        "default" => {
            "{id.f58:>12} {username:<8.8} {status_abbrev:>2.2} {ntasks:>6h} \
             {nnodes:>6h} {runtime!F:>8h}"
        }
        // Nodes, cores and GPUs of each instance: all, then allocated.
        "resources" => {
            "{id.f58:>12} \
             {instance.resources.all.nnodes:>5} \
             {instance.resources.allocated.nnodes:>5} \
             {instance.resources.all.ncores:>5} \
             {instance.resources.allocated.ncores:>5} \
             {instance.resources.all.ngpus:>5} \
             {instance.resources.allocated.ngpus:>5}"
        }
        // Jobs of each instance, the share of them done, and the share of
        // its cores and GPUs in use.
        "progress" => {
            "{id.f58:>12} {ntasks:>6h} {instance.stats.total:>6} \
             {instance.progress!P:>5} {instance.utilization!P:>5} \
             {instance.gpu_utilization!P:>5} {runtime!H:>10}"
        }
        // Each instance's job counts by state.
        "stats" => "{id.f58:>12} {instance.stats:^25} {runtime!H:>10}",
        _ => return None,
    })
}

/// Leaf labels: `{name}`, with the status under `-a`.
pub fn leaf_label(all: bool) -> &'static str {
    if all {
        "{name}:{status_abbrev}"
    } else {
        "{name}"
    }
}

/// Labels of jobs that run an instance: `{name}`, with or without `-a`.
pub const PARENT_LABEL: &str = "{name}";

#[cfg(test)]
mod tests {
    use super::*;
    use fluxgate_jobfmt::instance::{InstanceInfo, ResourceCounts, Resources};
    use fluxgate_jobfmt::stats::JobCounts;
    use fluxgate_jobfmt::{Ctx, JobRecord, Template, record};
    use fluxgate_proto::v1 as pb;

    fn header(name: &str) -> String {
        let fmt = details(name).unwrap_or_default();
        Template::parse(fmt, record::heading)
            .expect("parses")
            .header()
    }

    #[test]
    fn headers_read_as_flux_pstree() {
        assert_eq!(
            header("default"),
            "       JOBID USER     ST NTASKS NNODES  RUNTIME"
        );
        assert_eq!(
            header("resources"),
            "       JOBID NODES  USED CORES  USED  GPUS  USED"
        );
        assert_eq!(
            header("progress"),
            "       JOBID NTASKS  NJOBS  PROG CORE%  GPU%    RUNTIME"
        );
        assert_eq!(
            header("stats"),
            "       JOBID           STATS              RUNTIME"
        );
        for n in DETAIL_NAMES {
            assert!(details(n).is_some(), "{n}");
        }
        assert_eq!(details("nosuch"), None);
    }

    /// A job running for 135 s; an instance with 4 of 8 jobs done and 3 of
    /// its 8 cores on 1 of its 2 nodes in use, and no GPUs.
    fn job(instance: bool) -> JobRecord {
        let t0 = 1_700_000_000.0;
        let j = pb::JobSummary {
            id: 1,
            name: "flux".into(),
            state: "RUN".into(),
            ntasks: 2,
            nnodes: 2,
            t_run: t0,
            ..Default::default()
        };
        let rec = JobRecord::new(j, "alice".into(), "f2".into(), t0 + 135.0);
        if !instance {
            return rec;
        }
        let counts = |nnodes, ncores| ResourceCounts {
            nnodes,
            ncores,
            ..Default::default()
        };
        rec.with_instance(InstanceInfo {
            stats: JobCounts {
                sched: 1,
                run: 3,
                inactive: 4,
                total: 8,
                successful: 3,
                canceled: 1,
                ..Default::default()
            },
            resources: Resources {
                all: counts(2, 8),
                allocated: counts(1, 3),
                ..Default::default()
            },
        })
    }

    fn row(name: &str, instance: bool) -> String {
        let fmt = details(name).unwrap_or_default();
        let t = Template::parse(fmt, record::heading).expect("parses");
        t.render(&job(instance), &Ctx::new(jiff::tz::TimeZone::UTC))
            .expect("renders")
    }

    #[test]
    fn instance_columns_are_filled_for_instances_only() {
        assert_eq!(
            row("progress", true),
            "          f2      2      8   50% 37.5%          0:02:15"
        );
        assert_eq!(
            row("progress", false),
            "          f2      2                             0:02:15"
        );
        assert_eq!(
            row("stats", true),
            "          f2     PD:1 R:3 CD:3 F:1        0:02:15"
        );
        assert_eq!(
            row("stats", false),
            "          f2                              0:02:15"
        );
        assert_eq!(
            row("resources", true),
            "          f2     2     1     8     3     0     0"
        );
        assert_eq!(
            row("resources", false),
            "          f2                                    "
        );
    }
}
