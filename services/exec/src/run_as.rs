//! Jobs run as their owner.
//!
//! An exec service running as root starts each task with its owner's uid,
//! gid and supplementary groups; jobs of root itself only when allowed
//! (`--allow-root-jobs`). An unprivileged exec service runs only the jobs of
//! its own uid, the instance owner's. The switch happens in this binary's
//! `run-as` mode, which the task is spawned through:
//!
//! ```text
//! fluxgate-exec run-as UID GID GROUPS -- PROGRAM ARGS...
//!   setgroups(GROUPS); setgid(GID); setuid(UID); execv(PROGRAM, ARGS)
//! ```
//!
//! (GROUPS is a comma-separated list, possibly empty.) A separate exec step
//! rather than a hook in the child: hooks need `unsafe`, and any hook makes
//! the standard library fork instead of posix_spawn.

use std::ffi::{CString, OsString};
use std::path::PathBuf;

use nix::unistd::{Gid, Uid, User};

/// The identity a task is started with.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RunAs {
    /// User id.
    pub uid: u32,
    /// Primary group id.
    pub gid: u32,
    /// Supplementary group ids.
    pub groups: Vec<u32>,
}

/// Whose identity a job of `job_uid` runs with on a service running as
/// `service_uid`: `None` for the service's own, `Some(uid)` to switch, or why
/// it may not run here.
pub fn decide(job_uid: u32, service_uid: u32, allow_root: bool) -> Result<Option<u32>, String> {
    if service_uid != 0 {
        return if job_uid == service_uid {
            Ok(None)
        } else {
            Err(format!(
                "this exec service runs as uid {service_uid}, not root, so it runs only \
                 the instance owner's jobs; this job is owned by uid {job_uid} \
                 (run the exec service as root to run jobs as their owners)"
            ))
        };
    }
    match job_uid {
        0 if allow_root => Ok(None),
        0 => Err("jobs owned by root are refused on this node \
                  (start the exec service with --allow-root-jobs to run them)"
            .into()),
        uid => Ok(Some(uid)),
    }
}

/// The uid, primary group and supplementary groups of account `uid`.
pub fn lookup(uid: u32) -> Result<RunAs, String> {
    let user = User::from_uid(Uid::from_raw(uid))
        .map_err(|e| format!("cannot look up uid {uid}: {e}"))?
        .ok_or_else(|| format!("uid {uid} has no account on this node"))?;
    let name = CString::new(user.name.clone())
        .map_err(|_| format!("the name of uid {uid} holds a NUL byte"))?;
    let groups = nix::unistd::getgrouplist(&name, user.gid)
        .map_err(|e| format!("cannot read the groups of {}: {e}", user.name))?
        .into_iter()
        .map(Gid::as_raw)
        .collect();
    Ok(RunAs {
        uid,
        gid: user.gid.as_raw(),
        groups,
    })
}

/// The command-line words that run `program args` as `who` through `exe`.
pub fn wrap(
    exe: PathBuf,
    who: &RunAs,
    program: &std::path::Path,
    args: &[String],
) -> (PathBuf, Vec<OsString>) {
    let groups: Vec<String> = who.groups.iter().map(u32::to_string).collect();
    let mut words: Vec<OsString> = vec![
        "run-as".into(),
        who.uid.to_string().into(),
        who.gid.to_string().into(),
        groups.join(",").into(),
        "--".into(),
        program.as_os_str().to_owned(),
    ];
    words.extend(args.iter().map(OsString::from));
    (exe, words)
}

/// The `fluxgate-exec` binary that does the switch: this one, or the one
/// beside it (when this process is a test harness embedding the service).
pub fn binary() -> Result<PathBuf, String> {
    let exe = std::env::current_exe()
        .map_err(|e| format!("cannot find this program to switch users: {e}"))?;
    if exe.file_name().is_some_and(|n| n == "fluxgate-exec") {
        return Ok(exe);
    }
    let candidates = exe
        .parent()
        .into_iter()
        .flat_map(|d| [d.join("fluxgate-exec"), d.join("..").join("fluxgate-exec")]);
    for c in candidates {
        if c.is_file() {
            return Ok(c);
        }
    }
    Err("cannot find the fluxgate-exec binary that switches users".into())
}

/// The `run-as` mode: switch identity, then become the program. Returns
/// only on failure, with the exit code a shell would give.
pub fn main(args: &[OsString]) -> u8 {
    match switch_and_exec(args) {
        Ok(never) => match never {},
        Err((code, message)) => {
            eprintln!("fluxgate-exec run-as: {message}");
            code
        }
    }
}

