//! A private PostgreSQL server for a test: `initdb` into a temporary
//! directory (as the `postgres` user when the tests run as root), `pg_ctl`
//! on a free loopback port, stopped and removed when dropped.

use std::path::{Path, PathBuf};
use std::process::Command;

/// Set to `postgres` to run every instance of the suite on PostgreSQL.
pub const STORE_ENV: &str = "FLUXGATE_TEST_STORE";

/// Does this run put instances on PostgreSQL?
pub fn suite_on_postgres() -> bool {
    std::env::var(STORE_ENV).is_ok_and(|v| v == "postgres")
}

/// A running server.
#[derive(Debug)]
pub struct PgServer {
    bin: PathBuf,
    dir: tempfile::TempDir,
    port: u16,
    next_db: std::sync::atomic::AtomicU32,
    /// Server certificate and key (PEM) when it serves TLS.
    tls: Option<(Vec<u8>, Vec<u8>)>,
    /// The network namespace it runs in, if not this process's.
    netns: Option<String>,
    /// The address it listens on.
    addr: String,
}

/// Where Debian keeps the server's programs (the newest version there).
fn bindir() -> PathBuf {
    let mut found: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| {
            d.filter_map(|e| e.ok().map(|e| e.path().join("bin")))
                .filter(|p| p.join("initdb").exists())
                .collect()
        })
        .unwrap_or_default();
    found.sort_by_key(|p| {
        p.parent()
            .and_then(|v| v.file_name())
            .and_then(|v| v.to_str())
            .and_then(|v| v.parse::<u32>().ok())
            .unwrap_or(0)
    });
    found.pop().expect(
        "PostgreSQL's server is not installed (apt-get install postgresql): \
         /usr/lib/postgresql/*/bin/initdb is missing",
    )
}

/// A free loopback port (the server binds it right after).
fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .expect("a free port")
}

/// `program args…` as the server's owner: `postgres` when we are root.
fn as_owner(program: &Path, args: &[&str]) -> Command {
    if nix::unistd::geteuid().is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program).args(args);
        c
    } else {
        let mut c = Command::new(program);
        c.args(args);
        c
    }
}

