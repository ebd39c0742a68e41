//! Java functions registered with Mote (`Function.register` / `Function.convertFunc`).
//!
//! Mote may call a registered function from any thread: the Java caller's own, or one of a
//! session's worker threads that the JVM has never seen. Each call therefore attaches its
//! thread (`JavaVM::attach_current_thread`: a thread stays attached until it exits, so later
//! calls on it are cheap) and calls `org.mote.Function.dispatch` through a class reference
//! taken on a Java thread at `init` (on an attached native thread `FindClass` would search
//! only the system class loader, which on Android does not see the app's classes).
//!
//! A Java exception from the callback is caught here, cleared, and returned to Mote as
//! `Error::Callback` with the exception's `toString()`, so it surfaces in the
//! `MoteException` the original caller gets and the JVM goes on.

use std::sync::{Arc, OnceLock};

use jni::objects::{JClass, JObject, JString, JValue};
use jni::refs::Global;
use jni::vm::JavaVM;
use jni::{jni_sig, jni_str, Env};
use mote::{Arg, Value};

use crate::natives::{marked, Marked, Tag, TensorH};
use crate::{into_handle, JErr};

struct Bridge {
    vm: JavaVM,
    function_class: Global<JClass<'static>>,
}

static BRIDGE: OnceLock<Bridge> = OnceLock::new();

/// Remember the VM and `org.mote.Function` (called once, from `NativeBridge`'s loader).
pub(crate) fn init(env: &mut Env<'_>) -> Result<(), JErr> {
    if BRIDGE.get().is_some() {
        return Ok(());
    }
    let vm = env.get_java_vm()?;
    let class = env.find_class(jni_str!("org/mote/Function"))?;
    let function_class = env.new_global_ref(class)?;
    let _ = BRIDGE.set(Bridge { vm, function_class });
    Ok(())
}

pub(crate) fn vm() -> Option<&'static JavaVM> {
    BRIDGE.get().map(|b| &b.vm)
}

/// Register `name` as the Java callback with id `id`.
pub(crate) fn register(_env: &mut Env<'_>, name: &str, id: i64) -> Result<(), JErr> {
    if BRIDGE.get().is_none() {
        return Err(JErr::State("mote-java is not initialised".into()));
    }
    let owned = name.to_string();
    mote::register_function(
        name,
        Arc::new(move |args: &[Arg<'_>]| dispatch(&owned, id, args)),
    );
    Ok(())
}

fn dispatch(name: &str, id: i64, args: &[Arg<'_>]) -> mote::Result<Value> {
    let bridge = BRIDGE.get().ok_or_else(|| mote::Error::Callback {
        name: name.to_string(),
        message: "mote-java is not initialised".into(),
    })?;
    // A kernel may be the caller, with C frames above: no panic may unwind out of here.
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        bridge
            .vm
            .attach_current_thread(|env| call_java(env, bridge, name, id, args))
    }));
    match result {
        Ok(r) => r.map_err(|e: JErr| match e {
            JErr::Mote(e) => e,
            other => mote::Error::Callback {
                name: name.to_string(),
                message: other.to_string(),
            },
        }),
        Err(payload) => Err(mote::Error::Callback {
            name: name.to_string(),
            message: format!(
                "mote-java: internal error: {}",
                crate::panic_message(&*payload)
            ),
        }),
    }
}

