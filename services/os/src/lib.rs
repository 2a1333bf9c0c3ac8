//! The operating-system edge the Fluxgate binaries share: descriptors
//! inherited from whoever started them, and files no other user may read.

pub mod fds;
pub mod private;
