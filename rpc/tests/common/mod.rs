//! Helpers shared by the RPC tests: the server in-process, TVM's client as a subprocess.

#![allow(dead_code)]

use std::path::PathBuf;
use std::process::{Child, Command, Output, Stdio};

use mote_rpc::{Server, ServerHandle};

/// The TVM 0.27 venv's python, from MOTE_PYTHON (scripts/test-rpc.sh sets it).
pub fn python() -> String {
    std::env::var("MOTE_PYTHON").unwrap_or_else(|_| {
        panic!(
            "MOTE_PYTHON is not set: point it at the python of a venv with TVM 0.27 \
             (scripts/test-rpc.sh does it from scripts/venv.sh)"
        )
    })
}

/// The x86_64 model zoo, from MOTE_ZOO_DIR.
pub fn zoo() -> PathBuf {
    let dir = std::env::var("MOTE_ZOO_DIR").unwrap_or_else(|_| {
        panic!("MOTE_ZOO_DIR is not set: point it at the x86_64 zoo (scripts/zoo.sh prints it)")
    });
    let dir = PathBuf::from(dir);
    assert!(
        dir.join("manifest.json").is_file(),
        "MOTE_ZOO_DIR={} has no manifest.json",
        dir.display()
    );
    dir
}

/// A server on a free loopback port with default settings. The zoo's `packed` model calls a
/// host function by name; like any embedder, the test process registers it first.
pub fn server() -> ServerHandle {
    init_log();
    register_scale_shift();
    Server::builder()
        .port(0)
        .session_threads(2)
        .spawn()
        .expect("server starts")
}

pub fn init_log() {
    struct L;
    impl log::Log for L {
        fn enabled(&self, _: &log::Metadata) -> bool {
            true
        }
        fn log(&self, r: &log::Record) {
            eprintln!("[{}] {}", r.level(), r.args());
        }
        fn flush(&self) {}
    }
    static LOGGER: L = L;
    if log::set_logger(&LOGGER).is_ok() {
        log::set_max_level(log::LevelFilter::Info);
    }
}

fn script(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/python")
        .join(name)
}

fn command(name: &str, server: &ServerHandle, extra: &[&str]) -> Command {
    command_in(name, server, &zoo(), extra)
}

/// The x86_64 offload zoo, from MOTE_OFFLOAD_ZOO_DIR: its code-free models are what a
/// code-free server runs.
pub fn offload_zoo() -> PathBuf {
    let dir = std::env::var("MOTE_OFFLOAD_ZOO_DIR").unwrap_or_else(|_| {
        panic!("MOTE_OFFLOAD_ZOO_DIR is not set: point it at the x86_64 offload zoo (scripts/offload-zoo.sh)")
    });
    PathBuf::from(dir)
}

/// A client script with ZOO_DIR (argv 3) set to `zoo`.
fn command_in(name: &str, server: &ServerHandle, zoo: &std::path::Path, extra: &[&str]) -> Command {
    let addr = server.local_addr().expect("listening");
    let mut c = Command::new(python());
    c.arg(script(name))
        .arg(addr.ip().to_string())
        .arg(addr.port().to_string())
        .arg(zoo)
        .args(extra)
        .env("PYTHONPATH", script(""))
        .env("PYTHONUNBUFFERED", "1");
    c
}

/// Runs a client script to completion; panics with its output unless it exits 0.
pub fn run(name: &str, server: &ServerHandle, extra: &[&str]) -> String {
    run_in(name, server, &zoo(), extra)
}

/// [`run`] with ZOO_DIR (argv 3) set to `zoo`.
pub fn run_in(name: &str, server: &ServerHandle, zoo: &std::path::Path, extra: &[&str]) -> String {
    let out: Output = command_in(name, server, zoo, extra)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} (MOTE_PYTHON): {e}", python()));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{name} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
    eprintln!("{name}: {stdout}");
    stdout
}

/// Starts a client script with piped stdin/stdout.
pub fn spawn(name: &str, server: &ServerHandle, extra: &[&str]) -> Child {
    spawn_in(name, server, &zoo(), extra)
}

/// [`spawn`] with ZOO_DIR (argv 3) set to `zoo`.
pub fn spawn_in(name: &str, server: &ServerHandle, zoo: &std::path::Path, extra: &[&str]) -> Child {
    command_in(name, server, zoo, extra)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {} (MOTE_PYTHON): {e}", python()))
}

/// `mote.zoo.scale_shift(src, dst, n)`: dst[i] = 2 * src[i] + 1 on float32 pointers (the
/// contract of the zoo's `packed` model, whose kernel passes its own two float32[8] buffers).
fn register_scale_shift() {
    mote::register_function(
        "mote.zoo.scale_shift",
        std::sync::Arc::new(|args: &[mote::Arg<'_>]| {
            let [mote::Arg::OpaquePtr(src), mote::Arg::OpaquePtr(dst), mote::Arg::Int(n)] = *args
            else {
                return Err(mote::Error::InvalidArgument(format!(
                    "unexpected arguments {args:?}"
                )));
            };
            if n != 8 {
                return Err(mote::Error::InvalidArgument(format!("n = {n}, expected 8")));
            }
            for i in 0..8 {
                // SAFETY: the `packed` kernel passes the data pointers of its two float32[8]
                // buffers, and n was checked to be 8.
                unsafe {
                    let v = *(src as *const f32).add(i);
                    *(dst as *mut f32).add(i) = 2.0 * v + 1.0;
                }
            }
            Ok(mote::Value::None)
        }),
    );
}
