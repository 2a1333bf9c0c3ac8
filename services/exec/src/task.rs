//! One task: a process in its own process group, its output forwarded in
//! chunks, its wait status reported once its output has ended.
//!
//! Events for a task arrive in this order on the channel: zero or more
//! `Output` per stream (each stream in order), one `Eof` per stream, then
//! `Exited`. Output is forwarded line by line, and long lines in chunks of at
//! most [`MAX_CHUNK`] bytes, so a task cannot make the service buffer without
//! bound.

use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};

use nix::sched::{CpuSet, sched_getaffinity, sched_setaffinity};
use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::{AsyncBufReadExt, AsyncRead, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::mpsc;
use tracing::Instrument;

use crate::cgroup::JobCgroup;
use crate::handoff::{MAX_FRAME, StartFailure, TaskLaunch, decode_reply, encode};
use crate::rlimit::Rlimit;
use crate::run_as::RunAs;
pub use crate::spawn_error::SpawnError;
use crate::spawn_error::{reason, spawn_error};
use crate::status::WaitStatus;
use crate::wrapper::FALLBACK_DIR;

/// Largest piece of output forwarded at once.
pub const MAX_CHUNK: usize = 64 * 1024;

/// Which output stream.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Stream {
    /// Standard output.
    Stdout,
    /// Standard error.
    Stderr,
}

impl Stream {
    /// The RFC 24 stream name.
    pub fn name(self) -> &'static str {
        match self {
            Stream::Stdout => "stdout",
            Stream::Stderr => "stderr",
        }
    }
}

/// What to run for one task.
#[derive(Debug, Clone, Default)]
pub struct TaskSpec {
    /// Command and arguments; the command is looked up in PATH of `env`.
    pub argv: Vec<String>,
    /// The whole environment of the task (nothing is inherited).
    pub env: Vec<(String, String)>,
    /// Working directory; the service's own when `None`.
    pub cwd: Option<PathBuf>,
    /// CPUs to bind to; ids this machine lacks are ignored, none binds nothing.
    pub cpus: Vec<usize>,
    /// The task's global rank, carried on its events.
    pub rank: u32,
    /// Resource limits, set in the task's process as its owner.
    pub rlimits: Vec<Rlimit>,
    /// What the task reads as its standard input; /dev/null when `None`.
    pub stdin: Option<Arc<OwnedFd>>,
    /// Descriptors the task inherits, each named by the variable given
    /// (`PMI_FD`), which the launch sets to its number in the task.
    pub inherit: Vec<(String, Arc<OwnedFd>)>,
    /// A terminal instead of stdin, stdout and stderr (`-o pty`).
    pub pty: Option<TaskPty>,
    /// The job's cgroup on this node, joined before the task execs.
    pub cgroup: Option<Arc<JobCgroup>>,
    /// Output passed on as it is read rather than a line at a time
    /// (`--unbuffered`: `output.*.buffer.type` `none`).
    pub unbuffered: bool,
}

/// The two ends of a task's terminal.
#[derive(Debug, Clone)]
pub struct TaskPty {
    /// The task's end: its stdin, stdout, stderr and controlling terminal.
    pub slave: Arc<OwnedFd>,
    /// The service's end, read as the task's stdout.
    pub master: Arc<OwnedFd>,
}

/// Something that happened to a task.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TaskEvent {
    /// A line (or chunk of a long line) of output.
    Output {
        rank: u32,
        stream: Stream,
        data: Vec<u8>,
    },
    /// The stream was closed.
    Eof { rank: u32, stream: Stream },
    /// The process ended; always after both `Eof`s.
    Exited { rank: u32, status: WaitStatus },
}

/// A started task.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Task {
    pid: i32,
    rank: u32,
}

impl Task {
    /// Process id (also its process group id).
    pub fn pid(&self) -> i32 {
        self.pid
    }

    /// The task's global rank.
    pub fn rank(&self) -> u32 {
        self.rank
    }

    /// Send `signal` to the task's whole process group.
    pub fn signal(&self, signal: Signal) -> Result<(), nix::Error> {
        match killpg(Pid::from_raw(self.pid), signal) {
            // Already gone: nothing left to signal.
            Err(nix::Error::ESRCH) => Ok(()),
            other => other,
        }
    }
}

/// Start a task; its events go to `events` until `Exited`.
pub async fn spawn(spec: &TaskSpec, events: mpsc::Sender<TaskEvent>) -> Result<Task, SpawnError> {
    spawn_as(spec, None, events).await
}

