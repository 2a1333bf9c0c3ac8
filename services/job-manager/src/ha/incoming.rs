//! One listener for a job manager's whole life: served first by the
//! standby's refusals, then by the leader's services, with no moment
//! where the port is closed; its connections under the `[limits]`
//! connection caps and timeouts (`fluxgate_setup::conns`).

/// Accepted connections of the shared listener, as a stream for tonic
/// (cloned for each server that serves it; the caps are shared).
pub type Incoming = fluxgate_setup::Guarded;
