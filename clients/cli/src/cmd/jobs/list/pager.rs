//! The one job-list pager: every job a `List` request matches, following
//! the listing's pages (each reply is bounded in bytes and says where the
//! next one starts).

use fluxgate_proto::v1 as pb;

use crate::client;

/// Every job `request` matches, following the listing's pages.
pub async fn list_all(
    inst: &mut client::Instance,
    request: pb::ListRequest,
) -> anyhow::Result<Vec<pb::JobSummary>> {
    list_pages(inst, request, usize::MAX).await
}

/// The jobs `request` matches on at most `max_pages` pages.
pub async fn list_pages(
    inst: &mut client::Instance,
    mut request: pb::ListRequest,
    max_pages: usize,
) -> anyhow::Result<Vec<pb::JobSummary>> {
    let mut jobs = Vec::new();
    for _ in 0..max_pages {
        let page = inst
            .jobs
            .list(request.clone())
            .await
            .map_err(client::status_error)?
            .into_inner();
        let got = u32::try_from(page.jobs.len()).unwrap_or(u32::MAX);
        jobs.extend(page.jobs);
        // A server that does not page answers 0; so does the last page.
        if page.next == 0 || (request.before != 0 && page.next >= request.before) {
            break;
        }
        if request.max_entries > 0 {
            if got >= request.max_entries {
                break;
            }
            request.max_entries -= got;
        }
        request.before = page.next;
    }
    Ok(jobs)
}
