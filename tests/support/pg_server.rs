//! A throwaway PostgreSQL server for the fleet tests, shared by the unit tests
//! (`src/store/pg`) and the integration tests (`tests/cli/fleet.rs`): one server per test
//! binary, started on first use in `target/pg-test/<pid>` on a unix socket only (no TCP
//! port), and one fresh database per test ([`database`]).
//!
//! The machine's PostgreSQL binaries are used (`pg_config --bindir`, else
//! `/usr/lib/postgresql/*/bin`). `initdb` refuses to run as root, so as root the cluster is
//! created and run as the `postgres` user. The server dies with the test binary: it is
//! watched by a detached shell that stops it once the process is gone.
//! Durability is off (`fsync`, `full_page_writes`): a test's data lives a few seconds.
//!
//! Authentication: `trust` for the `postgres` superuser on the socket, `scram-sha-256` for
//! every other role, so that a test can try a wrong password ([`PASSWORD_ROLE`]).

use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, Instant};

/// A role that logs in with a password ([`PASSWORD`]), owning the databases [`database`]
/// creates.
pub(crate) const PASSWORD_ROLE: &str = "hb_fleet";
pub(crate) const PASSWORD: &str = "s3cret-pg-pass";

/// The running server: its socket directory and data directory.
pub(crate) struct Server {
    pub(crate) socket_dir: PathBuf,
    pub(crate) data_dir: PathBuf,
    pub(crate) bin_dir: PathBuf,
    /// The user the server runs as (`postgres` when the tests run as root).
    run_as: Option<(u32, u32)>,
    /// Stopped and removed when dropped ([`private_server`]).
    private: bool,
}

static SERVER: OnceLock<Result<Server, String>> = OnceLock::new();
static NEXT_DB: AtomicU32 = AtomicU32::new(0);

/// The shared server, started on first use; Err with why when this machine cannot run one.
pub(crate) fn server() -> Result<&'static Server, String> {
    SERVER
        .get_or_init(|| start("shared"))
        .as_ref()
        .map_err(Clone::clone)
}

/// A server of its own, for a test that stops or restarts it (the shared one serves the
/// tests running beside it). Stopped when dropped.
pub(crate) fn private_server(name: &str) -> Result<Server, String> {
    let mut server = start(name)?;
    server.private = true;
    Ok(server)
}

impl Drop for Server {
    fn drop(&mut self) {
        if self.private {
            let _ = self.pg_ctl(&["stop", "-m", "immediate"]);
            let _ = std::fs::remove_dir_all(&self.socket_dir);
        }
    }
}

/// A URL (key/value form) of a new, empty database owned by [`PASSWORD_ROLE`], reached as
/// that role with its password.
pub(crate) fn database() -> Result<String, String> {
    server()?.database()
}

impl Server {
    /// A URL of a new, empty database on this server (see [`database`]).
    pub(crate) fn database(&self) -> Result<String, String> {
        let server = self;
        let name = format!(
            "hb_{}_{}",
            std::process::id(),
            NEXT_DB.fetch_add(1, Ordering::Relaxed)
        );
        server.psql(&format!("CREATE DATABASE {name} OWNER {PASSWORD_ROLE}"))?;
        Ok(server.url(&name, PASSWORD_ROLE, PASSWORD))
    }

    /// A key/value connection string for `db` as `user` with `password`.
    pub(crate) fn url(&self, db: &str, user: &str, password: &str) -> String {
        format!(
            "host={} user={user} password={password} dbname={db}",
            self.socket_dir.display()
        )
    }

