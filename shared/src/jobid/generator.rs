//! The FLUID generator (RFC 19; flux-core `fluid_generate()`), without a clock.
//!
//! The caller passes `now_ms`, milliseconds since the instance's FLUID epoch.
//! flux-core computes that as "starting timestamp + monotonic time since start";
//! any clock works here because the generator never lets its timestamp go back:
//! - a clock that stalls or goes backwards keeps the last timestamp and counts on
//!   in the sequence;
//! - when the 1024 sequence numbers of a millisecond are used up, it borrows the
//!   next millisecond instead of waiting for it (flux-core sleeps until the clock
//!   moves; a pure function cannot);
//! - after a restart, [`FluidGenerator::resume`] starts one millisecond after the
//!   last id issued, as flux-core's job-ingest does with the job manager's max id.
//!
//! So ids from one generator are unique and strictly increasing.

use super::{JobId, MAX_GENERATOR, MAX_SEQUENCE, MAX_TIMESTAMP};

/// Why no id could be issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum GeneratorError {
    /// The generator id does not fit in 14 bits.
    #[error("generator id {0} is out of range (0..={MAX_GENERATOR})")]
    GeneratorOutOfRange(u32),
    /// The 40-bit millisecond timestamp is used up (about 34.8 years after the epoch).
    #[error("job ids are exhausted: timestamp {0} ms is past the 40-bit limit {MAX_TIMESTAMP}")]
    TimestampExhausted(u64),
}

/// Issues FLUIDs for one generator id, strictly increasing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FluidGenerator {
    generator: u16,
    timestamp: u64,
    /// Next sequence number to issue at `timestamp`; `MAX_SEQUENCE + 1` when spent.
    next_seq: u16,
}

impl FluidGenerator {
    /// A fresh generator whose first id has timestamp at least `start_ms`.
    pub fn new(generator: u32, start_ms: u64) -> Result<Self, GeneratorError> {
        let generator = u16::try_from(generator)
            .ok()
            .filter(|&g| g <= MAX_GENERATOR)
            .ok_or(GeneratorError::GeneratorOutOfRange(generator))?;
        if start_ms > MAX_TIMESTAMP {
            return Err(GeneratorError::TimestampExhausted(start_ms));
        }
        Ok(FluidGenerator {
            generator,
            timestamp: start_ms,
            next_seq: 0,
        })
    }

    /// A generator whose ids all come after `last`, the greatest id issued before
    /// a restart (by any generator): it starts at `last`'s timestamp + 1 ms.
    pub fn resume(generator: u32, last: JobId) -> Result<Self, GeneratorError> {
        FluidGenerator::new(generator, last.timestamp_ms() + 1)
    }

    /// The next id, given the current time in ms since the FLUID epoch.
    pub fn next(&mut self, now_ms: u64) -> Result<JobId, GeneratorError> {
        let (mut timestamp, mut seq) = (self.timestamp, self.next_seq);
        if now_ms > timestamp {
            timestamp = now_ms;
            seq = 0;
        }
        if seq > MAX_SEQUENCE {
            timestamp += 1;
            seq = 0;
        }
        let id = JobId::from_parts(timestamp, self.generator, seq)
            .map_err(|_| GeneratorError::TimestampExhausted(timestamp))?;
        self.timestamp = timestamp;
        self.next_seq = seq + 1;
        Ok(id)
    }

    /// The generator id.
    pub fn generator(&self) -> u16 {
        self.generator
    }

    /// The timestamp of the last id issued (or the start), which may run ahead of
    /// the clock after sequence borrowing.
    pub fn timestamp_ms(&self) -> u64 {
        self.timestamp
    }
}
