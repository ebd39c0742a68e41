//! Print the Java source of one generated natives class, `org.mote.NativeBridge` (from
//! `src/natives.rs`), `org.mote.rpc.RpcBridge` (from `src/rpc.rs`) or the test-only
//! `org.mote.TestHooks` (from `src/test_hooks.rs`), named by the one argument; `scripts/java-natives.sh` writes them into the Maven project or checks them there.

use mote_java::gen::{java_source, Bridge};

fn main() {
    let which = std::env::args().nth(1).unwrap_or_default();
    let (bridge, src) = match which.as_str() {
        "org.mote.NativeBridge" => (Bridge::core(), include_str!("../natives.rs")),
        "org.mote.rpc.RpcBridge" => (Bridge::rpc(), include_str!("../rpc.rs")),
        "org.mote.TestHooks" => (Bridge::test_hooks(), include_str!("../test_hooks.rs")),
        other => {
            eprintln!(
                "java-natives: usage: java-natives org.mote.NativeBridge|org.mote.rpc.RpcBridge|org.mote.TestHooks (not {other:?})"
            );
            std::process::exit(2);
        }
    };
    match java_source(&bridge, src) {
        Ok(java) => print!("{java}"),
        Err(e) => {
            eprintln!("java-natives: {}: {e}", bridge.name());
            std::process::exit(1);
        }
    }
}
