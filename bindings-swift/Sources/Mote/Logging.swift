import Foundation
#if canImport(os)
import os
#endif
// Compiled into both products (docs/swiftpm.md, "Two products"): this file is Mote's, and
// Sources/MoteRPC/Logging.swift is a symbolic link to it. Each product calls its own library's
// bridge, which exports the same names (bindings-swift/src/logging.rs is compiled into both Rust
// crates): MOTE_RPC (set by Package.swift for the MoteRPC target) says which.
// uniffi's generated module is an implementation detail: not re-exported, and no public
// declaration may mention its types (docs/uniffi.md).
#if MOTE_RPC
#if compiler(>=6.0)
internal import MoteRPCUniFFI
#else
@_implementationOnly import MoteRPCUniFFI
#endif
#else
#if compiler(>=6.0)
internal import MoteUniFFI
#else
@_implementationOnly import MoteUniFFI
#endif
#endif

/// Mote's log records.
public enum MoteLogging {
    /// Severity of a record.
    public enum Level: UInt8, Sendable, Comparable {
        /// Nothing is logged.
        case off = 0
        /// Errors.
        case error = 1
        /// Warnings.
        case warn = 2
        /// Information (a backend chosen, a subgraph planned...).
        case info = 3
        /// Debugging detail.
        case debug = 4
        /// Everything.
        case trace = 5

        /// Order by verbosity.
        public static func < (a: Level, b: Level) -> Bool { a.rawValue < b.rawValue }
    }

    /// Receives one record: its level, the Rust module that logged it, its text.
    public typealias Handler = @Sendable (Level, String, String) -> Void

    /// Send Mote's records up to `level` to `handler` (`nil`: to no Swift handler). On Apple
    /// platforms they also go to the unified log (`os.Logger`, subsystem `org.mote`, category
    /// the Rust module), whatever the handler; there, until this is first called, records at
    /// `.warn` and above go to the unified log alone (from the first `Model` on). The handler
    /// may run on any thread, including a session's workers.
    public static func setHandler(level: Level, _ handler: Handler?) {
        state.lock.lock()
        defer { state.lock.unlock() }
        state.configured = true
        install(level: level, handler)
    }

    /// Apple platforms: route records to the unified log unless an app chose otherwise.
    static func installDefault() {
        #if canImport(os)
        state.lock.lock()
        defer { state.lock.unlock() }
        if !state.configured {
            state.configured = true
            install(level: .warn, nil)
        }
        #endif
    }

    private static func install(level: Level, _ handler: Handler?) {
        #if canImport(os)
        setLogSink(sink: Sink(handler), level: level.rawValue)
        #else
        setLogSink(sink: handler.map { Sink($0) }, level: level.rawValue)
        #endif
    }

    private final class State: @unchecked Sendable {
        // Guards `configured` (set once the sink was chosen, by the app or by default).
        let lock = NSLock()
        var configured = false
    }

    private static let state = State()

    /// Log `message` through Mote's logger (apps can put their records in the same stream).
    public static func log(_ level: Level, _ message: String) {
        logMessage(level: level.rawValue, message: message)
    }

    private final class Sink: LogSink, @unchecked Sendable {
        let handler: Handler?
        init(_ h: Handler?) { handler = h }
        func log(level: UInt8, target: String, message: String) {
            let level = Level(rawValue: level) ?? .trace
            #if canImport(os)
            let logger = os.Logger(subsystem: "org.mote", category: target)
            switch level {
            case .error: logger.error("\(message, privacy: .public)")
            case .warn: logger.warning("\(message, privacy: .public)")
            case .info: logger.info("\(message, privacy: .public)")
            case .off, .debug, .trace: logger.debug("\(message, privacy: .public)")
            }
            #endif
            handler?(level, target, message)
        }
    }
}
