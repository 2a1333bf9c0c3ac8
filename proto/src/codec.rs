//! The protobuf codec of every fluxgate service and client: prost's, except
//! that a message that cannot be decoded (a string field that is not UTF-8,
//! a truncated field) is the sender's error, INVALID_ARGUMENT, not INTERNAL,
//! and that each stream's buffers start small.

use std::marker::PhantomData;

use prost::Message;
use tonic::Status;
use tonic::codec::{BufferSettings, DecodeBuf, Decoder};
use tonic_prost::{ProstDecoder, ProstEncoder};

/// Bytes each stream's encode and decode buffers start with (tonic's 8 KiB
/// each, allocated up front, were a quarter of what a job manager held per
/// joined node). Almost every message is far smaller; a larger one grows
/// its buffer as it goes.
const BUFFER_START: usize = 512;
/// Bytes encoded before a stream's buffer is handed to the connection
/// (tonic's own figure).
const YIELD_THRESHOLD: usize = 32 * 1024;

fn buffers() -> BufferSettings {
    BufferSettings::new(BUFFER_START, YIELD_THRESHOLD)
}

/// A prost codec whose decode errors are INVALID_ARGUMENT.
#[derive(Debug, Clone)]
pub struct Codec<T, U>(PhantomData<(T, U)>);

impl<T, U> Default for Codec<T, U> {
    fn default() -> Self {
        Codec(PhantomData)
    }
}

impl<T, U> tonic::codec::Codec for Codec<T, U>
where
    T: Message + Send + 'static,
    U: Message + Default + Send + 'static,
{
    type Encode = T;
    type Decode = U;
    type Encoder = ProstEncoder<T>;
    type Decoder = StrictDecoder<U>;

    fn encoder(&mut self) -> Self::Encoder {
        ProstEncoder::new(buffers())
    }

    fn decoder(&mut self) -> Self::Decoder {
        StrictDecoder(tonic_prost::ProstCodec::<T, U>::raw_decoder(buffers()))
    }
}

/// Prost's decoder with the status of its errors changed.
#[derive(Debug, Clone)]
pub struct StrictDecoder<U>(ProstDecoder<U>);

impl<U: Message + Default> Decoder for StrictDecoder<U> {
    type Item = U;
    type Error = Status;

    fn decode(&mut self, buf: &mut DecodeBuf<'_>) -> Result<Option<U>, Status> {
        self.0.decode(buf).map_err(|s| {
            Status::invalid_argument(format!(
                "the message cannot be decoded ({}); text fields must be UTF-8",
                s.message()
            ))
        })
    }

    fn buffer_settings(&self) -> BufferSettings {
        self.0.buffer_settings()
    }
}
