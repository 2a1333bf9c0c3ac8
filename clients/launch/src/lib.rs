//! Starting a Fluxgate instance on this machine, one way for every caller
//! (`fluxgate start`, the in-job instance of `fluxgate batch`/`alloc`,
//! `fluxgate bench` and the integration tests).
//!
//! - [`JobManager`] and [`Exec`] say what a service is asked to be (state
//!   directory, listen address, nodelist, credentials, cores, extra `--set`)
//!   and write its command line; no caller spells a flag itself.
//! - [`Services`] runs them in one process group of their own, so a
//!   terminal's Ctrl-C reaches only the command that started them, and tears
//!   the group down as one: SIGTERM, then SIGKILL after a grace period, also
//!   when dropped, so every error path stops them.
//! - [`Launcher`] starts a job manager in a [`Services`] group and reads its
//!   URI (the first line of its standard output, printed once it serves),
//!   starts exec services joining it, and waits until a probe counts the
//!   nodes up ([`wait_ready`]).
//!
//! It lives beside the CLI, not in `fluxgate-os`: the services themselves
//! depend on that crate and must not carry a launcher, while the CLI and the
//! integration tests (which do not depend on the CLI) both need this one.
//! What keeps an instance private stays where it is: the services close
//! inherited descriptors and make their own files 0600; the logs made here
//! are 0600 in the 0700 state directory (`fluxgate_os::private`).

mod command;
mod group;
mod launcher;

pub use command::{Cores, Exec, JobManager, service_binary};
pub use group::{Services, log_file, log_tail};
pub use launcher::{LaunchError, Launcher, read_uri, wait_ready};
pub use tempfile::TempDir;
