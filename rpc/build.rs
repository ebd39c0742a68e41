// Test and example binaries load model libraries, which resolve
// TVMFFIErrorSetRaisedFromCStrParts (and the TVMBackendAnyList functions of exec_mode="compiled"
// builds) from the executable: export them (see mote::ERROR_SYMBOL, mote::COMPILED_MODE_SYMBOLS).
// Binaries of other crates that serve RPC (the mote CLI) do the same in their own build.rs.
fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "android" {
        for kind in ["tests", "examples"] {
            for sym in [
                "TVMFFIErrorSetRaisedFromCStrParts",
                "TVMBackendAnyListSetPackedArg",
                "TVMBackendAnyListMoveFromPackedReturn",
                "TVMBackendAnyListResetItem",
            ] {
                println!("cargo:rustc-link-arg-{kind}=-Wl,--export-dynamic-symbol={sym}");
            }
        }
    }
}
