//! The native half of Mote's Java bindings (`org.mote`, sources in `bindings-java/java/`).
//!
//! Every `Java_org_mote_NativeBridge_*` function in [`natives`] is one `static native` method of
//! the package-private class `org.mote.NativeBridge`, whose Java source is generated from the
//! `/// java:` line above each function (`scripts/java-natives.sh`, drift-checked in CI); the
//! RPC server's entries in `rpc` are likewise `org.mote.rpc.RpcBridge`'s. Entries that only
//! the Java tests call are `org.mote.TestHooks`'s, in `test_hooks`, compiled only with the
//! `test-hooks` feature (`scripts/test-java.sh`), so no library an app ships has them.
//! The RPC server's entries (`rpc`) and the `mote-rpc` crate behind them are compiled only with
//! the `rpc` feature: the inference library (the `org.mote:mote-android` AAR, a build without
//! features) carries no RPC server; the RPC app and `org.mote:mote-android-rpc` are built with
//! it. The layout constants `RpcBridge` shares with them ([`rpc_layout`]) are always compiled,
//! so the generator writes the same `RpcBridge.java` from either build.
//!
//! Rules every entry follows (bindings-java/README.md states them for Java users):
//! - It runs inside [`entry`]: panics are caught, Mote errors become the Java exception of
//!   their [`mote::ErrorCode`] (one class per code, all under `org.mote.MoteException`), and
//!   nothing unwinds into the JVM.
//! - Native objects are `Box`ed Rust values whose address is a Java `long` handle owned by one
//!   Java object. Java never passes a freed handle: its `NativeHandle` counts calls in flight and
//!   frees only after `close()` once none is running. A zero handle is a closed object.
//! - A session is a `Mutex<Session>` that is only ever `try_lock`ed: a second thread (or a
//!   callback re-entering its own session) gets `IllegalStateException`, never a race.

#![deny(unsafe_op_in_unsafe_fn)]
#![deny(clippy::undocumented_unsafe_blocks)]

use std::any::Any;

use jni::errors::ErrorPolicy;
use jni::strings::JNIString;
use jni::{Env, EnvUnowned};
use mote::ErrorCode;

mod callback;
pub mod cancel;
pub mod gen;
mod logging;
pub mod natives;
#[cfg(feature = "rpc")]
pub mod rpc;
#[cfg(feature = "rpc")]
mod rpc_client;
pub mod rpc_layout;
mod session_pool;
#[cfg(feature = "test-hooks")]
pub mod test_hooks;

/// Why a native entry failed; each variant becomes a different Java exception.
#[derive(Debug)]
pub enum JErr {
    /// A Mote error: thrown as the `org.mote` class of its code.
    Mote(mote::Error),
    /// Java used an object wrongly (closed, busy): `IllegalStateException`.
    State(String),
    /// Java passed an argument the bindings cannot take (null, unknown tag):
    /// `IllegalArgumentException`.
    Arg(String),
    /// A JNI call failed; when it left a Java exception pending, that one propagates.
    Jni(jni::errors::Error),
}

impl From<jni::errors::Error> for JErr {
    fn from(e: jni::errors::Error) -> Self {
        JErr::Jni(e)
    }
}

impl From<mote::Error> for JErr {
    fn from(e: mote::Error) -> Self {
        JErr::Mote(e)
    }
}

impl std::fmt::Display for JErr {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            JErr::Mote(e) => write!(f, "{e}"),
            JErr::State(m) | JErr::Arg(m) => f.write_str(m),
            JErr::Jni(e) => write!(f, "JNI: {e}"),
        }
    }
}

impl std::error::Error for JErr {}

/// The Java class (JNI name) thrown for each Mote error code. The match is exhaustive, so a
/// new code does not compile until it has a class; `org.mote.ErrorCodeTest` checks that every
/// class exists and reports this code.
pub fn exception_class(code: ErrorCode) -> &'static str {
    match code {
        ErrorCode::Io => "org/mote/MoteIoException",
        ErrorCode::Load => "org/mote/LoadException",
        ErrorCode::Format => "org/mote/FormatException",
        ErrorCode::Unsupported => "org/mote/UnsupportedException",
        ErrorCode::MissingFunctions => "org/mote/MissingFunctionsException",
        ErrorCode::UnknownFunction => "org/mote/UnknownFunctionException",
        ErrorCode::ArgumentCount => "org/mote/ArgumentCountException",
        ErrorCode::Mismatch => "org/mote/MismatchException",
        ErrorCode::Kernel => "org/mote/KernelException",
        ErrorCode::Callback => "org/mote/CallbackException",
        ErrorCode::InvalidArgument => "org/mote/InvalidArgumentException",
        ErrorCode::Npy => "org/mote/NpyException",
        ErrorCode::Vm => "org/mote/VmException",
        ErrorCode::OutOfMemory => "org/mote/MoteOutOfMemoryException",
        ErrorCode::Subgraph => "org/mote/SubgraphException",
        ErrorCode::Backend => "org/mote/BackendException",
        ErrorCode::Busy => "org/mote/BusyException",
        ErrorCode::ResourceExhausted => "org/mote/ResourceExhaustedException",
        ErrorCode::Cancelled => "org/mote/CancelledException",
        ErrorCode::Device => "org/mote/DeviceException",
    }
}

