//! uniffi's generator, built from the same uniffi version as the library (scripts/swift-bindings.sh).
fn main() {
    uniffi::uniffi_bindgen_main()
}