/// Start a task as `who` (this process's own identity when `None`).
///
/// As another user, or with limits to set, the task starts through the
/// `run-as` wrapper, which looks at the job's environment, cwd and command
/// only once it is the owner (see [`crate::run_as`]). Otherwise it is
/// spawned directly: the service's own user starts its own task.
pub async fn spawn_as(
    spec: &TaskSpec,
    who: Option<&RunAs>,
    events: mpsc::Sender<TaskEvent>,
) -> Result<Task, SpawnError> {
    let Some((program, args)) = spec.argv.split_first() else {
        return Err(SpawnError {
            what: "task".into(),
            reason: "the command is empty".into(),
            status: WaitStatus::exited(127),
        });
    };
    // A task joins its cgroup through the wrapper, which waits for its
    // identity before doing anything: placed first, it cannot fork outside.
    // On v1 the service's own tasks are born in the cgroup instead. A
    // terminal needs a session, which the wrapper makes too.
    let direct_cg = spec.cgroup.as_deref().filter(|cg| cg.spawns_directly());
    let wrap = who.is_some()
        || !spec.rlimits.is_empty()
        || spec.pty.is_some()
        || (spec.cgroup.is_some() && direct_cg.is_none());
    let (mut child, warning) = if wrap {
        (spawn_wrapped(spec, who).await?, None)
    } else if let Some(cg) = direct_cg {
        crate::cgroup::task::direct(cg, program, || spawn_direct(spec, program, args))?
    } else {
        spawn_direct(spec, program, args)?
    };
    let pid = child
        .id()
        .and_then(|p| i32::try_from(p).ok())
        .ok_or_else(|| SpawnError {
            what: program.to_string(),
            reason: "exited before its pid was known".into(),
            status: WaitStatus::exited(127),
        })?;
    let rank = spec.rank;
    let (out, err) = (child.stdout.take(), child.stderr.take());
    // With a terminal, what the task writes comes out of its master end;
    // the wrapper's own pipes close at its exec.
    let out: Option<Box<dyn AsyncRead + Unpin + Send>> = match &spec.pty {
        Some(pty) => Some(Box::new(master_reader(&pty.master)?)),
        None => out.map(|o| Box::new(o) as Box<dyn AsyncRead + Unpin + Send>),
    };
    // A terminal's output goes on as it is read: what it shows without a
    // newline (a prompt, an echoed key) must not wait for one. So does an
    // unbuffered job's: a progress line without its end shows at once.
    let by_line = spec.pty.is_none() && !spec.unbuffered;
    // One tokio task per task, not one per stream and one for the wait:
    // the three go on side by side within it, and `Exited` follows both
    // streams' ends.
    let stdout_events = events.clone();
    let stderr_events = events.clone();
    let cgroup = spec.cgroup.clone();
    tokio::spawn(
        async move {
            let stdout = async {
                if let Some(s) = out {
                    forward(s, rank, Stream::Stdout, None, by_line, stdout_events).await;
                }
            };
            let stderr = async {
                if let Some(s) = err {
                    forward(s, rank, Stream::Stderr, warning, true, stderr_events).await;
                }
            };
            let wait = async {
                let status = match child.wait().await {
                    Ok(s) => crate::status::from_exit(s),
                    Err(e) => {
                        tracing::error!(pid, error = %e, "cannot wait for task");
                        WaitStatus::exited(1)
                    }
                };
                if let Some(cg) = &cgroup {
                    cg.reaped();
                }
                status
            };
            let ((), (), status) = tokio::join!(stdout, stderr, wait);
            let _ = events.send(TaskEvent::Exited { rank, status }).await;
        }
        .in_current_span(),
    );
    Ok(Task { pid, rank })
}

