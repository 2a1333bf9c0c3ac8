//! Commands the tests run: jobspecs of a command line, the workspace's
//! binaries, and their output as text.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;

use crate::poll::poll_until_blocking;

use fluxgate_shared::jobspec::JobspecBuilder;

/// A one-task jobspec running `argv`.
pub fn cmd(argv: &[&str]) -> JobspecBuilder {
    JobspecBuilder::new(argv.iter().copied())
}

/// A jobspec that sleeps `secs` seconds (`sleep SECS`) on `nodes` whole nodes.
pub fn sleeper(secs: &str, nodes: u64) -> JobspecBuilder {
    JobspecBuilder::new(["sleep", secs])
        .nodes(nodes)
        .exclusive(true)
}

/// Run `cmd` with `stdin` written to it and its output collected.
pub fn output_with_stdin(cmd: &mut Command, stdin: &str) -> Output {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("spawn {cmd:?}: {e}"));
    let mut pipe = child.stdin.take().expect("stdin is piped");
    // A command that exits without reading its input is not an error here.
    let _ = pipe.write_all(stdin.as_bytes());
    drop(pipe);
    child
        .wait_with_output()
        .unwrap_or_else(|e| panic!("wait for {cmd:?}: {e}"))
}

/// A process in its own group (a `fluxgate start` or a bench run) whose
/// group is stopped if the test ends first: SIGTERM, then SIGKILL after
/// `grace`.
#[derive(Debug)]
pub struct Group {
    /// The process, until the test has waited for it itself.
    pub child: Option<Child>,
    /// How long SIGTERM has to stop everything before SIGKILL.
    pub grace: Duration,
}

impl Drop for Group {
    fn drop(&mut self) {
        if let Some(c) = &mut self.child {
            let pg = Pid::from_raw(c.id() as i32);
            let _ = killpg(pg, Signal::SIGTERM);
            // Past the grace, SIGKILL: an early end is what is waited for.
            let _ = poll_until_blocking(self.grace, || match c.try_wait() {
                Ok(None) => Err("running".to_string()),
                _ => Ok(()),
            });
            let _ = killpg(pg, Signal::SIGKILL);
            let _ = c.wait();
        }
    }
}

/// Output bytes as text.
pub fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// Write an executable script `dir/name`.
pub fn script(dir: &Path, name: &str, body: &str) {
    use std::os::unix::fs::PermissionsExt;
    let p = dir.join(name);
    std::fs::write(&p, body).expect("write script");
    std::fs::set_permissions(&p, std::fs::Permissions::from_mode(0o755)).expect("chmod");
}

/// Whether `program` runs here (`program ARG` starts), for tests that need
/// a tool the suite's CI installs.
pub fn has_program(program: &str, arg: &str) -> bool {
    Command::new(program)
        .arg(arg)
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok()
}

/// Compile `integration-tests/mpi/NAME.c` with MPICH's `mpicc` into `dir`.
pub fn compile_mpi(dir: &Path, name: &str) -> PathBuf {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("mpi")
        .join(format!("{name}.c"));
    let out = dir.join(name);
    let status = Command::new("mpicc")
        .arg("-o")
        .arg(&out)
        .arg(&src)
        .status()
        .expect("mpicc (Debian's mpich and libmpich-dev; .ci/run installs them)");
    assert!(status.success(), "mpicc {} failed", src.display());
    out
}

/// `fluxgate ARGS` against the instance at `uri`, in `dir`, with no
/// standard input and no token of the caller's.
pub fn fluxgate_in(uri: &str, dir: &Path, args: &[&str]) -> Output {
    Command::new(crate::binary("fluxgate"))
        .args(args)
        .env("FLUXGATE_URI", uri)
        .env_remove("FLUXGATE_TOKEN")
        .current_dir(dir)
        .stdin(Stdio::null())
        .output()
        .expect("run fluxgate")
}

/// The lines of `bytes`, sorted (tasks print in any order).
pub fn sorted_lines(bytes: &[u8]) -> Vec<String> {
    let mut lines: Vec<String> = String::from_utf8_lossy(bytes)
        .lines()
        .map(str::to_string)
        .collect();
    lines.sort();
    lines
}