fn run(mut cmd: Command, what: &str) {
    let out = cmd.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

impl PgServer {
    /// Make and start a new cluster.
    pub fn start() -> PgServer {
        Self::start_with(None)
    }

    /// Make and start a new cluster serving TLS with `cert` and `key` (PEM).
    pub fn start_tls(cert: &[u8], key: &[u8]) -> PgServer {
        Self::start_with(Some((cert.to_vec(), key.to_vec())))
    }

    /// Make and start a new cluster inside network namespace `netns`,
    /// listening on `addr` there (a test host of [`crate::netns::Net`]).
    pub fn start_in_netns(netns: &str, addr: &str) -> PgServer {
        Self::start_at(None, Some((netns.to_string(), addr.to_string())))
    }

    fn start_with(tls: Option<(Vec<u8>, Vec<u8>)>) -> PgServer {
        Self::start_at(tls, None)
    }

    fn start_at(tls: Option<(Vec<u8>, Vec<u8>)>, netns: Option<(String, String)>) -> PgServer {
        let bin = bindir();
        let dir = tempfile::tempdir().expect("tempdir");
        if nix::unistd::geteuid().is_root() {
            let pg = nix::unistd::User::from_name("postgres")
                .ok()
                .flatten()
                .expect("the postgres user (from the postgresql package)");
            nix::unistd::chown(dir.path(), Some(pg.uid), Some(pg.gid)).expect("chown");
        }
        let data = dir.path().join("data");
        let data_s = data.display().to_string();
        run(
            as_owner(
                &bin.join("initdb"),
                &["-D", &data_s, "-A", "trust", "-U", "postgres", "--no-sync"],
            ),
            "initdb",
        );
        if let Some((cert, key)) = &tls {
            use std::os::unix::fs::PermissionsExt;
            for (name, pem) in [("server.crt", cert), ("server.key", key)] {
                let path = data.join(name);
                std::fs::write(&path, pem).expect("write TLS file");
                // The server refuses a key others can read.
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))
                    .expect("chmod");
                if nix::unistd::geteuid().is_root() {
                    let pg = nix::unistd::User::from_name("postgres").ok().flatten();
                    if let Some(pg) = pg {
                        nix::unistd::chown(&path, Some(pg.uid), Some(pg.gid)).expect("chown");
                    }
                }
            }
        }
        let (netns, addr) = match netns {
            Some((ns, addr)) => {
                // Its clients are the other test hosts of the namespaces'
                // network (RFC 2544's range), trusted as loopback is.
                use std::io::Write;
                let mut hba = std::fs::OpenOptions::new()
                    .append(true)
                    .open(data.join("pg_hba.conf"))
                    .expect("pg_hba.conf");
                writeln!(hba, "host all all 198.18.0.0/15 trust").expect("write pg_hba.conf");
                (Some(ns), addr)
            }
            None => (None, "127.0.0.1".to_string()),
        };
        let server = PgServer {
            bin,
            dir,
            port: free_port(),
            next_db: std::sync::atomic::AtomicU32::new(0),
            tls,
            netns,
            addr,
        };
        server.pg_ctl_start();
        server
    }

    fn data(&self) -> String {
        self.dir.path().join("data").display().to_string()
    }

    fn pg_ctl_start(&self) {
        let mut opts = format!(
            "-c listen_addresses={} -c port={} -c unix_socket_directories={} \
             -c max_connections=300",
            self.addr,
            self.port,
            self.dir.path().display()
        );
        if self.tls.is_some() {
            opts.push_str(" -c ssl=on -c ssl_cert_file=server.crt -c ssl_key_file=server.key");
        }
        let log = self.dir.path().join("server.log").display().to_string();
        let start = as_owner(
            &self.bin.join("pg_ctl"),
            &["-D", &self.data(), "-o", &opts, "-l", &log, "-w", "start"],
        );
        run(self.in_netns(start), "pg_ctl start");
    }

    /// `cmd` run in the server's network namespace, if it has one.
    fn in_netns(&self, cmd: Command) -> Command {
        let Some(ns) = &self.netns else {
            return cmd;
        };
        let mut wrapped = Command::new("ip");
        wrapped
            .args(["netns", "exec", ns])
            .arg(cmd.get_program())
            .args(cmd.get_args());
        wrapped
    }

    /// Where psql reaches the server: its address, or its socket directory
    /// when it runs in another network namespace.
    fn psql_host(&self) -> String {
        match self.netns {
            Some(_) => self.dir.path().display().to_string(),
            None => self.addr.clone(),
        }
    }

    /// Stop the server (fast: sessions are ended) and start it again.
    pub fn restart(&self, down_for: std::time::Duration) {
        run(
            as_owner(
                &self.bin.join("pg_ctl"),
                &["-D", &self.data(), "-m", "fast", "-w", "stop"],
            ),
            "pg_ctl stop",
        );
        std::thread::sleep(down_for);
        self.pg_ctl_start();
    }

    /// A URL of a fresh, empty database of this server.
    pub fn new_database(&self) -> String {
        let n = self
            .next_db
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let name = format!("fluxgate{n}");
        let mut c = Command::new(self.bin.join("psql"));
        c.env("PGSSLMODE", "prefer");
        let host = self.psql_host();
        c.args([
            "-h",
            &host,
            "-p",
            &self.port.to_string(),
            "-U",
            "postgres",
            "-q",
            "-c",
            &format!("CREATE DATABASE {name}"),
        ]);
        run(c, "CREATE DATABASE");
        self.url(&name)
    }

    /// The URL of database `name`.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://postgres@{}:{}/{name}", self.addr, self.port)
    }

    /// Run one SQL statement in database `url`'s database; its output rows
    /// (unaligned, tab-separated).
    pub fn query(&self, url: &str, sql: &str) -> String {
        let db = url.rsplit('/').next().unwrap_or("postgres");
        let host = self.psql_host();
        let out = Command::new(self.bin.join("psql"))
            .args([
                "-h",
                &host,
                "-p",
                &self.port.to_string(),
                "-U",
                "postgres",
                "-d",
                db,
                "-AtX",
                "-F",
                "\t",
                "-c",
                sql,
            ])
            .output()
            .expect("psql");
        assert!(
            out.status.success(),
            "psql: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        let _ = as_owner(
            &self.bin.join("pg_ctl"),
            &["-D", &self.data(), "-m", "immediate", "-w", "stop"],
        )
        .output();
    }
}
