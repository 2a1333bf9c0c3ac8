//! The job manager: job pipeline, scheduler, resource module and durable store.

pub mod store;