/// The task's own process, spawned by this one with the spec's
/// environment and cwd, and the line its stderr begins with (the cwd
/// fallback warning).
fn spawn_direct(
    spec: &TaskSpec,
    program: &str,
    args: &[String],
) -> Result<(Child, Option<String>), SpawnError> {
    let (cwd, warning) = match &spec.cwd {
        None => (None, None),
        Some(dir) => start_dir(dir)?,
    };
    let path = spec
        .env
        .iter()
        .find(|(k, _)| k == "PATH")
        .map(|(_, v)| v.as_str());
    let resolved = crate::lookup::program(program, path, cwd.as_deref())
        .map_err(|e| spawn_error(program.to_string(), &e))?;
    let numbers = spec
        .inherit
        .iter()
        .map(|(var, fd)| (var.clone(), fd.as_raw_fd().to_string()));
    let env: Vec<(String, String)> = spec.env.iter().cloned().chain(numbers).collect();
    let command = |program: &Path, args: &[String]| -> io::Result<Command> {
        let mut cmd = Command::new(program);
        cmd.args(args)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k, v)))
            .stdin(match &spec.stdin {
                Some(fd) => Stdio::from(fd.try_clone()?),
                None => Stdio::null(),
            });
        task_stdio(&mut cmd);
        if let Some(cwd) = &cwd {
            cmd.current_dir(cwd);
        }
        Ok(cmd)
    };
    let cpus = cpu_set(&spec.cpus);
    let inherit: Vec<BorrowedFd<'_>> = spec.inherit.iter().map(|(_, fd)| fd.as_fd()).collect();
    let spawned = command(&resolved, args).and_then(|mut c| spawn_bound(&mut c, cpus, &inherit));
    let child = match spawned {
        // A file without #! is a shell script to execvp; posix_spawn does
        // not know that, so the shell is asked as execvp would.
        Err(e) if e.raw_os_error() == Some(nix::libc::ENOEXEC) => {
            let mut sh_args = vec![resolved.display().to_string()];
            sh_args.extend(args.iter().cloned());
            command(Path::new("/bin/sh"), &sh_args)
                .and_then(|mut c| spawn_bound(&mut c, cpus, &inherit))
        }
        other => other,
    }
    .map_err(|e| spawn_error(program.to_string(), &e))?;
    Ok((child, warning))
}

/// Output to the service, and a process group of its own, so that a signal
/// reaches everything the task started.
fn task_stdio(cmd: &mut Command) {
    cmd.process_group(0);
    stdio_only(cmd);
}

/// Output to the service; a task with a terminal makes its own session
/// (and so its process group) in the wrapper instead.
fn stdio_only(cmd: &mut Command) {
    cmd.stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(false);
}

/// The master end of a task's terminal, read on a blocking thread (a
/// terminal is not a pipe or socket for the reactor).
fn master_reader(master: &Arc<OwnedFd>) -> Result<tokio::fs::File, SpawnError> {
    let dup = master.try_clone().map_err(|e| SpawnError {
        what: "pty".into(),
        reason: reason(&e),
        status: WaitStatus::exited(126),
    })?;
    Ok(tokio::fs::File::from_std(std::fs::File::from(dup)))
}

/// The task through `fluxgate-exec run-as`: spawned with an empty
/// environment and its channel as stdin, handed the launch over the
/// channel, and done once the channel ends without a word (the exec
/// happened). It becomes the task: same pid, group and CPU mask.
async fn spawn_wrapped(spec: &TaskSpec, who: Option<&RunAs>) -> Result<Child, SpawnError> {
    let program = spec.argv.first().cloned().unwrap_or_default();
    let failed = |reason: String| SpawnError {
        what: program.clone(),
        reason,
        status: WaitStatus::exited(126),
    };
    let exe = crate::run_as::binary().map_err(|e| failed(e.to_string()))?;
    let (ours, theirs) = std::os::unix::net::UnixStream::pair()
        .map_err(|e| failed(format!("cannot make a channel to start the task: {e}")))?;
    let child = {
        // Dropped at the end of this block with our copy of `theirs`, so
        // that the wrapper's exec is our end of file.
        let mut cmd = Command::new(exe);
        cmd.arg(crate::run_as::RUN_AS)
            .env_clear()
            .stdin(Stdio::from(std::os::fd::OwnedFd::from(theirs)));
        if spec.pty.is_some() {
            stdio_only(&mut cmd);
        } else {
            task_stdio(&mut cmd);
        }
        spawn_bound(&mut cmd, cpu_set(&spec.cpus), &[])
            .map_err(|e| failed(format!("cannot start the user switch: {e}")))?
    };
    let mut child = child;
    if let Some(cg) = &spec.cgroup {
        crate::cgroup::task::join(cg, &mut child).map_err(failed)?;
    }
    let launch = TaskLaunch {
        argv: spec.argv.clone(),
        env: spec.env.clone(),
        cwd: spec.cwd.clone(),
        rlimits: spec.rlimits.clone(),
        stdin: spec.stdin.is_some(),
        inherit: spec.inherit.iter().map(|(var, _)| var.clone()).collect(),
        pty: spec.pty.is_some(),
    };
    let fds: Vec<Arc<OwnedFd>> = spec
        .pty
        .iter()
        .map(|p| p.slave.clone())
        .chain(spec.stdin.iter().cloned())
        .chain(spec.inherit.iter().map(|(_, fd)| fd.clone()))
        .collect();
    let failure = match hand_over(ours, who, &launch, &fds).await {
        Ok(None) => return Ok(child),
        Ok(Some(f)) => SpawnError {
            what: f.what,
            reason: f.reason,
            status: WaitStatus::exited(f.code.into()),
        },
        Err(e) => failed(format!("the user switch failed: {e}")),
    };
    // The wrapper has ended (or ends now): reap it, its output is unread.
    let cgroup = spec.cgroup.clone();
    tokio::spawn(
        async move {
            let _ = child.start_kill();
            let _ = child.wait().await;
            if let Some(cg) = cgroup {
                cg.reaped();
            }
        }
        .in_current_span(),
    );
    Err(failure)
}

