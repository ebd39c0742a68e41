//! Routing Mote's log records to the embedder.

use std::cell::Cell;
use std::ffi::{c_char, c_void, CString};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, Once, RwLock};

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
/// concurrently. It may call Mote (even `mote_log_set_callback`); records Mote produces on a
/// thread while that thread is inside the log callback are dropped, so it never recurses. It
/// must return normally (no C++ exception, no `longjmp`).
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
    /// Calls of `callback` in progress (on any thread).
    calls: AtomicUsize,
}

/// The current sink. Records clone it out (counting the call while the read lock is held), so
/// the embedder's callback runs without any lock of ours: it may replace the sink.
static SINK: RwLock<Option<Arc<Sink>>> = RwLock::new(None);
/// Replaced sinks whose calls may still be running; `IDLE` is signalled when a call ends.
static RETIRED: Mutex<Vec<Arc<Sink>>> = Mutex::new(Vec::new());
static IDLE: Condvar = Condvar::new();

thread_local! {
    /// Whether this thread is inside the log callback (records it produces are dropped).
    static IN_SINK: Cell<bool> = const { Cell::new(false) };
}

fn retired() -> MutexGuard<'static, Vec<Arc<Sink>>> {
    RETIRED.lock().unwrap_or_else(|p| p.into_inner())
}

/// One call of a sink: counted from before the sink is released by `SINK`'s lock until the
/// embedder's callback has returned.
struct Call(Arc<Sink>);

impl Drop for Call {
    fn drop(&mut self) {
        IN_SINK.with(|f| f.set(false));
        self.0.calls.fetch_sub(1, Ordering::AcqRel);
        // Under RETIRED's lock, so that a waiter cannot miss the wake-up between its check and
        // its wait.
        let _r = retired();
        IDLE.notify_all();
    }
}

struct Logger;

impl log::Log for Logger {
    fn enabled(&self, _: &log::Metadata) -> bool {
        true
    }

    fn log(&self, record: &log::Record) {
        if IN_SINK.with(Cell::get) {
            return;
        }
        let call = {
            let sink = SINK.read().unwrap_or_else(|p| p.into_inner());
            let Some(sink) = sink.as_ref() else { return };
            sink.calls.fetch_add(1, Ordering::AcqRel);
            IN_SINK.with(|f| f.set(true));
            Call(Arc::clone(sink))
        };
        let level = match record.level() {
            log::Level::Error => MoteLogLevel::Error,
            log::Level::Warn => MoteLogLevel::Warn,
            log::Level::Info => MoteLogLevel::Info,
            log::Level::Debug => MoteLogLevel::Debug,
            log::Level::Trace => MoteLogLevel::Trace,
        };
        let target = CString::new(record.target().replace('\0', "")).unwrap_or_default();
        let message = CString::new(record.args().to_string().replace('\0', "")).unwrap_or_default();
        let sink = &call.0;
        // SAFETY: the embedder registered a function of this signature, callable from any
        // thread; the strings live until it returns, and `user_data` stays valid while the
        // call is counted (`mote_log_set_callback` waits for counted calls of a sink it
        // replaces).
        crate::callback::embedder(|| unsafe {
            (sink.callback)(
                sink.user_data as *mut c_void,
                level as u32,
                target.as_ptr(),
                message.as_ptr(),
            )
        });
        drop(call);
    }

    fn flush(&self) {}
}

static LOGGER: Logger = Logger;

/// Send Mote's log records up to `max_level` (a `MoteLogLevel`) to `callback`, process-wide,
/// replacing an earlier callback. NULL `callback` or `MOTE_LOG_LEVEL_OFF` stops logging.
/// Fails with `MOTE_ERROR_CODE_UNSUPPORTED` if another logger of the Rust `log` crate was
/// installed in this process first.
///
/// When it returns, the replaced callback is not running on any thread and will not be called
/// again, so its `user_data` may be released: it waits for calls of the replaced callback
/// that are running on other threads to return. Called from inside the log callback itself,
/// it cannot wait (two threads doing so would wait for each other) and returns at once: the
/// replaced callback may then still be finishing on other threads until the next
/// `mote_log_set_callback` made outside the log callback returns, which waits for them too.
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
        let sink = callback.map(|callback| {
            Arc::new(Sink {
                callback,
                user_data: user_data as usize,
                calls: AtomicUsize::new(0),
            })
        });
        let old = std::mem::replace(&mut *SINK.write().unwrap_or_else(|p| p.into_inner()), sink);
        log::set_max_level(level);
        // From here on no new call of `old` can start (calls are counted under SINK's lock).
        let mut retired = retired();
        retired.extend(old);
        if !IN_SINK.with(Cell::get) {
            while retired.iter().any(|s| s.calls.load(Ordering::Acquire) > 0) {
                retired = IDLE.wait(retired).unwrap_or_else(|p| p.into_inner());
            }
            retired.clear();
        }
        Ok(())
    })
}
