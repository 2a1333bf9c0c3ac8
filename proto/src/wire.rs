//! HTTP/2 settings both services use on every connection, client and server.

/// Connection-level flow-control window, in bytes (HTTP/2's default is 64 KiB).
///
/// One connection carries the start streams of every job on an exec
/// service, each a few small messages. h2 bounds how many small DATA frames
/// a peer may leave unread to half this window, then ends the connection
/// (GOAWAY ENHANCE_YOUR_CALM, "too_many_data_frames") with every stream on
/// it. With the default, a burst of a few hundred job starts or ends that
/// the other side had not read yet was enough; with this, some tens of
/// thousands are.
pub const CONNECTION_WINDOW: u32 = 16 << 20;
