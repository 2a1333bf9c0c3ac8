//! `fluxgate-exec run-as`: become the job's owner, then become its task.

use std::convert::Infallible;
use std::io::{self, IoSliceMut, Write};
use std::mem::MaybeUninit;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;

use rustix::net::{RecvAncillaryBuffer, RecvAncillaryMessage, RecvFlags, recvmsg};
use std::os::unix::process::CommandExt;
use std::process::Command;

use crate::handoff::{MAX_INHERITED, StartFailure, TaskLaunch, encode, read_frame};
use crate::spawn_error::{reason, shell_code};

/// The `run-as` mode. Returns only when the task could not be started,
/// with the exit code a shell would give; the failure has then been sent to
/// the service.
pub fn main() -> u8 {
    let mut channel = match super::take_channel() {
        Ok(c) => c,
        Err(e) => {
            eprintln!("fluxgate-exec run-as: no channel to the exec service: {e}");
            return 126;
        }
    };
    let failure = match launch(&mut channel) {
        Ok(never) => match never {},
        Err(f) => f,
    };
    if let Ok(frame) = encode(&failure)
        && let Err(e) = channel.write_all(&frame)
    {
        eprintln!(
            "fluxgate-exec run-as: {}: {} (and the exec service is gone: {e})",
            failure.what, failure.reason
        );
    }
    failure.code
}

/// Switch, read the task, prepare it and exec it.
fn launch(channel: &mut UnixStream) -> Result<Infallible, StartFailure> {
    let internal = |reason: String| StartFailure {
        what: "fluxgate-exec run-as".into(),
        reason,
        code: 126,
    };
    super::switch(channel).map_err(internal)?;
    // From here on this process is the owner: what follows is theirs.
    let task: TaskLaunch =
        read_frame(channel).map_err(|e| internal(format!("cannot read the task to start: {e}")))?;
    // Held to the exec: dropping one would close the task's descriptor.
    let inherited = take_descriptors(channel, &task)
        .map_err(|e| internal(format!("cannot receive the task's descriptors: {e}")))?;
    for warning in crate::rlimit::apply(&task.rlimits) {
        eprintln!("{warning}");
    }
    match super::enter(task.cwd.as_deref()) {
        Ok(None) => {}
        Ok(Some(warning)) => eprint!("{warning}"),
        Err(no) => {
            return Err(StartFailure {
                what: format!("chdir {}", no.dir.display()),
                reason: reason(&no.error),
                code: shell_code(&no.error),
            });
        }
    }
    let Some((program, args)) = task.argv.split_first() else {
        return Err(StartFailure {
            what: "task".into(),
            reason: "the command is empty".into(),
            code: 127,
        });
    };
    let failed = |e: io::Error| StartFailure {
        what: program.clone(),
        reason: reason(&e),
        code: shell_code(&e),
    };
    let path = task
        .env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str());
    // Relative PATH entries are taken from the directory just entered.
    let resolved = crate::lookup::program(program, path, None).map_err(failed)?;
    // The standard library's exec: execvp (so a file without #! runs
    // through /bin/sh, as a shell would) with default signal dispositions
    // and an empty signal mask, where this process ignores SIGPIPE.
    let error = Command::new(&resolved)
        .args(args)
        .env_clear()
        .envs(
            task.env
                .iter()
                .chain(&inherited.numbers)
                .map(|(k, v)| (k, v)),
        )
        .exec();
    Err(failed(error))
}

/// Make `tty` this process's stdin, stdout, stderr and controlling
/// terminal, in a new session (as a login does).
fn become_terminal(tty: &OwnedFd) -> io::Result<()> {
    rustix::process::setsid()?;
    rustix::process::ioctl_tiocsctty(tty)?;
    rustix::stdio::dup2_stdin(tty)?;
    rustix::stdio::dup2_stdout(tty)?;
    rustix::stdio::dup2_stderr(tty)?;
    Ok(())
}

/// The descriptors the service sent after the launch frame: stdin, moved
/// onto descriptor 0, then those the task inherits (received without
/// close-on-exec), with the variables that give their numbers.
fn take_descriptors(channel: &UnixStream, task: &TaskLaunch) -> io::Result<Inherited> {
    let wanted = usize::from(task.pty) + usize::from(task.stdin) + task.inherit.len();
    if wanted == 0 {
        return Ok(Inherited::default());
    }
    let mut byte = [0u8; 1];
    let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(MAX_INHERITED))];
    let mut control = RecvAncillaryBuffer::new(&mut space);
    recvmsg(
        channel,
        &mut [IoSliceMut::new(&mut byte)],
        &mut control,
        RecvFlags::empty(),
    )?;
    let mut fds: Vec<OwnedFd> = Vec::new();
    for message in control.drain() {
        if let RecvAncillaryMessage::ScmRights(received) = message {
            fds.extend(received);
        }
    }
    if fds.len() != wanted {
        return Err(io::Error::other(format!(
            "expected {wanted} descriptors, got {}",
            fds.len()
        )));
    }
    let mut fds = fds.into_iter();
    if task.pty
        && let Some(tty) = fds.next()
    {
        become_terminal(&tty)?;
    }
    if task.stdin
        && let Some(stdin) = fds.next()
    {
        rustix::stdio::dup2_stdin(&stdin)?;
    }
    let kept: Vec<OwnedFd> = fds.collect();
    let numbers = task
        .inherit
        .iter()
        .zip(&kept)
        .map(|(var, fd)| (var.clone(), fd.as_raw_fd().to_string()))
        .collect();
    Ok(Inherited { kept, numbers })
}

/// The descriptors a task inherits, held open to the exec, and the
/// variables that give their numbers.
#[derive(Debug, Default)]
struct Inherited {
    /// Never read: held so that the descriptors stay open until the exec.
    #[allow(dead_code)]
    kept: Vec<OwnedFd>,
    numbers: Vec<(String, String)>,
}
