//! `fluxgate.v1.JobManager`: tonic's one `impl` of the service, each RPC a
//! call into the module of its family (submit, control, info, list, watch,
//! tasks, journal, queue), where the work and its refusals are.

use fluxgate_proto::v1 as pb;
use fluxgate_proto::v1::job_manager_server::JobManager;
use tonic::{Request, Response, Status};

pub use super::job_service::JobManagerService;
use super::{control, info, job_journal, list, queue, submit, tasks, watch};
use crate::store::Store;

#[tonic::async_trait]
impl<S: Store> JobManager for JobManagerService<S> {
    async fn submit(
        &self,
        request: Request<pb::SubmitRequest>,
    ) -> Result<Response<pb::SubmitResponse>, Status> {
        submit::one(self, request).await
    }

    async fn submit_many(
        &self,
        request: Request<pb::SubmitManyRequest>,
    ) -> Result<Response<pb::SubmitManyResponse>, Status> {
        submit::many(self, request).await
    }

    async fn cancel(
        &self,
        request: Request<pb::CancelRequest>,
    ) -> Result<Response<pb::CancelResponse>, Status> {
        control::cancel(self, request).await
    }

    async fn raise_exception(
        &self,
        request: Request<pb::RaiseExceptionRequest>,
    ) -> Result<Response<pb::RaiseExceptionResponse>, Status> {
        control::raise_exception(self, request).await
    }

    async fn kill(
        &self,
        request: Request<pb::KillRequest>,
    ) -> Result<Response<pb::KillResponse>, Status> {
        control::kill(self, request).await
    }

    async fn update(
        &self,
        request: Request<pb::UpdateRequest>,
    ) -> Result<Response<pb::UpdateResponse>, Status> {
        control::update(self, request).await
    }

    async fn set_urgency(
        &self,
        request: Request<pb::SetUrgencyRequest>,
    ) -> Result<Response<pb::SetUrgencyResponse>, Status> {
        control::set_urgency(self, request).await
    }

    async fn memo(
        &self,
        request: Request<pb::MemoRequest>,
    ) -> Result<Response<pb::MemoResponse>, Status> {
        control::memo(self, request).await
    }

    async fn info(
        &self,
        request: Request<pb::InfoRequest>,
    ) -> Result<Response<pb::InfoResponse>, Status> {
        info::info(self, request).await
    }

    async fn list(
        &self,
        request: Request<pb::ListRequest>,
    ) -> Result<Response<pb::ListResponse>, Status> {
        list::list(self, request).await
    }

    async fn wait(
        &self,
        request: Request<pb::WaitRequest>,
    ) -> Result<Response<pb::WaitResponse>, Status> {
        watch::wait(self, request).await
    }

    type WatchEventlogStream = watch::LineStream;

    async fn watch_eventlog(
        &self,
        request: Request<pb::WatchEventlogRequest>,
    ) -> Result<Response<Self::WatchEventlogStream>, Status> {
        watch::watch_eventlog(self, request).await
    }

    async fn tasks(
        &self,
        request: Request<pb::TasksRequest>,
    ) -> Result<Response<pb::TasksResponse>, Status> {
        tasks::tasks(self, request).await
    }

    async fn input(
        &self,
        request: Request<tonic::Streaming<pb::InputRequest>>,
    ) -> Result<Response<pb::InputResponse>, Status> {
        tasks::input(self, request).await
    }

    type JournalStream = job_journal::EntryStream;

    async fn journal(
        &self,
        request: Request<pb::JobJournalRequest>,
    ) -> Result<Response<Self::JournalStream>, Status> {
        job_journal::open(self, request)
    }

    async fn purge(
        &self,
        request: Request<pb::PurgeRequest>,
    ) -> Result<Response<pb::PurgeResponse>, Status> {
        control::purge(self, request).await
    }

    async fn queue(
        &self,
        request: Request<pb::QueueRequest>,
    ) -> Result<Response<pb::QueueResponse>, Status> {
        queue::queue(self, request).await
    }

    async fn accounting(
        &self,
        request: Request<pb::AccountingRequest>,
    ) -> Result<Response<pb::AccountingResponse>, Status> {
        queue::accounting(self, request).await
    }
}
