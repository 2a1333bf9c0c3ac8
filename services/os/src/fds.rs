//! Descriptors inherited from the process that started a binary.
//!
//! The standard library opens every descriptor of its own close-on-exec, but a
//! shell or supervisor may start a service with others open (a redirection,
//! a leaked pipe, a log file). An exec service would hand them on to every
//! task it starts, so a guest's job could read what the starting shell had
//! open. Each binary closes them before it opens anything of its own.

use std::io;

/// Close every descriptor above standard error. Call first thing in `main`,
/// before a runtime or thread opens descriptors of its own: those would be
/// closed too. Returns how many were closed.
pub fn close_inherited() -> io::Result<usize> {
    let mut closed = 0;
    for fd in open_above_stderr()? {
        match nix::unistd::close(fd) {
            Ok(()) => closed += 1,
            // The directory listing's own descriptor, already gone.
            Err(nix::Error::EBADF) => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(closed)
}

/// The descriptors above 2 that are open now: from /proc/self/fd, else every
/// number below the descriptor limit (closing a free number is harmless).
fn open_above_stderr() -> io::Result<Vec<i32>> {
    match std::fs::read_dir("/proc/self/fd") {
        Ok(dir) => {
            let mut fds = Vec::new();
            for entry in dir {
                let name = entry?.file_name();
                if let Some(fd) = name.to_str().and_then(|n| n.parse::<i32>().ok())
                    && fd > 2
                {
                    fds.push(fd);
                }
            }
            Ok(fds)
        }
        Err(_) => {
            let (soft, _) =
                nix::sys::resource::getrlimit(nix::sys::resource::Resource::RLIMIT_NOFILE)?;
            // Bounded: an unlimited soft limit must not mean billions of calls.
            let top = soft.min(1 << 16) as i32;
            Ok((3..top).collect())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_listing_sees_an_open_file() {
        use std::os::fd::AsRawFd;
        let f = tempfile::tempfile().unwrap();
        let fds = open_above_stderr().unwrap();
        assert!(fds.contains(&f.as_raw_fd()), "{fds:?}");
        assert!(fds.iter().all(|&fd| fd > 2));
    }
}