/// Write the identity and launch frames; read what the wrapper says before
/// its channel closes: nothing when the exec succeeded.
async fn hand_over(
    ours: std::os::unix::net::UnixStream,
    who: Option<&RunAs>,
    launch: &TaskLaunch,
    fds: &[Arc<OwnedFd>],
) -> io::Result<Option<StartFailure>> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    ours.set_nonblocking(true)?;
    let mut channel = tokio::net::UnixStream::from_std(ours)?;
    let mut frames = encode(&who)?;
    frames.extend(encode(launch)?);
    // A wrapper that failed early has closed its end: its reply says why.
    let mut sent = channel.write_all(&frames).await;
    if sent.is_ok() && !fds.is_empty() {
        sent = send_fds(&channel, fds).await;
    }
    let mut reply = Vec::new();
    (&mut channel)
        .take(MAX_FRAME as u64 + 4)
        .read_to_end(&mut reply)
        .await?;
    match (decode_reply(&reply)?, sent) {
        (Some(failure), _) => Ok(Some(failure)),
        (None, Err(e)) => Err(e),
        (None, Ok(())) => Ok(None),
    }
}

/// The descriptors a task inherits, on one byte after the launch frame.
async fn send_fds(channel: &tokio::net::UnixStream, fds: &[Arc<OwnedFd>]) -> io::Result<()> {
    use rustix::net::{SendAncillaryBuffer, SendAncillaryMessage, SendFlags, sendmsg};
    use std::mem::MaybeUninit;
    let borrowed: Vec<BorrowedFd<'_>> = fds.iter().map(|fd| fd.as_fd()).collect();
    let mut space =
        [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(crate::handoff::MAX_INHERITED))];
    loop {
        channel.writable().await?;
        let mut control = SendAncillaryBuffer::new(&mut space);
        if !control.push(SendAncillaryMessage::ScmRights(&borrowed)) {
            return Err(io::Error::other("too many descriptors for one task"));
        }
        match channel.try_io(tokio::io::Interest::WRITABLE, || {
            sendmsg(
                channel,
                &[io::IoSlice::new(b"F")],
                &mut control,
                SendFlags::empty(),
            )
            .map_err(io::Error::from)
        }) {
            Ok(_) => return Ok(()),
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
}

/// Pass a task's stream on as output events, after `preamble` (a line the
/// task did not write but that belongs first on its stream): a line at a
/// time when `by_line`, else each read as it comes.
async fn forward(
    reader: impl AsyncRead + Unpin,
    rank: u32,
    stream: Stream,
    preamble: Option<String>,
    by_line: bool,
    events: mpsc::Sender<TaskEvent>,
) {
    if let Some(line) = preamble {
        let data = line.into_bytes();
        if events
            .send(TaskEvent::Output { rank, stream, data })
            .await
            .is_err()
        {
            return;
        }
    }
    let mut reader = BufReader::with_capacity(MAX_CHUNK, reader);
    let mut pending: Vec<u8> = Vec::new();
    loop {
        let buf = match reader.fill_buf().await {
            Ok(buf) => buf,
            // A terminal's master reads EIO once no one holds the task's end.
            Err(e) if e.raw_os_error() == Some(nix::libc::EIO) => break,
            Err(e) => {
                tracing::warn!(rank, stream = stream.name(), error = %e, "output read failed");
                break;
            }
        };
        if buf.is_empty() {
            break;
        }
        let room = MAX_CHUNK - pending.len();
        let (take, complete) = match buf.iter().take(room).position(|&b| b == b'\n') {
            _ if !by_line => (buf.len().min(room), true),
            Some(i) => (i + 1, true),
            None => {
                let take = buf.len().min(room);
                (take, pending.len() + take == MAX_CHUNK)
            }
        };
        pending.extend_from_slice(&buf[..take]);
        reader.consume(take);
        if complete {
            let data = std::mem::take(&mut pending);
            if events
                .send(TaskEvent::Output { rank, stream, data })
                .await
                .is_err()
            {
                return;
            }
        }
    }
    if !pending.is_empty() {
        let _ = events
            .send(TaskEvent::Output {
                rank,
                stream,
                data: pending,
            })
            .await;
    }
    let _ = events.send(TaskEvent::Eof { rank, stream }).await;
}

/// Where a task asked to start in `dir` starts, and the warning for its stderr.
///
/// As flux-core's job shell (libsubprocess, in the child): a directory that
/// cannot be entered does not fail the task; it starts in /tmp and its stderr
/// begins with "Could not change dir to DIR: REASON. Going to /tmp instead".
/// Only when /tmp cannot be entered either does the task fail to start.
fn start_dir(dir: &Path) -> Result<(Option<PathBuf>, Option<String>), SpawnError> {
    // Checked here rather than by the child's chdir, whose failure would be
    // indistinguishable from a command that cannot be executed.
    let Err(e) = std::fs::read_dir(dir) else {
        return Ok((Some(dir.to_path_buf()), None));
    };
    let fallback = Path::new(FALLBACK_DIR);
    if std::fs::read_dir(fallback).is_err() {
        return Err(spawn_error(format!("chdir {}", dir.display()), &e));
    }
    let warning = crate::wrapper::fallback_warning(dir, &e);
    Ok((Some(fallback.to_path_buf()), Some(warning)))
}

/// The requested CPUs that this process may use; `None` when that leaves nothing
/// (virtual nodes may claim more cores than the machine has).
fn cpu_set(cpus: &[usize]) -> Option<CpuSet> {
    if cpus.is_empty() {
        return None;
    }
    let allowed = sched_getaffinity(Pid::from_raw(0)).ok()?;
    let mut set = CpuSet::new();
    let mut any = false;
    for &cpu in cpus {
        if allowed.is_set(cpu).unwrap_or(false) && set.set(cpu).is_ok() {
            any = true;
        }
    }
    any.then_some(set)
}

/// Spawn `cmd` bound to `cpus`. A new process inherits the CPU mask of the
/// thread that starts it, so the calling thread takes the task's mask for
/// the call and gets its own back after. (A hook run in the child before
/// exec would do the same, but any such hook makes the standard library
/// fork, copying the page tables of the whole service for each task,
/// instead of posix_spawn.)
///
/// `inherit` are made inheritable for this spawn alone: every spawn of the
/// service goes through [`SPAWNING`], so no other process started meanwhile
/// can inherit them.
fn spawn_bound(
    cmd: &mut Command,
    cpus: Option<CpuSet>,
    inherit: &[BorrowedFd<'_>],
) -> io::Result<tokio::process::Child> {
    let _spawning = SPAWNING.lock().unwrap_or_else(|p| p.into_inner());
    for fd in inherit {
        rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::empty())?;
    }
    let child = spawn_on(cmd, cpus);
    for fd in inherit {
        rustix::io::fcntl_setfd(fd, rustix::io::FdFlags::CLOEXEC)?;
    }
    child
}

/// Held while a process is spawned: a descriptor made inheritable for one
/// task is inherited by that task alone.
pub(crate) static SPAWNING: Mutex<()> = Mutex::new(());

fn spawn_on(cmd: &mut Command, cpus: Option<CpuSet>) -> io::Result<tokio::process::Child> {
    let Some(set) = cpus else {
        return cmd.spawn();
    };
    // Pid 0: the calling thread, not the whole process.
    let own = sched_getaffinity(Pid::from_raw(0)).map_err(io::Error::from)?;
    sched_setaffinity(Pid::from_raw(0), &set).map_err(io::Error::from)?;
    let child = cmd.spawn();
    if let Err(e) = sched_setaffinity(Pid::from_raw(0), &own) {
        tracing::warn!(error = %e, "cannot restore the CPU mask of a worker thread");
    }
    child
}
