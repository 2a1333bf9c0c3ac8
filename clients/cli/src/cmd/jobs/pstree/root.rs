//! The enclosing instance as the root of the tree, when it is shown: as
//! flux-pstree does for an instance that is not a job, it is labelled and
//! detailed as a running job named `.` whose ids all print `.`, with as
//! many tasks and nodes as the instance has nodes, running since the
//! instance started, and with its own `instance.*` fields.

use fluxgate_proto::v1 as pb;

use crate::client::{self, Instance};
use crate::cmd::instance::probe;
use fluxgate_jobfmt::instance::InstanceInfo;
use fluxgate_jobfmt::pyfmt::Value;
use fluxgate_jobfmt::{JobRecord, Record};

/// The enclosing instance's record: a job record whose id prints `.` in
/// every encoding.
#[derive(Debug)]
pub struct RootRecord(pub JobRecord);

impl Record for RootRecord {
    fn field(&self, name: &str) -> Value {
        if name == "id" || name.starts_with("id.") {
            return Value::Str(".".into());
        }
        self.0.field(name)
    }
}

/// The enclosing instance behind `inst` as a job, and, when `with_instance`,
/// what it reports for the `instance.*` fields (none if it cannot say).
pub async fn read(
    inst: &mut Instance,
    with_instance: bool,
) -> (pb::JobSummary, Option<InstanceInfo>) {
    let resources = probe::resources(inst).await.ok();
    let (nodes, nodelist) = resources
        .as_ref()
        .map(|r| (r.all.nnodes, r.all.nodelist.clone()))
        .unwrap_or_default();
    let nodes = u32::try_from(nodes).unwrap_or(u32::MAX);
    let uri = client::uri().unwrap_or_default();
    let job = pb::JobSummary {
        id: 0,
        userid: client::my_uid(),
        name: ".".into(),
        state: "RUN".into(),
        ntasks: nodes,
        nnodes: nodes,
        nodelist,
        t_run: probe::started(inst).await.unwrap_or(0.0),
        annotations: serde_json::json!({ "user": { "uri": uri } }).to_string(),
        ..Default::default()
    };
    let info = match (with_instance, resources) {
        (true, Some(resources)) => probe::job_counts(inst)
            .await
            .ok()
            .map(|stats| InstanceInfo { stats, resources }),
        _ => None,
    };
    (job, info)
}
