//! One listener for a job manager's whole life: served first by the
//! standby's refusals, then by the leader's services, with no moment
//! where the port is closed.

use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::net::{TcpListener, TcpStream};

/// Accepted connections of a shared listener, as a stream for tonic.
#[derive(Debug, Clone)]
pub struct Incoming(pub Arc<TcpListener>);

impl tokio_stream::Stream for Incoming {
    type Item = std::io::Result<TcpStream>;

    fn poll_next(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        match self.0.poll_accept(cx) {
            Poll::Ready(Ok((stream, _))) => {
                // Small replies must not wait for Nagle's algorithm.
                let _ = stream.set_nodelay(true);
                Poll::Ready(Some(Ok(stream)))
            }
            Poll::Ready(Err(e)) => Poll::Ready(Some(Err(e))),
            Poll::Pending => Poll::Pending,
        }
    }
}