    /// Run one SQL statement as the superuser.
    pub(crate) fn psql(&self, sql: &str) -> Result<(), String> {
        let out = Command::new(self.bin_dir.join("psql"))
            .args(["-X", "-q", "-v", "ON_ERROR_STOP=1", "-h"])
            .arg(&self.socket_dir)
            .args(["-U", "postgres", "-d", "postgres", "-c", sql])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("psql: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "psql {sql:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(())
    }

    /// Stop the server (fast shutdown: connections are closed).
    pub(crate) fn stop(&self) -> Result<(), String> {
        self.pg_ctl(&["stop", "-m", "fast", "-w"])
    }

    /// Start it again after [`Server::stop`], on the same socket and data.
    pub(crate) fn restart(&self) -> Result<(), String> {
        self.pg_ctl(&["restart", "-m", "fast", "-w"])
    }

    fn pg_ctl(&self, args: &[&str]) -> Result<(), String> {
        let mut cmd = Command::new(self.bin_dir.join("pg_ctl"));
        cmd.args(args)
            .arg("-D")
            .arg(&self.data_dir)
            .arg("-l")
            .arg(self.data_dir.with_file_name("server.log"))
            .stdin(Stdio::null())
            .stdout(Stdio::null());
        if let Some((uid, gid)) = self.run_as {
            cmd.uid(uid).gid(gid);
        }
        let out = cmd.output().map_err(|e| format!("pg_ctl: {e}"))?;
        if !out.status.success() {
            return Err(format!(
                "pg_ctl {args:?}: {}",
                String::from_utf8_lossy(&out.stderr)
            ));
        }
        Ok(())
    }
}

fn bin_dir() -> Option<PathBuf> {
    let from_config = Command::new("pg_config")
        .arg("--bindir")
        .output()
        .ok()
        .filter(|o| o.status.success())
        .map(|o| PathBuf::from(String::from_utf8_lossy(&o.stdout).trim()));
    let candidates = from_config.into_iter().chain(
        std::fs::read_dir("/usr/lib/postgresql")
            .into_iter()
            .flatten()
            .flatten()
            .map(|e| e.path().join("bin")),
    );
    candidates
        .into_iter()
        .find(|d| d.join("initdb").exists() && d.join("postgres").exists())
}

fn start(name: &str) -> Result<Server, String> {
    let bin_dir = bin_dir().ok_or(
        "PostgreSQL is not installed (no initdb/postgres found; apt-get install postgresql)",
    )?;
    let root = std::env::temp_dir().join("heartbeat-pg-test");
    std::fs::create_dir_all(&root).map_err(|e| format!("{}: {e}", root.display()))?;
    remove_stale(&root);
    let base = root.join(format!("{}-{name}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).map_err(|e| format!("{}: {e}", base.display()))?;
    let run_as = if nix::unistd::geteuid().is_root() {
        let user = nix::unistd::User::from_name("postgres")
            .ok()
            .flatten()
            .ok_or("running as root and there is no `postgres` user to run the server as")?;
        std::os::unix::fs::chown(&base, Some(user.uid.as_raw()), Some(user.gid.as_raw()))
            .map_err(|e| format!("chown {}: {e}", base.display()))?;
        // The server must reach its directory through every parent.
        Some((user.uid.as_raw(), user.gid.as_raw()))
    } else {
        None
    };
    let data_dir = base.join("data");
    let pwfile = base.join("pw");
    std::fs::write(&pwfile, "postgres\n").map_err(|e| e.to_string())?;
    if let Some((uid, gid)) = run_as {
        let _ = std::os::unix::fs::chown(&pwfile, Some(uid), Some(gid));
    }
    let mut initdb = Command::new(bin_dir.join("initdb"));
    initdb
        .arg("-D")
        .arg(&data_dir)
        .args(["-U", "postgres", "-E", "UTF8", "--no-sync", "--locale=C"])
        .args(["--auth-local=trust", "--auth-host=reject"])
        .stdin(Stdio::null());
    if let Some((uid, gid)) = run_as {
        initdb.uid(uid).gid(gid);
    }
    let out = initdb.output().map_err(|e| format!("initdb: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "initdb: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ));
    }
    // The superuser on trust; every other role by password.
    let hba = "local all postgres trust\nlocal all all scram-sha-256\n";
    std::fs::write(data_dir.join("pg_hba.conf"), hba).map_err(|e| e.to_string())?;
    let conf = format!(
        "listen_addresses = ''\nunix_socket_directories = '{}'\nfsync = off\n\
         full_page_writes = off\nsynchronous_commit = off\nmax_connections = 200\n\
         shared_buffers = 16MB\n",
        base.display()
    );
    let mut auto = std::fs::OpenOptions::new()
        .append(true)
        .open(data_dir.join("postgresql.conf"))
        .map_err(|e| e.to_string())?;
    std::io::Write::write_all(&mut auto, conf.as_bytes()).map_err(|e| e.to_string())?;

    let server = Server {
        socket_dir: base.clone(),
        data_dir,
        bin_dir,
        run_as,
        private: false,
    };
    server.pg_ctl(&["start", "-w", "-t", "60"])?;
    // Stopped when this process ends, however it ends: a thread that lives as long as the
    // process holds a child that waits for this process to die.
    // It runs as this process's user, which may signal both (SIGQUIT: immediate shutdown).
    let watchdog = format!(
        "while kill -0 {} 2>/dev/null; do sleep 1; done; \
         kill -QUIT $(head -n 1 {}/postmaster.pid) 2>/dev/null; sleep 2; rm -rf {}",
        std::process::id(),
        server.data_dir.display(),
        base.display(),
    );
    let mut keeper = Command::new("sh");
    keeper
        .args(["-c", &watchdog])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    // Detached into its own session so a test's process-group signal does not reach it.
    unsafe {
        keeper.pre_exec(|| {
            let _ = nix::unistd::setsid();
            Ok(())
        });
    }
    keeper.spawn().map_err(|e| format!("watchdog: {e}"))?;

    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        match server.psql(&format!(
            "CREATE ROLE {PASSWORD_ROLE} LOGIN CREATEDB PASSWORD '{PASSWORD}'"
        )) {
            Ok(()) => break,
            Err(e) if Instant::now() > deadline => return Err(e),
            Err(_) => std::thread::sleep(Duration::from_millis(200)),
        }
    }
    Ok(server)
}

/// Remove the directories of servers whose test binary is gone (a killed run's).
fn remove_stale(root: &Path) {
    for entry in std::fs::read_dir(root).into_iter().flatten().flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<i32>().ok())
        else {
            continue;
        };
        let alive = nix::sys::signal::kill(nix::unistd::Pid::from_raw(pid), None).is_ok();
        if !alive {
            let _ = std::fs::remove_dir_all(entry.path());
        }
    }
}
