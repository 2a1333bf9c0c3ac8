//! Opening a job's file without letting the file decide how long it takes.
//!
//! `open(2)` of a FIFO blocks until the other end is opened, and a device
//! may block as long as it likes; the path is the user's, so either would
//! hold up the exec service. Files are opened with `O_NONBLOCK`: a FIFO
//! that nobody reads answers `ENXIO` at once, and is tried again until
//! [`OPEN_TIMEOUT`] has passed, then refused with a message saying why.
//! Once open, the descriptor is made blocking again, as a task expects.

use std::fs::{File, OpenOptions};
use std::io;
use std::os::unix::fs::OpenOptionsExt;
use std::path::Path;
use std::time::{Duration, Instant};

use rustix::fs::OFlags;
use rustix::io::Errno;

/// How long an open may wait for the other end of a FIFO.
pub const OPEN_TIMEOUT: Duration = Duration::from_secs(10);

/// Between two tries of a FIFO nobody has opened yet.
const RETRY: Duration = Duration::from_millis(50);

/// How a file is opened.
#[derive(Debug, Clone, Copy)]
pub enum Mode {
    /// Read only.
    Read,
    /// Write only, created with `create_mode` (under the umask) and truncated.
    Write {
        /// Mode bits of a new file.
        create_mode: u32,
    },
}

/// Open `path` without blocking for more than `timeout`.
pub fn open(path: &Path, mode: Mode, timeout: Duration) -> io::Result<File> {
    let mut options = OpenOptions::new();
    match mode {
        Mode::Read => options.read(true),
        Mode::Write { create_mode } => options
            .write(true)
            .create(true)
            .truncate(true)
            .mode(create_mode),
    };
    options.custom_flags(OFlags::NONBLOCK.bits() as i32);
    let deadline = Instant::now() + timeout;
    let file = loop {
        match options.open(path) {
            Ok(f) => break f,
            Err(e) if e.raw_os_error() == Some(Errno::NXIO.raw_os_error()) => {
                if Instant::now() >= deadline {
                    return Err(io::Error::new(
                        io::ErrorKind::TimedOut,
                        format!(
                            "it is a FIFO nobody opened for reading within {} s",
                            timeout.as_secs_f64().ceil()
                        ),
                    ));
                }
                std::thread::sleep(RETRY);
            }
            Err(e) => return Err(e),
        }
    };
    let flags = rustix::fs::fcntl_getfl(&file)?;
    rustix::fs::fcntl_setfl(&file, flags - OFlags::NONBLOCK)?;
    Ok(file)
}

#[cfg(test)]
mod tests {
    use super::*;

    const WRITE: Mode = Mode::Write { create_mode: 0o600 };

    #[test]
    fn a_fifo_nobody_reads_is_refused_after_the_timeout() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("f");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let started = Instant::now();
        let e = open(&fifo, WRITE, Duration::from_millis(200)).unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::TimedOut, "{e}");
        assert!(e.to_string().contains("FIFO nobody opened"), "{e}");
        assert!(started.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn a_fifo_with_a_reader_and_a_plain_file_open_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("f");
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600)).unwrap();
        let reader = open(&fifo, Mode::Read, OPEN_TIMEOUT).unwrap();
        let writer = open(&fifo, WRITE, OPEN_TIMEOUT).unwrap();
        for f in [&reader, &writer] {
            let flags = rustix::fs::fcntl_getfl(f).unwrap();
            assert!(!flags.contains(OFlags::NONBLOCK));
        }
        let plain = dir.path().join("out");
        open(&plain, WRITE, OPEN_TIMEOUT).unwrap();
        assert!(plain.is_file());
    }
}
