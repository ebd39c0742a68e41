//! The RPC server serves models linked into its program: TVM's unchanged Python client asks
//! for each zoo system library with `ffi.SystemLib(prefix)` (no upload), runs it through
//! `relax.VirtualMachine` on remote tensors and compares with TVM's outputs; a prefix nothing
//! registered is an error naming it (python/rpc_zoo_client.py --system-lib; docs/rpc.md).

use std::process::Command;

#[test]
#[cfg_attr(
    not(target_arch = "x86_64"),
    ignore = "TVM's Python client runs on the x86_64 host; aarch64 servers are driven by \
              scripts/test-rpc-phone.sh, as for the mote-rpc tests"
)]
fn tvm_client_runs_linked_models_through_ffi_system_lib() {
    let problem = env!("MOTE_SYSLIB_PROBLEM");
    assert!(
        problem.is_empty(),
        "no system library is linked into this test: {problem}"
    );
    let python = std::env::var("MOTE_PYTHON").unwrap_or_else(|_| {
        panic!("set MOTE_PYTHON to the TVM 0.27 venv's python (scripts/venv.sh prints it)")
    });
    let server = mote_rpc::Server::builder()
        .host("127.0.0.1")
        .port(0)
        .spawn()
        .expect("start the RPC server");
    let port = server.local_addr().expect("a listening server").port();
    let client = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../python/rpc_zoo_client.py"
    );
    let out = Command::new(&python)
        .args([client, "--port", &port.to_string(), "--system-lib", "--zoo"])
        .arg(env!("MOTE_SYSLIB_ZOO"))
        .output()
        .expect("run TVM's client");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    server.stop();
    assert!(
        out.status.success(),
        "client failed ({}):\n{stdout}\n{stderr}",
        out.status
    );
    let summary = stdout
        .lines()
        .find(|l| l.starts_with("rpc zoo: "))
        .unwrap_or_else(|| panic!("no summary line:\n{stdout}"));
    let passed: usize = summary["rpc zoo: ".len()..]
        .split_whitespace()
        .next()
        .and_then(|n| n.parse().ok())
        .unwrap_or(0);
    // One check for the unknown prefix and at least one case per linked model.
    let linked = env!("MOTE_SYSLIB_LINKED").split(',').count();
    assert!(
        passed > linked,
        "only {passed} checks passed for {linked} linked models:\n{stdout}"
    );
    assert!(
        stdout.contains("ok   system-lib unknown prefix"),
        "{stdout}"
    );
    assert!(stdout.contains("ok   mote.system_libs lists"), "{stdout}");
}
