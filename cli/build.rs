// The mote binary loads model libraries, which resolve TVMFFIErrorSetRaisedFromCStrParts from the
// executable: export it (see mote::ERROR_SYMBOL).
fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "android" {
        println!("cargo:rustc-link-arg-bins=-Wl,--export-dynamic-symbol=TVMFFIErrorSetRaisedFromCStrParts");
    }
}
