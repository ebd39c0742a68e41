// Test binaries and the soak binary load model libraries, which resolve
// TVMFFIErrorSetRaisedFromCStrParts (and, built with exec_mode="compiled", the TVMBackendAnyList
// functions) from the executable: export them (see mote::ERROR_SYMBOL and
// mote::COMPILED_MODE_SYMBOLS).
fn main() {
    let os = std::env::var("CARGO_CFG_TARGET_OS").unwrap_or_default();
    if os == "linux" || os == "android" {
        for sym in [
            "TVMFFIErrorSetRaisedFromCStrParts",
            "TVMBackendAnyListSetPackedArg",
            "TVMBackendAnyListMoveFromPackedReturn",
            "TVMBackendAnyListResetItem",
        ] {
            println!("cargo:rustc-link-arg-tests=-Wl,--export-dynamic-symbol={sym}");
            println!("cargo:rustc-link-arg-bins=-Wl,--export-dynamic-symbol={sym}");
        }
    }
    build_test_plugins(&os);
}

/// Compile tests/plugins/test_plugin.c into two shared libraries (the right ABI version and a
/// wrong one) with the system C compiler, and tell the tests where they are through
/// MOTE_TEST_PLUGIN and MOTE_TEST_PLUGIN_BAD_ABI. A build without a C compiler fails loudly:
/// the plug-in tests must not silently disappear.
fn build_test_plugins(os: &str) {
    use std::path::PathBuf;
    println!("cargo:rerun-if-changed=plugins/test_plugin.c");
    println!("cargo:rerun-if-changed=../runtime/include/mote_backend.h");
    let host = std::env::var("HOST").unwrap_or_default();
    let target = std::env::var("TARGET").unwrap_or_default();
    if !(os == "linux" || os == "macos") {
        // The plug-in tests only run on Linux and macOS.
        println!("cargo:rustc-env=MOTE_TEST_PLUGIN=");
        println!("cargo:rustc-env=MOTE_TEST_PLUGIN_BAD_ABI=");
        return;
    }
    let out = PathBuf::from(std::env::var("OUT_DIR").expect("cargo sets OUT_DIR"));
    let manifest =
        PathBuf::from(std::env::var("CARGO_MANIFEST_DIR").expect("cargo sets CARGO_MANIFEST_DIR"));
    let src = manifest.join("plugins/test_plugin.c");
    let include = manifest.join("../runtime/include");
    // The compiler for the target (cross builds name it CC_<target>, as the cc crate does).
    let cc = [
        format!("CC_{}", target.replace('-', "_")),
        "TARGET_CC".into(),
        "CC".into(),
    ]
    .iter()
    .find_map(|k| std::env::var(k).ok())
    .unwrap_or_else(|| {
        if host == target {
            "cc".into()
        } else {
            format!("{target}-gcc")
        }
    });
    let ext = if os == "macos" { "dylib" } else { "so" };
    for (name, env, extra) in [
        ("libmote_test_plugin", "MOTE_TEST_PLUGIN", None),
        (
            "libmote_test_plugin_bad_abi",
            "MOTE_TEST_PLUGIN_BAD_ABI",
            Some("-DTEST_PLUGIN_ABI_VERSION=99"),
        ),
    ] {
        let lib = out.join(format!("{name}.{ext}"));
        let mut cmd = std::process::Command::new(&cc);
        cmd.args([
            "-shared", "-fPIC", "-O2", "-std=c99", "-Wall", "-Wextra", "-Werror",
        ])
        .arg("-I")
        .arg(&include)
        .arg(&src)
        .arg("-o")
        .arg(&lib);
        if let Some(e) = extra {
            cmd.arg(e);
        }
        let status = cmd
            .status()
            .unwrap_or_else(|e| panic!("cannot run the C compiler `{cc}`: {e}"));
        assert!(status.success(), "compiling {} failed", src.display());
        println!("cargo:rustc-env={env}={}", lib.display());
    }
}