fn call_java(
    env: &mut Env<'_>,
    bridge: &Bridge,
    name: &str,
    id: i64,
    args: &[Arg<'_>],
) -> Result<Value, JErr> {
    let n = args.len();
    let (mut tags, mut longs, mut doubles) = (vec![0i32; n], vec![0i64; n], vec![0f64; n]);
    let mut strs: Vec<Option<String>> = vec![None; n];
    // Tensors for Java, made into handles only once nothing can fail before Java owns them.
    let mut tensors: Vec<(usize, mote::Tensor)> = Vec::new();
    for (i, a) in args.iter().enumerate() {
        let tag = match a {
            Arg::None => Tag::None,
            Arg::Int(v) => {
                longs[i] = *v;
                Tag::Int
            }
            Arg::Float(v) => {
                doubles[i] = *v;
                Tag::Float
            }
            Arg::Bool(b) => {
                longs[i] = *b as i64;
                Tag::Bool
            }
            Arg::DType(d) => {
                strs[i] = Some(d.to_string());
                Tag::DType
            }
            Arg::Str(s) => {
                strs[i] = Some(s.to_string());
                Tag::Str
            }
            Arg::OpaquePtr(p) => {
                longs[i] = *p as i64;
                Tag::Pointer
            }
            // A copy: the view is valid only during this call, the Java object may live on.
            Arg::Tensor(t) => {
                tensors.push((i, t.to_tensor()?));
                Tag::Tensor
            }
            Arg::Value(Value::Tensor(t)) => {
                tensors.push((i, t.clone()));
                Tag::Tensor
            }
            // Java's `dispatch` reads a byte string's tensor into a `byte[]` and closes it.
            Arg::Value(v) => match marked(v) {
                Some(Marked::Bytes(t)) => {
                    tensors.push((i, t.clone()));
                    Tag::Bytes
                }
                Some(Marked::Function(name)) => {
                    strs[i] = Some(name.to_string());
                    Tag::Function
                }
                None => Tag::Other,
            },
            _ => Tag::Other,
        };
        tags[i] = tag as i32;
    }
    let jtags = env.new_int_array(n)?;
    jtags.set_region(env, 0, &tags)?;
    let jdoubles = env.new_double_array(n)?;
    jdoubles.set_region(env, 0, &doubles)?;
    let jstrs = env.new_object_array(n as i32, jni_str!("java/lang/String"), JObject::null())?;
    for (i, s) in strs.iter().enumerate() {
        if let Some(s) = s {
            let js = JString::from_str(env, s)?;
            jstrs.set_element(env, i, &js)?;
        }
    }
    let jlongs = env.new_long_array(n)?;
    // From here Java's `dispatch` owns (and closes) each tensor handle.
    for (i, t) in tensors {
        longs[i] = into_handle(TensorH::new(t));
    }
    jlongs.set_region(env, 0, &longs)?;
    let result = env.call_static_method(
        &bridge.function_class,
        jni_str!("dispatch"),
        jni_sig!("(J[I[J[D[Ljava/lang/String;)J"),
        &[
            JValue::Long(id),
            JValue::Object(&jtags),
            JValue::Object(&jlongs),
            JValue::Object(&jdoubles),
            JValue::Object(&jstrs),
        ],
    );
    match result {
        Ok(v) => {
            let h = v.j()?;
            if h == 0 {
                return Ok(Value::None);
            }
            // SAFETY: `dispatch` returns 0 or a handle from `NativeBridge.valueFrom`, which it
            // hands over to us (Java keeps no copy).
            Ok(*unsafe { Box::from_raw(h as *mut Value) })
        }
        Err(jni::errors::Error::JavaException) => {
            let message = describe_pending(env);
            Err(JErr::Mote(mote::Error::Callback {
                name: name.to_string(),
                message,
            }))
        }
        Err(e) => Err(e.into()),
    }
}

/// Take the pending Java exception and describe it by its `toString()`.
fn describe_pending(env: &mut Env<'_>) -> String {
    let Some(t) = env.exception_occurred() else {
        return "a Java exception".into();
    };
    env.exception_clear();
    let s = env
        .call_method(
            &t,
            jni_str!("toString"),
            jni_sig!("()Ljava/lang/String;"),
            &[],
        )
        .and_then(|v| v.l())
        .and_then(|o| env.cast_local::<JString>(o))
        .and_then(|s| s.try_to_string(env));
    env.exception_clear();
    s.unwrap_or_else(|_| "a Java exception".into())
}
