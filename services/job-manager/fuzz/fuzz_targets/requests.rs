//! Everything a client can send to the job manager: any bytes as the body of
//! any of its RPCs (JobManager, Resource, Node), sent over gRPC to one real
//! job manager serving in this process. The server must answer each with a
//! status or a stream and stay up; a panic anywhere in it aborts the run.
//!
//! The first byte picks the RPC; with its high bit set the rest is sent as
//! the text of field 1 (the jobspec, the drain targets, ...) so that the
//! fuzzer reaches the handlers quickly, otherwise as the raw message.
#![no_main]

use std::sync::OnceLock;
use std::time::Duration;

use bytes::{Buf, BufMut};
use libfuzzer_sys::fuzz_target;
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::codegen::http::uri::PathAndQuery;
use tonic::transport::Channel;

const RPCS: &[(&str, Kind)] = &[
    ("/fluxgate.v1.JobManager/Submit", Kind::Unary),
    ("/fluxgate.v1.JobManager/SubmitMany", Kind::Unary),
    ("/fluxgate.v1.JobManager/Cancel", Kind::Unary),
    ("/fluxgate.v1.JobManager/RaiseException", Kind::Unary),
    ("/fluxgate.v1.JobManager/Kill", Kind::Unary),
    ("/fluxgate.v1.JobManager/SetUrgency", Kind::Unary),
    ("/fluxgate.v1.JobManager/Memo", Kind::Unary),
    ("/fluxgate.v1.JobManager/Info", Kind::Unary),
    ("/fluxgate.v1.JobManager/List", Kind::Unary),
    ("/fluxgate.v1.JobManager/Wait", Kind::Unary),
    ("/fluxgate.v1.JobManager/WatchEventlog", Kind::ServerStream),
    ("/fluxgate.v1.JobManager/Queue", Kind::Unary),
    ("/fluxgate.v1.JobManager/Purge", Kind::Unary),
    ("/fluxgate.v1.JobManager/Update", Kind::Unary),
    ("/fluxgate.v1.Resource/Acquire", Kind::ServerStream),
    ("/fluxgate.v1.Resource/Journal", Kind::ServerStream),
    ("/fluxgate.v1.Resource/Eventlog", Kind::ServerStream),
    ("/fluxgate.v1.Resource/Drain", Kind::Unary),
    ("/fluxgate.v1.Resource/Undrain", Kind::Unary),
    ("/fluxgate.v1.Resource/Status", Kind::Unary),
    ("/fluxgate.v1.Resource/List", Kind::Unary),
    ("/fluxgate.v1.Resource/Update", Kind::Unary),
    ("/fluxgate.v1.Resource/Property", Kind::Unary),
    ("/fluxgate.v1.Resource/Reload", Kind::Unary),
    ("/fluxgate.v1.Node/Join", Kind::Bidi),
];

#[derive(Clone, Copy)]
enum Kind {
    Unary,
    ServerStream,
    Bidi,
}

/// Sends bodies as given and takes replies as bytes: the server does all decoding.
#[derive(Clone, Default)]
struct RawCodec;

struct RawEncoder;
struct RawDecoder;

impl Codec for RawCodec {
    type Encode = Vec<u8>;
    type Decode = Vec<u8>;
    type Encoder = RawEncoder;
    type Decoder = RawDecoder;
    fn encoder(&mut self) -> RawEncoder {
        RawEncoder
    }
    fn decoder(&mut self) -> RawDecoder {
        RawDecoder
    }
}

impl Encoder for RawEncoder {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn encode(&mut self, item: Vec<u8>, buf: &mut EncodeBuf<'_>) -> Result<(), tonic::Status> {
        buf.put_slice(&item);
        Ok(())
    }
}

impl Decoder for RawDecoder {
    type Item = Vec<u8>;
    type Error = tonic::Status;
    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<Vec<u8>>, tonic::Status> {
        let v = buf.chunk().to_vec();
        buf.advance(v.len());
        Ok(Some(v))
    }
}

