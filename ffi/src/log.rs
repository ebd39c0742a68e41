//! Routing Mote's log records to the embedder.

use std::ffi::{c_char, c_void, CString};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Once, RwLock};

use crate::error::{guard, MoteError, MoteErrorCode};

/// Severity of a log record (higher is more verbose).
#[repr(u32)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MoteLogLevel {
    Off = 0,
    Error = 1,
    Warn = 2,
    Info = 3,
    Debug = 4,
    Trace = 5,
}

/// Receives one log record: `level` is a `MoteLogLevel`, `target` the Mote module, `message`
/// the text (both UTF-8, borrowed for the call). Called from any thread Mote logs on, possibly
/// concurrently.
pub type MoteLogCallback = Option<
    unsafe extern "C" fn(
        user_data: *mut c_void,
        level: u32,
        target: *const c_char,
        message: *const c_char,
    ),
>;

struct Sink {
    callback: unsafe extern "C" fn(*mut c_void, u32, *const c_char, *const c_char),
    user_data: usize,
}

static SINK: RwLock<Option<Sink>> = RwLock::new(None);

struct Logger;

impl log::Log for Logger {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }

    fn log(&self, record: &log::Record) {
        let sink = SINK.read().unwrap_or_else(|p| p.into_inner());
        let Some(sink) = sink.as_ref() else { return };
        let level = match record.level() {
            log::Level::Error => MoteLogLevel::Error,
            log::Level::Warn => MoteLogLevel::Warn,
            log::Level::Info => MoteLogLevel::Info,
            log::Level::Debug => MoteLogLevel::Debug,
            log::Level::Trace => MoteLogLevel::Trace,
        };
        let target = CString::new(record.target().replace('\0', "")).unwrap_or_default();
        let message = CString::new(record.args().to_string().replace('\0', "")).unwrap_or_default();
        // SAFETY: the embedder registered a function of this signature, callable from any
        // thread; the strings live until it returns.
        unsafe {
            (sink.callback)(
                sink.user_data as *mut c_void,
                level as u32,
                target.as_ptr(),
                message.as_ptr(),
            )
        }
    }

    fn flush(&self) {}
}

static LOGGER: Logger = Logger;

/// Send Mote's log records up to `max_level` (a `MoteLogLevel`) to `callback`, process-wide,
/// replacing an earlier callback. NULL `callback` or `MOTE_LOG_LEVEL_OFF` stops logging.
/// Fails with `MOTE_ERROR_CODE_UNSUPPORTED` if another logger of the Rust `log` crate was
/// installed in this process first.
#[no_mangle]
pub unsafe extern "C" fn mote_log_set_callback(
    callback: MoteLogCallback,
    user_data: *mut c_void,
    max_level: u32,
) -> *mut MoteError {
    guard(|| {
        static INSTALL: Once = Once::new();
        static OURS: AtomicBool = AtomicBool::new(false);
        INSTALL.call_once(|| OURS.store(log::set_logger(&LOGGER).is_ok(), Ordering::Release));
        if !OURS.load(Ordering::Acquire) {
            return Err(MoteError::new(
                MoteErrorCode::Unsupported,
                "another logger is installed in this process; Mote logs through it",
            ));
        }
        let level = match (callback.is_some(), max_level) {
            (false, _) | (_, 0) => log::LevelFilter::Off,
            (_, 1) => log::LevelFilter::Error,
            (_, 2) => log::LevelFilter::Warn,
            (_, 3) => log::LevelFilter::Info,
            (_, 4) => log::LevelFilter::Debug,
            _ => log::LevelFilter::Trace,
        };
        *SINK.write().unwrap_or_else(|p| p.into_inner()) = callback.map(|callback| Sink {
            callback,
            user_data: user_data as usize,
        });
        log::set_max_level(level);
        Ok(())
    })
}
