//! Instances: one started on this machine (`start`), ones inside jobs
//! (`batch`, `alloc`, `proxy`, `uri` and the hidden `instance`, in
//! [`nested`]), what an instance reports of itself ([`probe`]), its
//! users' tokens (`token`) and its services' health (`health`).

pub mod health;
pub mod nested;
pub mod probe;
pub mod start;
pub mod token;
