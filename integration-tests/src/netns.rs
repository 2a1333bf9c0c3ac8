//! A small network of this machine's own: hosts in network namespaces on
//! one bridge, and partitions between them as iptables DROP rules inside
//! the hosts' namespaces. Everything is removed when the [`Net`] is
//! dropped (a failing test included): deleting a namespace takes its
//! interfaces and its rules with it.
//!
//! The addresses are in 198.18.0.0/15, the range set aside for network
//! tests (RFC 2544); they exist only inside these namespaces.

use std::os::fd::AsFd;
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// The connection mark of connections made across a cut reply path.
const CUT_MARK: &str = "0x70";

/// Namespaces made by this process so far (their names are unique).
static MADE: AtomicU32 = AtomicU32::new(0);

/// Hosts on one bridge, each in its own network namespace.
#[derive(Debug)]
pub struct Net {
    switch: String,
    hosts: Vec<String>,
}

/// Run `ip ARGS...`, failing the test with its stderr if it fails.
fn ip(args: &[&str]) {
    run("ip", args);
}

fn run(program: &str, args: &[&str]) {
    let out = Command::new(program)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("{program} {args:?}: {e}"));
    assert!(
        out.status.success(),
        "{program} {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Can this process make network namespaces (root with `ip` and `iptables`)?
pub fn available() -> Result<(), String> {
    if !nix::unistd::geteuid().is_root() {
        return Err("network namespaces need root".into());
    }
    for (program, arg) in [("ip", "-V"), ("iptables", "-V")] {
        if !crate::command::has_program(program, arg) {
            return Err(format!("{program} is not installed"));
        }
    }
    Ok(())
}

impl Net {
    /// `hosts` hosts on one bridge, host `i` at [`Net::addr`]`(i)`.
    pub fn new(hosts: usize) -> Net {
        if let Err(why) = available() {
            panic!("{why}");
        }
        let n = MADE.fetch_add(1, Ordering::Relaxed);
        let prefix = format!("fgn{}-{n}", std::process::id());
        let mut net = Net {
            switch: format!("{prefix}-sw"),
            hosts: Vec::new(),
        };
        ip(&["netns", "add", &net.switch]);
        ip(&["-n", &net.switch, "link", "add", "br0", "type", "bridge"]);
        ip(&["-n", &net.switch, "link", "set", "br0", "up"]);
        for i in 0..hosts {
            let ns = format!("{prefix}-h{i}");
            ip(&["netns", "add", &ns]);
            // Pushed at once, so a failure below still removes it.
            net.hosts.push(ns.clone());
            let port = format!("p{i}");
            ip(&[
                "-n",
                &net.switch,
                "link",
                "add",
                &port,
                "type",
                "veth",
                "peer",
                "name",
                "eth0",
                "netns",
                &ns,
            ]);
            ip(&["-n", &net.switch, "link", "set", &port, "master", "br0"]);
            ip(&["-n", &net.switch, "link", "set", &port, "up"]);
            let cidr = format!("{}/24", Self::addr(i));
            ip(&["-n", &ns, "addr", "add", &cidr, "dev", "eth0"]);
            ip(&["-n", &ns, "link", "set", "eth0", "up"]);
            ip(&["-n", &ns, "link", "set", "lo", "up"]);
        }
        net
    }

    /// The address of host `i`.
    pub fn addr(i: usize) -> String {
        format!("198.18.0.{}", i + 1)
    }

    /// The namespace of host `i`.
    pub fn ns(&self, i: usize) -> &str {
        &self.hosts[i]
    }

    /// `cmd` run inside host `i` (through `ip netns exec`, which becomes it).
    pub fn command(&self, i: usize, cmd: &Command) -> Command {
        let mut wrapped = Command::new("ip");
        wrapped
            .args(["netns", "exec", self.ns(i)])
            .arg(cmd.get_program())
            .args(cmd.get_args());
        for (k, v) in cmd.get_envs() {
            match v {
                Some(v) => wrapped.env(k, v),
                None => wrapped.env_remove(k),
            };
        }
        if let Some(dir) = cmd.get_current_dir() {
            wrapped.current_dir(dir);
        }
        wrapped
    }

    /// Move the calling thread into host `i`: the sockets it makes from
    /// now on are that host's (a test's own gRPC clients).
    pub fn enter(&self, i: usize) {
        let path = format!("/run/netns/{}", self.ns(i));
        let file = std::fs::File::open(&path).unwrap_or_else(|e| panic!("{path}: {e}"));
        nix::sched::setns(file.as_fd(), nix::sched::CloneFlags::CLONE_NEWNET)
            .unwrap_or_else(|e| panic!("setns {path}: {e}"));
    }

    /// Drop every packet between hosts `a` and `b`, both ways.
    pub fn cut(&self, a: usize, b: usize) {
        self.drop_from(a, b);
        self.drop_from(b, a);
    }

    /// Drop every packet host `to` receives from host `from`.
    pub fn drop_from(&self, to: usize, from: usize) {
        self.iptables(to, &["-A", "INPUT", "-s", &Self::addr(from), "-j", "DROP"]);
    }

    /// Drop what host `to` receives from host `from` except connection
    /// set-up: requests get through and connections are made, answers are
    /// lost (a reply path that fails). Connections made meanwhile are
    /// marked, for [`Net::heal_new_connections`].
    pub fn drop_replies_from(&self, to: usize, from: usize) {
        let from = Self::addr(from);
        self.iptables(
            to,
            &[
                "-A",
                "INPUT",
                "-s",
                &from,
                "-p",
                "tcp",
                "--tcp-flags",
                "SYN",
                "SYN",
                "-j",
                "CONNMARK",
                "--set-mark",
                CUT_MARK,
            ],
        );
        self.iptables(
            to,
            &[
                "-A",
                "INPUT",
                "-s",
                &from,
                "-p",
                "tcp",
                "--tcp-flags",
                "SYN",
                "NONE",
                "-j",
                "DROP",
            ],
        );
    }

    /// Heal what [`Net::drop_replies_from`] cut for connections made from
    /// now on; those made during the cut stay cut for good, as if the far
    /// end had forgotten them: only a client that gives up on its own and
    /// connects again gets an answer.
    pub fn heal_new_connections(&self, to: usize, from: usize) {
        self.heal(to);
        let from = Self::addr(from);
        self.iptables(
            to,
            &[
                "-A", "INPUT", "-s", &from, "-m", "connmark", "--mark", CUT_MARK, "-j", "DROP",
            ],
        );
    }

    /// Remove every rule host `i` holds: its partitions heal.
    pub fn heal(&self, i: usize) {
        self.iptables(i, &["-F", "INPUT"]);
    }

    /// Heal every host.
    pub fn heal_all(&self) {
        for i in 0..self.hosts.len() {
            self.heal(i);
        }
    }

    fn iptables(&self, i: usize, args: &[&str]) {
        let mut all = vec!["netns", "exec", self.ns(i), "iptables", "-w"];
        all.extend_from_slice(args);
        run("ip", &all);
    }
}

impl Drop for Net {
    fn drop(&mut self) {
        for ns in self.hosts.iter().chain(std::iter::once(&self.switch)) {
            let _ = Command::new("ip")
                .args(["netns", "del", ns])
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}
