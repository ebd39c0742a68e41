//! `mote rpc serve`: TVM 0.27's RPC server protocol over Mote (see docs/rpc.md).

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Subcommand;
use mote_rpc::{Limits, Server};

#[derive(Subcommand)]
pub enum RpcCommand {
    /// Serve TVM's RPC clients (tvm.rpc.connect) in listen mode until Ctrl-C.
    ///
    /// An uploaded model is native code running with this process's rights, and the key is
    /// not a password: keep the default loopback address, or list the peers allowed with
    /// --allow (docs/rpc.md, "Threat model").
    Serve(ServeArgs),
}

#[derive(clap::Args)]
pub struct ServeArgs {
    /// Address to listen on.
    #[arg(long, default_value = "127.0.0.1")]
    host: String,
    /// Port to listen on (0: any free port, printed at start).
    #[arg(long, default_value_t = 9090)]
    port: u16,
    /// Key clients must present (TVM's `--key`; a label, not a secret).
    #[arg(long, default_value = "")]
    key: String,
    /// Accept connections only from these addresses (repeatable; default: anyone who can
    /// reach the socket).
    #[arg(long = "allow", value_name = "IP")]
    allow: Vec<IpAddr>,
    /// Sessions served at once; more connections are closed at once.
    #[arg(long, default_value_t = 4, value_parser = clap::value_parser!(u32).range(1..=1024))]
    max_sessions: u32,
    /// Folder for the per-session sandboxes (default: a new temporary folder).
    #[arg(long, value_name = "DIR")]
    sandbox: Option<PathBuf>,
    /// Close sessions idle for this many seconds (0: never).
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    timeout: u64,
    /// Threads of each session's runtime (default: Mote's default).
    #[arg(long)]
    threads: Option<usize>,
    /// Largest upload, in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 256)]
    max_upload_mib: u64,
}

pub fn run(cmd: RpcCommand) -> Result<(), Box<dyn std::error::Error>> {
    match cmd {
        RpcCommand::Serve(a) => serve(a),
    }
}

fn serve(a: ServeArgs) -> Result<(), Box<dyn std::error::Error>> {
    init_log();
    let limits = Limits {
        max_upload_file: a.max_upload_mib << 20,
        max_packet: (a.max_upload_mib << 20) + (1 << 20),
        max_sandbox_bytes: (a.max_upload_mib << 21).max(Limits::default().max_sandbox_bytes),
        ..Limits::default()
    };
    let mut b = Server::builder()
        .host(a.host)
        .port(a.port)
        .key(a.key)
        .allow(a.allow)
        .max_sessions(a.max_sessions as usize)
        .limits(limits);
    if let Some(dir) = a.sandbox {
        b = b.sandbox_root(dir);
    }
    if a.timeout > 0 {
        b = b.idle_timeout(Duration::from_secs(a.timeout));
    }
    if let Some(t) = a.threads {
        b = b.session_threads(t);
    }
    let server = b.spawn()?;
    let stop = server.stop_flag();
    for sig in [signal_hook::consts::SIGINT, signal_hook::consts::SIGTERM] {
        signal_hook::flag::register(sig, stop.clone())?;
    }
    eprintln!(
        "mote rpc: listening on {} (Ctrl-C stops)",
        server.local_addr()
    );
    server.wait();
    Ok(())
}

/// Log lines to stderr, `[level] message`; `MOTE_LOG=debug|info|warn|error` (default info).
fn init_log() {
    struct Stderr;
    impl log::Log for Stderr {
        fn enabled(&self, m: &log::Metadata) -> bool {
            m.level() <= log::max_level()
        }
        fn log(&self, r: &log::Record) {
            if self.enabled(r.metadata()) {
                eprintln!("[{}] {}", r.level(), r.args());
            }
        }
        fn flush(&self) {}
    }
    static LOGGER: Stderr = Stderr;
    let level = match std::env::var("MOTE_LOG").as_deref() {
        Ok("debug") => log::LevelFilter::Debug,
        Ok("warn") => log::LevelFilter::Warn,
        Ok("error") => log::LevelFilter::Error,
        _ => log::LevelFilter::Info,
    };
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(level);
    }
}