/// Every code, for the table test.
pub const ALL_CODES: [ErrorCode; 20] = ErrorCode::ALL;

/// Throw `class` with `msg` unless a Java exception is already pending (which then wins).
fn throw(env: &mut Env<'_>, class: &str, msg: &str) -> jni::errors::Result<()> {
    if env.exception_check() {
        return Ok(());
    }
    env.throw_new(JNIString::from(class), JNIString::from(msg))
}

pub(crate) fn panic_message(payload: &(dyn Any + Send)) -> String {
    payload
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".to_string())
}

/// The error policy of every entry: [`JErr`] to its Java exception, a panic to
/// `java.lang.IllegalStateException("mote-java: internal error: ...")`.
pub struct ThrowMote;

impl<T: Default> ErrorPolicy<T, JErr> for ThrowMote {
    type Captures<'unowned_env_local: 'native_method, 'native_method> = ();

    fn on_error<'unowned_env_local: 'native_method, 'native_method>(
        env: &mut Env<'unowned_env_local>,
        _cap: &mut (),
        err: JErr,
    ) -> jni::errors::Result<T> {
        match &err {
            JErr::Mote(e) => throw(env, exception_class(e.code()), &e.to_string())?,
            JErr::State(m) => throw(env, "java/lang/IllegalStateException", m)?,
            JErr::Arg(m) => throw(env, "java/lang/IllegalArgumentException", m)?,
            JErr::Jni(e) => throw(env, "java/lang/IllegalStateException", &format!("JNI: {e}"))?,
        }
        Ok(T::default())
    }

    fn on_panic<'unowned_env_local: 'native_method, 'native_method>(
        env: &mut Env<'unowned_env_local>,
        _cap: &mut (),
        payload: Box<dyn Any + Send + 'static>,
    ) -> jni::errors::Result<T> {
        let msg = format!("mote-java: internal error: {}", panic_message(&*payload));
        throw(env, "java/lang/IllegalStateException", &msg)?;
        Ok(T::default())
    }
}

/// Run a native entry's body: panics caught, errors thrown as Java exceptions, and `T`'s
/// default (0, null, false) returned to Java with the exception pending.
pub(crate) fn entry<'l, T: Default>(
    env: &mut EnvUnowned<'l>,
    f: impl FnOnce(&mut Env<'l>) -> Result<T, JErr>,
) -> T {
    env.with_env(f).resolve::<ThrowMote>()
}

/// Move `v` to the heap and give Java its address as a handle.
pub(crate) fn into_handle<T>(v: T) -> i64 {
    Box::into_raw(Box::new(v)) as i64
}

/// Borrow the value behind a handle.
///
/// # Safety
/// `h` is 0 or a handle made by [`into_handle::<T>`] and not yet freed, and stays so while the
/// borrow lives: Java's `NativeHandle` keeps a handle alive during every native call that uses
/// it and frees it only once (see the crate docs).
pub(crate) unsafe fn handle_ref<'a, T>(h: i64, what: &str) -> Result<&'a T, JErr> {
    if h == 0 {
        return Err(JErr::State(format!("{what} is closed")));
    }
    // SAFETY: by this function's contract `h` is a live `Box<T>` address.
    Ok(unsafe { &*(h as *const T) })
}

/// Free the value behind a handle.
///
/// # Safety
/// As for [`handle_ref`], and no other borrow of it is alive; it is never used again.
pub(crate) unsafe fn free_handle<T>(h: i64) {
    if h != 0 {
        // SAFETY: by this function's contract `h` came from `Box::into_raw` and is freed once.
        drop(unsafe { Box::from_raw(h as *mut T) });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_its_own_class() {
        let mut names: Vec<&str> = ALL_CODES.iter().map(|c| exception_class(*c)).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), ALL_CODES.len());
        for (i, c) in ALL_CODES.iter().enumerate() {
            assert_eq!(*c as u32, i as u32 + 1, "codes are 1..=20 in order");
        }
    }
}
