//! Mote's `log` records, to a Swift callback (`set_log_sink`). On Apple platforms the Swift
//! side's sink also writes them to the unified log through `os.Logger`
//! (Sources/Mote/Logging.swift, `MoteLogging`): Apple's `os_log` is a C macro over compiler
//! builtins, which a Rust crate can only reach through C compiled against Apple's SDK, and the
//! SDK is not on the machines that build the Apple slices (docs/apple.md).
//!
//! Compiled into two crates: mote-swift and mote-swift-rpc (bindings-swift/rpc, through
//! `#[path]`), whose Swift products share the `MoteLogging` wrapper over it (docs/swiftpm.md,
//! "Two products").

use std::cell::Cell;
use std::sync::{Arc, OnceLock, RwLock};

use log::{Level, LevelFilter, Log, Metadata, Record};

/// Receives Mote's log records (implemented in Swift).
#[uniffi::export(with_foreign)]
pub trait LogSink: Send + Sync {
    /// One record: `level` 1 (error) to 5 (trace), the Rust module that logged, the text.
    fn log(&self, level: u8, target: String, message: String);
}

struct SwiftLogger {
    sink: RwLock<Option<Arc<dyn LogSink>>>,
}

static LOGGER: OnceLock<SwiftLogger> = OnceLock::new();

thread_local! {
    /// Set while this thread is inside the sink: the sink may log through Mote again.
    static IN_LOG: Cell<bool> = const { Cell::new(false) };
}

fn logger() -> &'static SwiftLogger {
    LOGGER.get_or_init(|| SwiftLogger {
        sink: RwLock::new(None),
    })
}

fn filter(level: u8) -> LevelFilter {
    match level {
        0 => LevelFilter::Off,
        1 => LevelFilter::Error,
        2 => LevelFilter::Warn,
        3 => LevelFilter::Info,
        4 => LevelFilter::Debug,
        _ => LevelFilter::Trace,
    }
}

fn number(level: Level) -> u8 {
    match level {
        Level::Error => 1,
        Level::Warn => 2,
        Level::Info => 3,
        Level::Debug => 4,
        Level::Trace => 5,
    }
}

/// Send Mote's log records up to `level` (0 off, 1 error ... 5 trace) to `sink` (`None`: to
/// no Swift callback). Installs Mote's logger
/// the first time; if the process already has another `log` logger, that one stays and this
/// sink receives nothing.
#[uniffi::export]
pub fn set_log_sink(sink: Option<Arc<dyn LogSink>>, level: u8) {
    let l = logger();
    *l.sink.write().unwrap_or_else(|p| p.into_inner()) = sink;
    let _ = log::set_logger(l);
    log::set_max_level(filter(level));
}

/// Log `message` at `level` through Mote's logger (target: this module's path,
/// `mote_swift::logging` or `mote_swift_rpc::logging`): for tests and for
/// apps that want their own records in the same stream.
#[uniffi::export]
pub fn log_message(level: u8, message: String) {
    let level = match level {
        0 | 1 => Level::Error,
        2 => Level::Warn,
        3 => Level::Info,
        4 => Level::Debug,
        _ => Level::Trace,
    };
    log::log!(level, "{message}");
}

impl Log for SwiftLogger {
    fn enabled(&self, metadata: &Metadata<'_>) -> bool {
        metadata.level() <= log::max_level()
    }

    fn log(&self, record: &Record<'_>) {
        if !self.enabled(record.metadata()) || IN_LOG.with(|f| f.replace(true)) {
            return;
        }
        // Whoever logged may have C frames above (a kernel): nothing may unwind into them.
        let _ = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.emit(record)));
        IN_LOG.with(|f| f.set(false));
    }

    fn flush(&self) {}
}

impl SwiftLogger {
    fn emit(&self, record: &Record<'_>) {
        let message = record.args().to_string();
        let sink = self.sink.read().unwrap_or_else(|p| p.into_inner()).clone();
        if let Some(sink) = sink {
            sink.log(number(record.level()), record.target().to_string(), message);
        }
    }
}
