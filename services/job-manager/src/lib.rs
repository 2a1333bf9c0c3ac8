//! The job manager: job pipeline, scheduler, resource module and durable store.

pub mod auth;
pub mod clock;
pub mod config;
pub mod core;
pub mod error;
pub mod exec_client;
pub mod exec_link;
pub mod grpc;
pub mod ha;
pub mod hub;
pub mod journal;
pub mod live;
pub mod otlp;
pub mod policy;
pub mod serve_error;
pub mod server;
mod stop;
pub mod store;
pub mod telemetry;
pub mod values;
