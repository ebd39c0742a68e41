//! Android only: Mote's `log` records go to logcat (tag `mote`) through `android_logger`
//! instead of crossing JNI to `java.util.logging`: on a phone logcat is where native logs are
//! read, and a record then costs no JNI call.
//!
//! The logger is installed when the library is loaded (`JNI_OnLoad` below), so records logged
//! before `org.mote.NativeBridge.init` are not lost, and again (a no-op) from
//! `logging::init`. Once it is installed `log::set_logger(&JavaLogger)` fails and is ignored
//! there, as with any logger installed first. The level filter stays Java's:
//! `logging::set_level` sets `log::max_level`, which this logger follows (no level of its own
//! is configured).

use std::ffi::c_void;

use jni::sys::{jint, JavaVM, JNI_VERSION_1_6};

/// Installs the logcat logger once; later calls do nothing.
pub(crate) fn install() {
    // `android_logger` only formats and writes; a panic inside it must not reach the JVM.
    let _ = std::panic::catch_unwind(|| {
        android_logger::init_once(android_logger::Config::default().with_tag("mote"));
    });
}

/// Called by Android's runtime when `System.loadLibrary("mote_java")` loads this library:
/// installs the logcat logger and asks for JNI 1.6, the version Android implements.
#[unsafe(no_mangle)]
pub extern "system" fn JNI_OnLoad(_vm: *mut JavaVM, _reserved: *mut c_void) -> jint {
    install();
    JNI_VERSION_1_6
}
