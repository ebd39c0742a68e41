// The mote binary loads model libraries, which resolve TVMFFIErrorSetRaisedFromCStrParts (and,
// built with exec_mode="compiled", the TVMBackendAnyList functions) from the executable: export
// them (see mote::ERROR_SYMBOL and mote::COMPILED_MODE_SYMBOLS).
fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "android" {
        for sym in [
            "TVMFFIErrorSetRaisedFromCStrParts",
            "TVMBackendAnyListSetPackedArg",
            "TVMBackendAnyListMoveFromPackedReturn",
            "TVMBackendAnyListResetItem",
        ] {
            println!("cargo:rustc-link-arg-bins=-Wl,--export-dynamic-symbol={sym}");
        }
    }
}
