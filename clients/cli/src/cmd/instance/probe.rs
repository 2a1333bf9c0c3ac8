//! What an instance reports about itself: for the `instance.*` fields of
//! a job running one, every job of every user counted by state (flux's
//! job-list stats) and its resources by state; for `top`, its start time
//! and resources.

use anyhow::Context;
use fluxgate_proto::v1 as pb;
use fluxgate_shared::job::StateMask;
use fluxgate_shared::rset::ResourceSet;

use crate::client::{self, Instance};
use fluxgate_jobfmt::instance::{InstanceInfo, Resources};
use fluxgate_jobfmt::stats::JobCounts;

/// The job counts and resources of the instance behind `inst`.
pub async fn instance_info(inst: &mut Instance) -> anyhow::Result<InstanceInfo> {
    Ok(InstanceInfo {
        resources: resources(inst).await?,
        stats: job_counts(inst).await?,
    })
}

/// Every job of every user of the instance, counted by state and result.
pub async fn job_counts(inst: &mut Instance) -> anyhow::Result<JobCounts> {
    let request = pb::ListRequest {
        states: StateMask::ALL.bits(),
        userid: None,
        ..Default::default()
    };
    let jobs = crate::cmd::jobs::list_all(inst, request).await?;
    Ok(JobCounts::count(&jobs))
}

/// The instance's resources by state, from `Resource.List`.
pub async fn resources(inst: &mut Instance) -> anyhow::Result<Resources> {
    let r = resource_sets(inst).await?;
    Ok(Resources::of(&r.all, &r.up, &r.down, &r.allocated))
}

/// The instance's R of each resource state.
#[derive(Debug)]
pub struct ResourceSets {
    /// Every resource it has.
    pub all: ResourceSet,
    /// Those up.
    pub up: ResourceSet,
    /// Those down.
    pub down: ResourceSet,
    /// Those allocated to jobs.
    pub allocated: ResourceSet,
}

/// The instance's R of each resource state, from `Resource.List`.
pub async fn resource_sets(inst: &mut Instance) -> anyhow::Result<ResourceSets> {
    let r = inst
        .resource
        .list(pb::ResourceListRequest {})
        .await
        .map_err(client::status_error)?
        .into_inner();
    let rset = |s: &str| -> anyhow::Result<ResourceSet> {
        if s.trim().is_empty() {
            return Ok(ResourceSet::new());
        }
        ResourceSet::parse(s).context("the instance sent an unreadable R")
    };
    Ok(ResourceSets {
        all: rset(&r.all)?,
        up: rset(&r.up)?,
        down: rset(&r.down)?,
        allocated: rset(&r.allocated)?,
    })
}

/// When the instance's job manager started (`starttime` in its status).
pub async fn started(inst: &mut Instance) -> Option<f64> {
    let status = inst
        .resource
        .status(pb::StatusRequest {})
        .await
        .ok()?
        .into_inner()
        .status;
    serde_json::from_str::<serde_json::Value>(&status)
        .ok()?
        .get("starttime")?
        .as_f64()
}
