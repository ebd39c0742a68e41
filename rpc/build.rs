// Test and example binaries load model libraries, which resolve
// TVMFFIErrorSetRaisedFromCStrParts from the executable: export it (see mote::ERROR_SYMBOL).
// Binaries of other crates that serve RPC (the mote CLI) do the same in their own build.rs.
fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "android" {
        for kind in ["tests", "examples"] {
            println!(
                "cargo:rustc-link-arg-{kind}=-Wl,--export-dynamic-symbol=TVMFFIErrorSetRaisedFromCStrParts"
            );
        }
    }
}
