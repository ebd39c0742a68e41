//! `mote rpc serve`: TVM 0.27's RPC server protocol over Mote (see docs/rpc.md).

use std::net::IpAddr;
use std::path::PathBuf;
use std::time::Duration;

use clap::Subcommand;
use mote_rpc::{Limits, Server};

#[derive(Subcommand)]
pub enum RpcCommand {
    /// Serve TVM's RPC clients until Ctrl-C: listen (tvm.rpc.connect), register with a
    /// tracker (--tracker; clients use connect_tracker(...).request(key)), or serve through a
    /// proxy (--through-proxy).
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
    /// Key clients must present (TVM's `--key`; a label, not a secret). With --tracker or
    /// --through-proxy it is the key clients request.
    #[arg(long, default_value = "")]
    key: String,
    /// Also register with the TVM tracker at HOST:PORT and accept only the one-time match
    /// keys it hands to clients.
    #[arg(long, value_name = "HOST:PORT", conflicts_with = "through_proxy")]
    tracker: Option<String>,
    /// With --tracker: the address the tracker gives clients (default: the one it sees).
    #[arg(long, value_name = "ADDR", requires = "tracker")]
    custom_addr: Option<String>,
    /// Listen nowhere: connect out to the TVM proxy at HOST:PORT as server:KEY and serve the
    /// clients it pairs with us (--host/--port/--allow are then unused).
    #[arg(long, value_name = "HOST:PORT")]
    through_proxy: Option<String>,
    /// Accept connections only from these addresses (repeatable; default: anyone who can
    /// reach the socket).
    #[arg(long = "allow", value_name = "IP")]
    allow: Vec<IpAddr>,
    /// Let clients chain sessions to HOST:PORT ([V6]:PORT) with TVM's session constructor
    /// rpc.Connect (repeatable; default: chaining is refused). The server then connects there
    /// for a client and relays its session: list only servers it may reach on a client's
    /// behalf (docs/rpc.md, "Chained sessions").
    #[arg(long = "allow-hop", value_name = "HOST:PORT")]
    allow_hop: Vec<String>,
    /// Sessions served at once (default 4; with --tracker 1). Listening, more connections are
    /// closed at once; with --tracker it is the number of places offered to the tracker, each
    /// taken by one client at a time (TVM's server offers one: a tuning tool timing two uploads
    /// at once on one device gets wrong numbers).
    #[arg(long, value_parser = clap::value_parser!(u32).range(1..=1024))]
    max_sessions: Option<u32>,
    /// Folder for the per-session sandboxes (default: a new temporary folder).
    #[arg(long, value_name = "DIR")]
    sandbox: Option<PathBuf>,
    /// Close sessions idle for this many seconds (0: never).
    #[arg(long, value_name = "SECONDS", default_value_t = 0)]
    timeout: u64,
    /// Threads of each session's runtime (default: Mote's default).
    #[arg(long)]
    threads: Option<usize>,
    /// Load uploaded libraries as data, never as code: only code-free models run, a library
    /// that calls compiled kernels is refused (docs/code-free.md); what a server on iOS does.
    #[arg(long)]
    code_free: bool,
    /// Largest upload, in MiB.
    #[arg(long, value_name = "MIB", default_value_t = 256)]
    max_upload_mib: u64,
    /// The most VM instructions one model call may execute; beyond it the call fails
    /// (ResourceExhausted). A session's -timeout and Ctrl-C stop a call whatever this says.
    #[arg(long, value_name = "N", default_value_t = mote::DEFAULT_MAX_INSTRUCTIONS)]
    max_instructions: u64,
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
        .allow_hops(a.allow_hop)
        .code_free(a.code_free)
        .max_instructions(a.max_instructions)
        .limits(limits);
    if let Some(n) = a.max_sessions {
        b = b.max_sessions(n as usize);
    }
    if let Some(t) = a.tracker {
        b = b.tracker(t, a.custom_addr);
    } else if let Some(p) = a.through_proxy {
        b = b.through_proxy(p);
    }
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
    match server.local_addr() {
        Some(addr) => eprintln!("mote rpc: listening on {addr} (Ctrl-C stops)"),
        None => eprintln!("mote rpc: serving through the proxy (Ctrl-C stops)"),
    }
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
