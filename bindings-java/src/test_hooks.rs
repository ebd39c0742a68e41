//! JNI entries that exist only for the Java tests: the class `org.mote.TestHooks`, whose Java
//! source (generated from the `/// java:` lines here by `scripts/java-natives.sh`) lives in the
//! Maven project's test sources, never in the jar or the AARs.
//!
//! This module is compiled only with the crate's `test-hooks` feature, which
//! `scripts/test-java.sh` turns on for its build. Release and Android builds therefore export
//! none of these: `scripts/audit-android-so.sh` checks that the Android libraries export
//! exactly the natives of `NativeBridge.java` (and, built with `rpc`, `rpc/RpcBridge.java`).

use jni::objects::{JClass, JLongArray, JString};
use jni::sys::jlong;
use jni::EnvUnowned;
use mote::Arg;

use crate::natives::{string, ModuleH};
use crate::{entry, handle_ref, JErr};

/// Panic inside an entry, for the test that a Rust panic becomes a Java exception
/// (`IllegalStateException`) and the JVM goes on.
/// java: static native void panicForTest(String message);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_TestHooks_panicForTest<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    message: JString<'l>,
) {
    entry(&mut env, |env| -> Result<(), JErr> {
        let m = string(env, &message, "message")?;
        panic!("{m}")
    })
}

/// Call the global function `name` with one integer on a new native thread the JVM has never
/// seen (as a session's worker thread would), and return its integer result: the test of
/// callback attachment (`CallbackTest`).
/// java: static native long globalCallOnNewThread(String name, long arg);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_TestHooks_globalCallOnNewThread<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    name: JString<'l>,
    arg: jlong,
) -> jlong {
    entry(&mut env, |env| {
        let name = string(env, &name, "function name")?;
        let f = mote::lookup_function(&name).ok_or_else(|| {
            JErr::Mote(mote::Error::UnknownFunction {
                name: name.clone(),
                available: Vec::new(),
            })
        })?;
        let r = std::thread::spawn(move || f(&[Arg::Int(arg)]))
            .join()
            .map_err(|_| JErr::State("the native thread panicked".into()))??;
        r.as_int()
            .ok_or_else(|| JErr::Arg(format!("the function returned a {}", r.kind())))
    })
}

/// How many native tensors exist (the tests of `close()`, the backstop and the corrupt-file
/// sweep).
/// java: static native long liveTensors();
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_TestHooks_liveTensors<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
) -> jlong {
    entry(&mut env, |_| Ok(crate::natives::live_tensors()))
}

/// A module's session pool: `{live, idle, peak, created, max}` (`ModuleSessionsTest`).
/// java: static native long[] moduleSessions(long module);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_TestHooks_moduleSessions<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    module: jlong,
) -> JLongArray<'l> {
    entry(&mut env, |env| {
        // SAFETY: a live module handle (see `handle_ref`): the test holds the Module's handle.
        let m = unsafe { handle_ref::<ModuleH>(module, "Module")? };
        let c = m.sessions.counts();
        let v = [
            c.live as i64,
            c.idle as i64,
            c.peak as i64,
            c.created as i64,
            c.max as i64,
        ];
        let a = env.new_long_array(v.len())?;
        a.set_region(env, 0, &v)?;
        Ok(a)
    })
}

/// Write a model file made by `mote::fuzzing::craft` to `path`: `"endless_loop"` (`main()`
/// loops forever), `"counted_loop"` (`main(n)` loops `n` times, then returns 0; needs
/// [`Java_org_mote_TestHooks_registerTestArithmetic`]), `"countdown"` (`main(n)` recurses `n`
/// levels, then returns 0; needs it too) or `"self_recursion"` (`main(n)` calls
/// itself forever with 2^20 registers a frame). Code-free `.tar` files (docs/code-free.md).
/// java: static native void writeCraftedModel(String name, String path);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_TestHooks_writeCraftedModel<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    name: JString<'l>,
    path: JString<'l>,
) {
    entry(&mut env, |env| {
        use mote::fuzzing::craft;
        let name = string(env, &name, "model name")?;
        let path = string(env, &path, "path")?;
        let bytes = match name.as_str() {
            "endless_loop" => craft::endless_loop(),
            "counted_loop" => craft::counted_loop(),
            "countdown" => craft::countdown(),
            "self_recursion" => craft::self_recursion(1 << 20),
            other => return Err(JErr::Arg(format!("no crafted model named {other}"))),
        };
        std::fs::write(&path, bytes).map_err(|e| {
            JErr::Mote(mote::Error::Io {
                path: path.clone().into(),
                source: e,
            })
        })
    })
}

/// Register the native functions `mote.test.ne(a, b)` (1 if the ints differ, else 0) and
/// `mote.test.add(a, b)` that `craft::counted_loop` calls.
/// java: static native void registerTestArithmetic();
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_TestHooks_registerTestArithmetic<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
) {
    entry(&mut env, |_| {
        fn int(a: &Arg<'_>) -> mote::Result<i64> {
            match a {
                Arg::Int(i) => Ok(*i),
                other => Err(mote::Error::InvalidArgument(format!(
                    "{} is not an int",
                    other.kind()
                ))),
            }
        }
        fn two(a: &[Arg<'_>]) -> mote::Result<(i64, i64)> {
            match a {
                [x, y] => Ok((int(x)?, int(y)?)),
                _ => Err(mote::Error::InvalidArgument(format!(
                    "{} arguments, not 2",
                    a.len()
                ))),
            }
        }
        mote::register_function(
            "mote.test.ne",
            std::sync::Arc::new(|a: &[Arg<'_>]| {
                let (x, y) = two(a)?;
                Ok(mote::Value::Int((x != y) as i64))
            }),
        );
        mote::register_function(
            "mote.test.add",
            std::sync::Arc::new(|a: &[Arg<'_>]| {
                let (x, y) = two(a)?;
                Ok(mote::Value::Int(x.wrapping_add(y)))
            }),
        );
        Ok(())
    })
}

/// Make every interruptible call wait `millis` after it returned and before it is disarmed
/// (0: not at all), so a test can interrupt a call that can no longer stop: the interrupt must
/// then be dropped, not cancel the session's next call (src/cancel.rs).
/// java: static native void pauseBeforeDisarmForTest(long millis);
#[unsafe(no_mangle)]
pub extern "system" fn Java_org_mote_TestHooks_pauseBeforeDisarmForTest<'l>(
    mut env: EnvUnowned<'l>,
    _class: JClass<'l>,
    millis: jlong,
) {
    entry(&mut env, |_| {
        let ms = u64::try_from(millis).map_err(|_| JErr::Arg(format!("{millis} ms")))?;
        crate::cancel::PAUSE_BEFORE_DISARM_MS.store(ms, std::sync::atomic::Ordering::Relaxed);
        Ok(())
    })
}
