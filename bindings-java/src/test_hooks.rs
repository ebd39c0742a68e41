//! JNI entries that exist only for the Java tests: the class `org.mote.TestHooks`, whose Java
//! source (generated from the `/// java:` lines here by `scripts/java-natives.sh`) lives in the
//! Maven project's test sources, never in the jar or the AAR.
//!
//! This module is compiled only with the crate's `test-hooks` feature, which
//! `scripts/test-java.sh` turns on for its build. Release and Android builds (no features)
//! therefore export none of these: `scripts/audit-android-so.sh` checks that the Android
//! library exports exactly the natives of `NativeBridge.java` and `rpc/RpcBridge.java`.

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
