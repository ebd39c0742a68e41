//! Writes a code-free model whose `main()` never returns (a backward `Goto`, made by
//! `mote::fuzzing::craft::endless_loop`) to the path given, for the RPC tests of a session's
//! timeout and of stopping the server (scripts/test-rpc.sh, docs/rpc.md "Timeouts"). Only the
//! instruction budget (`mote rpc serve --max-instructions`) or an interrupt ends a call of it.
//!
//! `cargo run -p mote-rpc --example endless_model -- PATH`

fn main() {
    let Some(path) = std::env::args_os().nth(1) else {
        eprintln!("usage: endless_model PATH");
        std::process::exit(2);
    };
    if let Err(e) = std::fs::write(&path, mote::fuzzing::craft::endless_loop()) {
        eprintln!(
            "endless_model: cannot write {}: {e}",
            path.to_string_lossy()
        );
        std::process::exit(1);
    }
}
