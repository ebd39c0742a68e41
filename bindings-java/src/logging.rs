//! Mote's `log` records, routed to `java.util.logging` (logger `org.mote`) through
//! `org.mote.Logging.emit`. The level filter is set from Java (`Logging` reads the JUL
//! logger's level), so records nobody would see never cross JNI.

use std::cell::Cell;
use std::sync::OnceLock;

use jni::objects::{JClass, JString, JValue};
use jni::refs::Global;
use jni::{jni_sig, jni_str, Env};
use log::{Level, LevelFilter, Log, Metadata, Record};

use crate::JErr;

// On Android the records go to logcat instead (installed first, so `JavaLogger` is not).
#[cfg(target_os = "android")]
#[path = "android_log.rs"]
mod android_log;

static LOGGING_CLASS: OnceLock<Global<JClass<'static>>> = OnceLock::new();

thread_local! {
    /// Set while this thread is inside `emit`: JNI itself may log, which must not recurse.
    static IN_LOG: Cell<bool> = const { Cell::new(false) };
}

struct JavaLogger;

fn filter(level: i32) -> LevelFilter {
    match level {
        i32::MIN..=0 => LevelFilter::Off,
        1 => LevelFilter::Error,
        2 => LevelFilter::Warn,
        3 => LevelFilter::Info,
        4 => LevelFilter::Debug,
        _ => LevelFilter::Trace,
    }
}

pub(crate) fn set_level(level: i32) {
    log::set_max_level(filter(level));
}

pub(crate) fn init(env: &mut Env<'_>, level: i32) -> Result<(), JErr> {
    if LOGGING_CLASS.get().is_none() {
        let class = env.find_class(jni_str!("org/mote/Logging"))?;
        let global = env.new_global_ref(class)?;
        let _ = LOGGING_CLASS.set(global);
        #[cfg(target_os = "android")]
        android_log::install();
        // Fails only when another logger is installed (an embedding app's): keep that one.
        let _ = log::set_logger(&JavaLogger);
    }
    set_level(level);
    Ok(())
}

impl Log for JavaLogger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= log::max_level() && !metadata.target().starts_with("jni")
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) || IN_LOG.with(|f| f.replace(true)) {
            return;
        }
        // Whoever logged may have C frames above: a panic here must not unwind into them.
        let _ = std::panic::catch_unwind(|| self.emit(record));
        IN_LOG.with(|f| f.set(false));
    }

    fn flush(&self) {}
}

impl JavaLogger {
    fn emit(&self, record: &Record<'_>) {
        if let (Some(vm), Some(class)) = (crate::callback::vm(), LOGGING_CLASS.get()) {
            let level = match record.level() {
                Level::Error => 1,
                Level::Warn => 2,
                Level::Info => 3,
                Level::Debug => 4,
                Level::Trace => 5,
            };
            let target = record.target().to_string();
            let msg = record.args().to_string();
            let _ = vm.attach_current_thread(|env| -> Result<(), JErr> {
                let t = JString::from_str(env, &target)?;
                let m = JString::from_str(env, &msg)?;
                let r = env.call_static_method(
                    class,
                    jni_str!("emit"),
                    jni_sig!("(ILjava/lang/String;Ljava/lang/String;)V"),
                    &[JValue::Int(level), JValue::Object(&t), JValue::Object(&m)],
                );
                if r.is_err() && env.exception_check() {
                    env.exception_clear();
                }
                Ok(())
            });
        }
    }
}