fn switch_and_exec(args: &[OsString]) -> Result<std::convert::Infallible, (u8, String)> {
    let usage = || {
        (
            127,
            "usage: run-as UID GID GROUPS -- PROGRAM [ARGS...]".to_string(),
        )
    };
    let text = |a: &OsString| a.to_str().map(str::to_string).ok_or_else(usage);
    let [uid, gid, groups, dashes, program, rest @ ..] = args else {
        return Err(usage());
    };
    if dashes != "--" {
        return Err(usage());
    }
    let id = |s: &str| s.parse::<u32>().map_err(|_| usage());
    let uid = id(&text(uid)?)?;
    let gid = id(&text(gid)?)?;
    let groups: Vec<Gid> = text(groups)?
        .split(',')
        .filter(|g| !g.is_empty())
        .map(|g| id(g).map(Gid::from_raw))
        .collect::<Result<_, _>>()?;
    // Groups first: once the uid is dropped they can no longer be set.
    let fail = |what: &str, e: nix::Error| (126, format!("{what}: {}", e.desc()));
    nix::unistd::setgroups(&groups).map_err(|e| fail("setgroups", e))?;
    nix::unistd::setgid(Gid::from_raw(gid)).map_err(|e| fail("setgid", e))?;
    nix::unistd::setuid(Uid::from_raw(uid)).map_err(|e| fail("setuid", e))?;
    if nix::unistd::setuid(Uid::from_raw(0)).is_ok() && uid != 0 {
        return Err((126, "the switch away from root did not hold".into()));
    }
    let cstr = |a: &OsString| {
        use std::os::unix::ffi::OsStrExt;
        CString::new(a.as_bytes()).map_err(|_| (127, "an argument holds a NUL byte".to_string()))
    };
    let prog = cstr(program)?;
    let mut argv = vec![prog.clone()];
    for a in rest {
        argv.push(cstr(a)?);
    }
    match nix::unistd::execv(&prog, &argv) {
        // A file without #! is a shell script, as execvp would run it.
        Err(nix::Error::ENOEXEC) => {
            let sh = CString::new("/bin/sh").map_err(|_| usage())?;
            let mut sh_argv = vec![sh.clone()];
            sh_argv.extend(argv);
            nix::unistd::execv(&sh, &sh_argv)
                .map_err(|e| (126, format!("{}: {}", program.to_string_lossy(), e.desc())))
        }
        Err(e) => {
            let code = if e == nix::Error::ENOENT { 127 } else { 126 };
            Err((code, format!("{}: {}", program.to_string_lossy(), e.desc())))
        }
        Ok(never) => match never {},
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn root_switches_to_the_owner_and_refuses_root_unless_allowed() {
        assert_eq!(decide(1001, 0, false), Ok(Some(1001)));
        assert_eq!(decide(0, 0, true), Ok(None));
        let e = decide(0, 0, false).unwrap_err();
        assert!(e.contains("--allow-root-jobs"), "{e}");
    }

    #[test]
    fn an_unprivileged_service_runs_only_its_own_uid() {
        assert_eq!(decide(500, 500, false), Ok(None));
        let e = decide(501, 500, true).unwrap_err();
        assert!(e.contains("runs only the instance owner's jobs"), "{e}");
        assert!(decide(0, 500, true).is_err());
    }

    #[test]
    fn accounts_are_looked_up_with_their_groups() {
        let root = lookup(0).unwrap();
        assert_eq!((root.uid, root.gid), (0, 0));
        assert!(root.groups.contains(&0));
        assert!(lookup(4_000_000_000).unwrap_err().contains("no account"));
    }

    #[test]
    fn the_wrapped_command_names_identity_then_program() {
        let who = RunAs {
            uid: 7,
            gid: 8,
            groups: vec![8, 9],
        };
        let (exe, words) = wrap(
            PathBuf::from("/x/fluxgate-exec"),
            &who,
            std::path::Path::new("/bin/echo"),
            &["hi".to_string()],
        );
        assert_eq!(exe, PathBuf::from("/x/fluxgate-exec"));
        let words: Vec<_> = words
            .iter()
            .map(|w| w.to_string_lossy().into_owned())
            .collect();
        assert_eq!(words, ["run-as", "7", "8", "8,9", "--", "/bin/echo", "hi"]);
    }
}