struct Harness {
    runtime: tokio::runtime::Runtime,
    channel: Channel,
    _statedir: tempfile::TempDir,
}

fn harness() -> &'static Harness {
    static H: OnceLock<Harness> = OnceLock::new();
    H.get_or_init(|| {
        // libFuzzer's C++ main does not set SIGPIPE to ignored as a Rust
        // binary's runtime does, so a write to a connection the other end
        // closed would kill the run where the real job manager gets EPIPE.
        #[allow(unsafe_code)]
        // SAFETY: no other thread exists yet, and SIG_IGN installs no handler code.
        unsafe {
            let _ = nix::sys::signal::signal(
                nix::sys::signal::Signal::SIGPIPE,
                nix::sys::signal::SigHandler::SigIgn,
            );
        }
        // A panic on any server thread is a finding, not a recovered task.
        std::panic::set_hook(Box::new(|info| {
            eprintln!("{info}");
            std::process::abort();
        }));
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("runtime");
        let statedir = tempfile::tempdir().expect("tempdir");
        let mut config = fluxgate_job_manager::config::Config::default();
        config.listen = "127.0.0.1:0".into();
        config.statedir = statedir.path().to_path_buf();
        config.resource.nodelist = Some("node[0-3]".into());
        let (tx, rx) = std::sync::mpsc::channel();
        runtime.spawn(async move {
            let served =
                fluxgate_job_manager::server::serve(config, std::future::pending(), move |addr| {
                    let _ = tx.send(addr);
                })
                .await;
            eprintln!("job manager stopped: {served:?}");
            std::process::abort();
        });
        let addr = rx.recv().expect("job manager address");
        let channel = runtime
            .block_on(
                tonic::transport::Endpoint::from_shared(format!("http://{addr}"))
                    .expect("uri")
                    .connect(),
            )
            .expect("connect");
        Harness {
            runtime,
            channel,
            _statedir: statedir,
        }
    })
}

/// `text` as field 1 (length-delimited) of a message.
fn as_field1(text: &[u8]) -> Vec<u8> {
    let s = String::from_utf8_lossy(text);
    let mut out = vec![0x0a];
    let mut n = s.len();
    while n >= 0x80 {
        out.push((n as u8) | 0x80);
        n >>= 7;
    }
    out.push(n as u8);
    out.extend_from_slice(s.as_bytes());
    out
}

async fn call(channel: Channel, path: &'static str, kind: Kind, body: Vec<u8>) {
    let mut grpc = tonic::client::Grpc::new(channel);
    if grpc.ready().await.is_err() {
        return;
    }
    let path = PathAndQuery::from_static(path);
    match kind {
        Kind::Unary => {
            let _ = grpc.unary(tonic::Request::new(body), path, RawCodec).await;
        }
        Kind::ServerStream => {
            if let Ok(r) = grpc
                .server_streaming(tonic::Request::new(body), path, RawCodec)
                .await
            {
                let mut s = r.into_inner();
                for _ in 0..8 {
                    if !matches!(s.message().await, Ok(Some(_))) {
                        break;
                    }
                }
            }
        }
        Kind::Bidi => {
            let input = tokio_stream::iter(vec![body]);
            if let Ok(r) = grpc
                .streaming(tonic::Request::new(input), path, RawCodec)
                .await
            {
                let _ = r.into_inner().message().await;
            }
        }
    }
}

fuzz_target!(|data: &[u8]| {
    let Some((&first, rest)) = data.split_first() else {
        return;
    };
    let h = harness();
    let (path, kind) = RPCS[usize::from(first & 0x7f) % RPCS.len()];
    let body = if first & 0x80 != 0 {
        as_field1(rest)
    } else {
        rest.to_vec()
    };
    let channel = h.channel.clone();
    // Calls that legitimately wait (Wait on a pending job, a follower) are
    // cut off; the server must still answer the next one.
    h.runtime.block_on(async move {
        let _ =
            tokio::time::timeout(Duration::from_millis(200), call(channel, path, kind, body)).await;
    });
});
