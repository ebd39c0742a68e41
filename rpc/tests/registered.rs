//! Functions registered in the server's process (`mote::register_function`), served to TVM
//! 0.27's own Python client with `ServerBuilder::serve_registered_functions` (docs/rpc.md
//! "Global functions"): the flow of tvm4j's RPC tests, where the app registers
//! `test.rpc.addone` and `test.rpc.strcat` and serves RPC in the same process. Needs
//! MOTE_PYTHON (the TVM venv's python); see scripts/test-rpc.sh. The checks are in
//! tests/python/registered.py, one mode per test.

mod common;

use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Once};

use mote::{Arg, Error, Tensor, Value};
use mote_rpc::{Limits, Server, ServerBuilder, ServerHandle};

fn register(name: &str, f: impl Fn(&[Arg<'_>]) -> mote::Result<Value> + Send + Sync + 'static) {
    mote::register_function(name, Arc::new(f));
}

fn bad(what: &str, args: &[Arg<'_>]) -> Error {
    Error::InvalidArgument(format!("{what}: unexpected arguments {args:?}"))
}

/// The functions the script calls, registered once for the whole test binary (the registry is
/// the process's; `test.rpc.reregister` replaces `test.rpc.version`, which only the resolution
/// test uses).
fn register_all() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        register("test.rpc.addone", |args| match args {
            [Arg::Int(x)] => Ok(Value::Int(x + 1)),
            [a] => Err(Error::InvalidArgument(format!(
                "addone: expected an int, got {}",
                a.kind()
            ))),
            _ => Err(bad("addone", args)),
        });
        register("test.rpc.strcat", |args| match args {
            [Arg::Str(s), Arg::Int(i)] => Ok(Value::Str(format!("{s}:{i}").into())),
            _ => Err(bad("strcat", args)),
        });
        register("test.rpc.floatbool", |args| match args {
            [Arg::Float(f), Arg::Bool(b)] => Ok(Value::Float(if *b { f * 2.0 } else { *f })),
            _ => Err(bad("floatbool", args)),
        });
        register("test.rpc.negate", |args| match args {
            [Arg::Bool(b)] => Ok(Value::Bool(!b)),
            _ => Err(bad("negate", args)),
        });
        register("test.rpc.fail", |_| {
            Err(Error::InvalidArgument(
                "deliberate failure of test.rpc.fail".into(),
            ))
        });
        register("test.rpc.panic", |_| -> mote::Result<Value> {
            panic!("deliberate panic of test.rpc.panic")
        });
        register("test.rpc.tensor_sum", |args| match args {
            [Arg::Tensor(t)] => {
                let sum = match t.dtype().to_string().as_str() {
                    "float32" => t.as_slice::<f32>()?.iter().map(|v| f64::from(*v)).sum(),
                    "int32" => t.as_slice::<i32>()?.iter().map(|v| f64::from(*v)).sum(),
                    d => return Err(Error::InvalidArgument(format!("tensor_sum: dtype {d}"))),
                };
                Ok(Value::Float(sum))
            }
            _ => Err(bad("tensor_sum", args)),
        });
        register("test.rpc.fill", |args| match args {
            [Arg::Tensor(t), Arg::Float(v)] => {
                let n = t.as_slice::<f32>()?.len();
                let p = t.data_ptr().cast::<f32>();
                for i in 0..n {
                    // SAFETY: `as_slice` checked the tensor is float32 with `n` elements, and
                    // `data_ptr` is valid for writes of its bytes while the call runs.
                    unsafe { p.add(i).write(*v as f32) };
                }
                Ok(Value::None)
            }
            _ => Err(bad("fill", args)),
        });
        register("test.rpc.twice", |args| match args {
            [Arg::Tensor(t)] => {
                let doubled: Vec<f32> = t.as_slice::<f32>()?.iter().map(|v| v * 2.0).collect();
                Ok(Value::Tensor(Tensor::from_slice(t.shape(), &doubled)?))
            }
            _ => Err(bad("twice", args)),
        });
        register("test.rpc.version", |_| Ok(Value::Int(1)));
        register("test.rpc.reregister", |_| {
            register("test.rpc.version", |_| Ok(Value::Int(2)));
            Ok(Value::None)
        });
        // Shares a name with the server's own global: never served.
        register("mote.system_libs", |_| Ok(Value::Str("hijacked".into())));
    });
}

/// A server on a free loopback port, with the process's registered functions registered.
fn start(builder: ServerBuilder) -> ServerHandle {
    common::init_log();
    register_all();
    builder.port(0).spawn().expect("server starts")
}

/// Runs tests/python/registered.py in `mode` against `server`; panics with its output unless
/// it succeeds and says so.
fn run(server: &ServerHandle, mode: &str) {
    let addr = server.local_addr().expect("listening");
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/python");
    let out = Command::new(common::python())
        .arg(dir.join("registered.py"))
        .arg(addr.ip().to_string())
        .arg(addr.port().to_string())
        .arg("-") // no zoo
        .arg(mode)
        .env("PYTHONPATH", &dir)
        .env("PYTHONUNBUFFERED", "1")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {} (MOTE_PYTHON): {e}", common::python()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success() && stdout.contains(&format!("registered {mode}: ok")),
        "registered.py {mode} failed ({}):\n--- stdout\n{stdout}\n--- stderr\n{stderr}",
        out.status
    );
}

fn serving() -> ServerBuilder {
    Server::builder().serve_registered_functions(true)
}

/// tvm4j's flow: addone(10) is 11, strcat("abc", 11) is "abc:11"; floats and bools arrive and
/// come back as such; a function's error and a function's panic are RPCErrors carrying their
/// text, and the session goes on after each.
#[test]
fn registered_functions_are_called_as_tvm4j_calls_them() {
    let s = start(serving());
    run(&s, "calls");
    // The panics ended neither the session's thread nor the server.
    assert_eq!(s.stats().refused, 0);
    s.stop();
}

/// A tensor argument is a view of the client's remote memory (the function's writes land in
/// it); a returned tensor is a remote tensor the client reads and passes back.
#[test]
fn tensors_pass_as_views_and_come_back_as_remote_tensors() {
    let s = start(serving());
    run(&s, "tensors");
    s.stop();
}

/// Bytes, a device and a module are refused naming the argument's index; the
/// session goes on.
#[test]
fn arguments_mote_cannot_pass_are_refused_by_index() {
    let s = start(serving());
    run(&s, "refused");
    s.stop();
}

/// A function is resolved when looked up (a later registration is seen by new lookups only),
/// and the server's own global names come before registered ones.
#[test]
fn a_lookup_resolves_once_and_the_servers_names_come_first() {
    let s = start(serving());
    run(&s, "resolution");
    s.stop();
}

/// Each lookup is a handle counted against `max_handles`.
#[test]
fn lookups_count_against_max_handles() {
    let s = start(serving().limits(Limits {
        max_handles: 3,
        ..Limits::default()
    }));
    run(&s, "limit");
    s.stop();
}

/// The default server serves none of them: TVM's client raises AttributeError.
#[test]
fn without_the_option_registered_names_are_attribute_errors() {
    let s = start(Server::builder());
    run(&s, "off");
    s.stop();
}
