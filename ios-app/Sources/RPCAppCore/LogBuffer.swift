import Foundation
import MoteRPC

/// One line of the app's log.
public struct LogLine: Sendable, Equatable, Identifiable {
    /// Increasing number, unique within a buffer (a SwiftUI list's identity).
    public let id: UInt64
    /// When it was logged.
    public let date: Date
    /// Severity (Mote's levels; the app's own lines are `.info` or `.warn`).
    public let level: MoteLogging.Level
    /// The Rust module that logged it (`mote_rpc::state`...), or `app` for the app's own lines.
    public let source: String
    /// The text.
    public let message: String

    /// An error or a warning (the screen shows these in red).
    public var isProblem: Bool { level == .error || level == .warn }
}

/// The last ``capacity`` log lines; older ones are dropped (``dropped`` counts them).
///
/// **Sendable: yes.** Every method may be called from any thread (a lock guards the lines);
/// Mote's records arrive on the server's own threads.
public final class LogBuffer: @unchecked Sendable {
    /// How many lines are kept.
    public let capacity: Int
    private let lock = NSLock()
    // Guarded by `lock`.
    private var lines: [LogLine] = []
    private var start = 0          // ring buffer: index of the oldest line once full
    private var nextId: UInt64 = 0
    private var droppedCount = 0

    /// A buffer keeping the last `capacity` lines (at least 1).
    public init(capacity: Int = 500) {
        self.capacity = max(1, capacity)
        lines.reserveCapacity(self.capacity)
    }

    /// Add a line, dropping the oldest when full.
    public func append(_ level: MoteLogging.Level, _ source: String, _ message: String) {
        lock.lock()
        defer { lock.unlock() }
        nextId += 1
        let line = LogLine(id: nextId, date: Date(), level: level, source: source, message: message)
        if lines.count < capacity {
            lines.append(line)
        } else {
            lines[start] = line
            start = (start + 1) % capacity
            droppedCount += 1
        }
    }

    /// The lines kept, oldest first.
    public var snapshot: [LogLine] {
        lock.lock()
        defer { lock.unlock() }
        return Array(lines[start...] + lines[..<start])
    }

    /// How many lines are kept now (at most ``capacity``).
    public var count: Int {
        lock.lock()
        defer { lock.unlock() }
        return lines.count
    }

    /// How many lines were dropped to stay within ``capacity``.
    public var dropped: Int {
        lock.lock()
        defer { lock.unlock() }
        return droppedCount
    }

    /// Forget every line.
    public func clear() {
        lock.lock()
        defer { lock.unlock() }
        lines.removeAll(keepingCapacity: true)
        start = 0
    }
}

/// Mote's log handler (`MoteLogging.setHandler`) is one per process; this hands each record to every
/// live controller's buffer. Installed once, at the first ``ServerController``.
final class MoteLogRouter: @unchecked Sendable {
    static let shared = MoteLogRouter()

    private final class WeakBuffer {
        weak var buffer: LogBuffer?
        init(_ b: LogBuffer) { buffer = b }
    }

    private let lock = NSLock()
    private var buffers: [WeakBuffer] = []   // guarded by `lock`
    private var installed = false            // guarded by `lock`

    /// Route Mote's records at `.info` and above to `buffer` while it lives.
    func add(_ buffer: LogBuffer) {
        lock.lock()
        buffers.removeAll { $0.buffer == nil }
        buffers.append(WeakBuffer(buffer))
        let install = !installed
        installed = true
        lock.unlock()
        if install {
            // `.info`: the server's lines (connections, load_module, sessions ended) are what a
            // user watching the phone wants; `.debug` would flood the buffer with every call.
            MoteLogging.setHandler(level: .info) { level, target, message in
                MoteLogRouter.shared.deliver(level, target, message)
            }
        }
    }

    private func deliver(_ level: MoteLogging.Level, _ target: String, _ message: String) {
        lock.lock()
        let live = buffers.compactMap { $0.buffer }
        lock.unlock()
        for b in live { b.append(level, target, message) }
    }
}
