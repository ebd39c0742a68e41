// Give the shared library the name embedders link against (libmote.so.0 / libmote.dylib),
// whatever cargo calls the file it writes.
fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    match os.as_str() {
        "linux" | "android" => println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libmote.so.0"),
        "macos" | "ios" => {
            println!("cargo:rustc-cdylib-link-arg=-Wl,-install_name,@rpath/libmote.dylib")
        }
        _ => {}
    }
}
