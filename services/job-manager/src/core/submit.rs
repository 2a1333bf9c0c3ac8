//! Submission: a validated jobspec becomes a job with `submit`, any
//! `dependency-add`, and `validate` (the order flux-core writes them).

use std::sync::Arc;

use fluxgate_shared::job::Job;
use fluxgate_shared::rset::job_expiration;
use fluxgate_shared::{JobId, Jobspec};
use serde_json::Value;

use super::depend::NewDep;
use super::output::OutputBudget;
use super::{Active, Core, Spec};
use crate::clock;
use crate::error::Error;
use crate::store::{Store, Write};
use crate::values::Urgency;

/// One job to submit, parsed and validated at the edge.
#[derive(Debug, Clone)]
pub struct SubmitArgs {
    /// The validated jobspec.
    pub jobspec: Arc<Jobspec>,
    /// Its JSON text as stored.
    pub jobspec_json: String,
    /// Checked at the edge.
    pub urgency: Urgency,
    /// FLUX_JOB_* flags mask.
    pub flags: i64,
    /// The submitting user.
    pub userid: u32,
    /// The stored jobs its dependencies name, read at the edge.
    pub antecedents: super::depend::Antecedents,
    /// The submitter's idempotency key: a second submit with it answers
    /// the job the first made.
    pub key: Option<String>,
    /// The stored job that already carries `key`, read at the edge.
    pub prior: Option<JobId>,
}

impl<S: Store> Core<S> {
    pub(super) fn submit(&mut self, args: SubmitArgs) -> Result<JobId, Error> {
        // A retried submit (after a lost answer or a failover) is the same
        // job: stored already, or still on its way to the store.
        if let Some(id) = args.prior {
            return Ok(id);
        }
        if let Some(key) = &args.key
            && let Some(id) = self.keys.get(args.userid, key)
        {
            return Ok(id);
        }
        let deps = self.admit(&args)?;
        let id = self
            .ids
            .next(self.fluid_now())
            .map_err(|e| Error::Unavailable(format!("cannot issue a job id: {e}")))?;
        let _span = tracing::info_span!("submit", job = %id).entered();
        self.create(id, args, deps);
        Ok(id)
    }

    /// Refuse `args` unless the queue, the user's and bank's limits, the
    /// output limit, the instance's expiration and its dependencies let it
    /// in; its dependencies when they do.
    fn admit(&self, args: &SubmitArgs) -> Result<Vec<NewDep>, Error> {
        // The queue is named by now (the edge filled in the default).
        self.queues.accepts(args.jobspec.queue())?;
        // Counted in memory as jobs enter and leave, so this costs O(1).
        let limit = self
            .config
            .policy
            .limits
            .max_active_jobs(args.userid, self.config.owner_uid);
        self.user_jobs.admit(args.userid, limit)?;
        // Per user and bank: max_active_jobs, and a job larger than max_nodes.
        let bank = args.jobspec.system().bank.clone().or_else(|| {
            let acct = self.site.accounting.as_ref()?;
            Some(acct.bank_of(args.userid, None).to_string()).filter(|b| !b.is_empty())
        });
        self.admit_submission(args.userid, bank.as_deref(), args.jobspec.nnodes())?;
        // flux's shell refuses a bad `output.limit` when the job starts;
        // here it is refused before anything is stored.
        super::output::job_limit(&args.jobspec)?;
        // flux-core's duration validator: inside an instance that expires, a
        // job whose time limit reaches past the expiration is refused here.
        let duration = args.jobspec.duration();
        if duration > 0.0
            && let Some(end) = self.instance_expiration()
            && let Err(e) = job_expiration(clock::now(), duration, Some(end))
        {
            return Err(Error::Invalid(e.to_string()));
        }
        // Dependencies are checked before anything is stored, so a refused job
        // leaves no trace.
        self.resolve_dependencies(&args.jobspec, &args.antecedents, args.userid)
    }

    /// Make job `id` of `args`: store it, post `submit`, its dependencies
    /// and `validate`.
    fn create(&mut self, id: JobId, args: SubmitArgs, deps: Vec<NewDep>) {
        self.out.writes.push(Write::NewJob {
            id: id.into(),
            userid: args.userid,
            jobspec: args.jobspec_json,
        });
        if let Some(key) = args.key {
            self.out.writes.push(Write::IdempotencyKey {
                id: id.into(),
                key: key.clone(),
            });
            self.keys.insert(args.userid, key, id);
        }
        self.jobs.insert(
            id,
            Box::new(Active {
                t_estimate: None,
                memo_logged: 0,
                usage: None,
                job: Job::new(),
                spec: Spec::of(&args.jobspec),
                r: None,
                seq: [0; 3],
                t_run: None,
                nodelist: String::new(),
                prolog_done: false,
                epilog_done: false,
                alloc_nnodes: None,
                output: OutputBudget::for_job(self.config.output.limit, &args.jobspec),
            }),
        );
        self.user_jobs.added(args.userid);
        self.post(
            id,
            "submit",
            Self::context([
                ("userid", Value::from(args.userid)),
                ("urgency", Value::from(args.urgency.get())),
                ("flags", Value::from(args.flags)),
                ("version", Value::from(1)),
            ]),
        );
        // Counted once `submit` has given the job its owner.
        self.policy_job_added(id);
        for dep in deps {
            self.add_dependency(id, dep);
        }
        // Counted after its own dependency, as flux's job.new follows the
        // dependency callbacks.
        let name = args.jobspec.system().job_name.as_deref();
        if let Some(next) = self.singletons.added(id, args.userid, name) {
            self.release_singleton(next);
        }
        self.post(id, "validate", None);
        metrics::counter!(crate::telemetry::SUBMITTED).increment(1);
    }
}
