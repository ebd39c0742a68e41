import Foundation
import MoteRPC

/// Runs Mote's RPC server (`RPCServer`, docs/rpc.md) for the app and keeps it running.
///
/// - ``start(_:)`` checks the settings (a ``SettingsError`` for bad ones) and starts a server
///   with them; a start that fails (port in use...) is not thrown but shown in ``status``
///   (``ServerStatus/Phase/retrying``) and retried by the watchdog.
/// - A watchdog thread refreshes ``status`` every ``Options/checkInterval`` and restarts a
///   server that stopped without ``stop()`` (counted in ``ServerStatus/restarts``), retrying
///   failed starts after 1, 2, 4 ... 30 s, as android-app's `RpcService` does.
/// - ``stop()`` stops the server and waits for it; nothing restarts after it.
/// - Uploads are always loaded as data only (`RPCServer.Configuration.codeFree`): iOS lets an
///   app run no code it downloaded (Mote forces this on iOS anyway; setting it everywhere makes
///   the Linux tests serve as an iPhone does). Clients run models linked into the app by prefix
///   (``linkedModels``) and upload code-free models (docs/code-free.md).
/// - Mote's log records (`MoteLogging.setHandler`, level `.info`) and the controller's own lines
///   go to ``log``, a bounded buffer.
///
/// The watchdog thread holds the controller while a server is wanted: a started controller
/// lives until ``stop()``, even when the app lets go of it.
///
/// **Sendable: yes.** Every method may be called from any thread. One lock guards all mutable
/// state; the server is started under it (binding a socket is quick) but stopped outside it
/// (a stop waits for running calls). Observers are called in order on one serial queue, never
/// under the lock.
public final class ServerController: @unchecked Sendable {
    /// Tuning that the screen does not show.
    public struct Options: Sendable {
        /// Tracker mode: the address the phone listens on (the tracker hands it to clients).
        public var trackerListenHost = "0.0.0.0"
        /// Tracker mode: the port the phone listens on (0: any free port; the tracker is told
        /// the actual one).
        public var trackerListenPort: UInt16 = 9090
        /// How often the watchdog looks at the server (and refreshes ``status``).
        public var checkInterval: TimeInterval = 0.5
        /// The first pause before retrying a failed start; it doubles up to ``maxBackoff``.
        public var initialBackoff: TimeInterval = 1
        /// The longest pause between retries.
        public var maxBackoff: TimeInterval = 30
        /// Lines kept in ``ServerController/log``.
        public var logCapacity = 500
        /// Sessions served at once; `nil`: Mote's default (4, and 1 in tracker mode, the one
        /// place TVM's server offers a tracker).
        public var maxSessions: Int?
        /// Threads of each session's runtime; `nil`: Mote's default.
        public var sessionThreads: Int?
        /// End sessions idle this long; `nil`: never.
        public var idleTimeout: TimeInterval? = 600

        /// The app's defaults.
        public init() {}
    }

    /// The tuning this controller was made with.
    public let options: Options
    /// The app's log: Mote's records and the controller's own lines, the last
    /// ``Options/logCapacity`` of them.
    public let log: LogBuffer
    /// Prefixes of the models linked into the app as TVM system libraries, sorted
    /// (`Model.systemLibPrefixes`, read once: the set is fixed before `main`).
    public let linkedModels: [String]

    private let lock = NSCondition()
    private let notifications = DispatchQueue(label: "org.mote.rpcapp.status")
    // Guarded by `lock`.
    private var wanted: AppSettings?
    private var server: RPCServer?
    private var generation = 0
    private var current = ServerStatus()
    private var observers: [UInt64: @Sendable (ServerStatus) -> Void] = [:]
    private var nextObserver: UInt64 = 0
    private var backoff: TimeInterval = 1
    private var nextAttempt = Date.distantPast
    private var servedBefore = 0    // sessions of servers that have stopped since the start
    private var refusedBefore = 0

    /// A stopped controller.
    public init(options: Options = Options()) {
        self.options = options
        log = LogBuffer(capacity: options.logCapacity)
        linkedModels = Model.systemLibPrefixes
        current.linkedModels = linkedModels
        MoteLogRouter.shared.add(log)
    }

    /// The status now.
    public var status: ServerStatus {
        lock.lock()
        defer { lock.unlock() }
        return current
    }

    /// Call `handler` with the status now and at every change, in order, on a serial queue of
    /// the controller's (not the main thread: hop to it for UI work). Keep the returned token:
    /// dropping it or calling its `cancel()` ends the calls.
    public func observe(_ handler: @escaping @Sendable (ServerStatus) -> Void) -> StatusObservation {
        lock.lock()
        nextObserver += 1
        let id = nextObserver
        observers[id] = handler
        let now = current
        notifications.async { handler(now) }
        lock.unlock()
        return StatusObservation { [weak self] in
            guard let self else { return }
            self.lock.lock()
            self.observers[id] = nil
            self.lock.unlock()
        }
    }

    /// The status now and at every change, as an async sequence (for `for await` in a view
    /// model); ends when the consumer stops iterating.
    public func statuses() -> AsyncStream<ServerStatus> {
        AsyncStream { continuation in
            let token = observe { continuation.yield($0) }
            continuation.onTermination = { _ in token.cancel() }
        }
    }

    /// Start serving `settings` (replacing a server that runs). Throws ``SettingsError`` for bad
    /// settings and starts nothing then. A server that cannot start now (port in use, no
    /// network) is not an error here: ``status`` says ``ServerStatus/Phase/retrying`` with
    /// the reason, and the watchdog tries again.
    @discardableResult
    public func start(_ settings: AppSettings) throws -> ServerStatus {
        try settings.validate()
        lock.lock()
        generation += 1   // the running watchdog, if any, ends at its next look
        let gen = generation
        let old = server
        server = nil
        wanted = settings
        servedBefore = 0
        refusedBefore = 0
        backoff = options.initialBackoff
        nextAttempt = .distantPast
        current = ServerStatus()
        current.settings = settings
        current.linkedModels = linkedModels
        current.phase = .retrying
        note(.info, "start: \(settings), uploads loaded code-free")
        note(.info, linkedModels.isEmpty
             ? "no models linked into the app (README: Models/libmodels.a)"
             : "linked models: \(linkedModels.joined(separator: ", ")) (ffi.SystemLib(prefix))")
        lock.broadcast()
        lock.unlock()
        // The server being replaced frees its port before the new one binds (outside the lock:
        // a stop waits for running calls).
        old?.stop()
        lock.lock()
        defer { lock.unlock() }
        // A later start() or stop() took over while the old server stopped: leave it to them.
        guard generation == gen else { return current }
        attemptStart()
        publish()
        let watchdog = Thread { self.watch(gen) }
        watchdog.name = "mote-rpc-watchdog"
        watchdog.start()
        return current
    }

    /// Stop the server and wait for it (running calls finish first); the watchdog starts
    /// nothing after this. Stopping a stopped controller does nothing.
    public func stop() {
        lock.lock()
        let wasWanted = wanted != nil
        generation += 1
        let gen = generation
        wanted = nil
        let s = server
        server = nil
        current.phase = .stopped
        current.address = nil
        current.port = nil
        current.activeSessions = 0
        current.tracker = nil
        current.proxy = nil
        if wasWanted { note(.info, "stopping") }
        lock.broadcast()   // wake the watchdog: it sees the new generation and ends
        publish()
        lock.unlock()
        guard let s else { return }
        s.stop()
        lock.lock()
        if generation == gen {
            // Sessions that ended while the server stopped count too.
            absorb(s.state)
            publish()
        }
        note(.info, "server stopped (\(current.servedSessions) sessions served)")
        lock.unlock()
    }

    /// ``stop()`` off the caller's thread (for the main actor: a stop may wait for a call).
    public func stop() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                self.stop()
                c.resume()
            }
        }
    }

    // MARK: - Watchdog

    private func watch(_ gen: Int) {
        lock.lock()
        defer { lock.unlock() }
        while generation == gen, let settings = wanted {
            if let s = server {
                let state = s.state
                if state.stopped {
                    // Stopped without stop(): count it, keep its sessions, start another.
                    absorb(state)
                    server = nil
                    current.restarts += 1
                    current.lastError = "the server stopped by itself"
                    note(.warn, "server stopped unexpectedly; restarting (\(current.restarts))")
                    backoff = options.initialBackoff
                    nextAttempt = .distantPast
                    attemptStart()
                } else {
                    show(state, settings)
                }
            } else if Date() >= nextAttempt {
                attemptStart()
            }
            publish()
            _ = lock.wait(until: Date().addingTimeInterval(options.checkInterval))
        }
    }

    /// Start a server with `wanted` (lock held). On failure: phase retrying, next attempt after
    /// the backoff, which then doubles.
    private func attemptStart() {
        guard let settings = wanted else { return }
        do {
            let s = try RPCServer(configuration(settings))
            server = s
            current.phase = .running
            backoff = options.initialBackoff
            show(s.state, settings)
            note(.info, "server running: \(s.state.address ?? "through proxy \(settings.address)")")
        } catch {
            current.phase = .retrying
            current.lastError = "start failed: \(error)"
            current.address = nil
            current.port = nil
            note(.warn, "start failed: \(error); retrying in \(Self.seconds(backoff))")
            nextAttempt = Date().addingTimeInterval(backoff)
            backoff = min(backoff * 2, options.maxBackoff)
        }
    }

    private func configuration(_ s: AppSettings) -> RPCServer.Configuration {
        var c = RPCServer.Configuration()
        c.key = s.key
        c.codeFree = true
        c.maxSessions = options.maxSessions
        c.sessionThreads = options.sessionThreads
        c.idleTimeout = options.idleTimeout
        switch s.mode {
        case .standalone:
            c.host = s.host
            c.port = UInt16(clamping: s.port)   // validate() checked 0...65535
            c.mode = .listen
        case .tracker:
            c.host = options.trackerListenHost
            c.port = options.trackerListenPort
            c.mode = .tracker(s.address)
        case .proxy:
            c.mode = .proxy(s.address)
        }
        return c
    }

    /// Fold a server's state into the status (lock held).
    private func show(_ s: RPCServer.State, _ settings: AppSettings) {
        current.address = s.address
        current.port = s.address.flatMap { a in a.split(separator: ":").last.flatMap { UInt16($0) } }
        current.activeSessions = s.active
        current.servedSessions = servedBefore + s.served
        current.refusedSessions = refusedBefore + s.refused
        current.tracker = settings.mode == .tracker
            ? ServerStatus.Tracker(connected: s.trackerConnected, registrations: s.trackerRegistrations,
                                   offers: s.trackerOffers, lastError: s.trackerLastError)
            : nil
        current.proxy = settings.mode == .proxy
            ? ServerStatus.Proxy(waiting: s.proxyWaiting, sessions: s.proxySessions, lastError: s.proxyLastError)
            : nil
    }

    /// Count the sessions of a server that has stopped (lock held).
    private func absorb(_ s: RPCServer.State) {
        servedBefore += s.served
        refusedBefore += s.refused
        current.servedSessions = servedBefore
        current.refusedSessions = refusedBefore
        current.activeSessions = 0
    }

    private var lastPublished: ServerStatus?   // guarded by `lock`

    /// Hand the status to the observers if it changed (lock held; delivery on the serial queue
    /// keeps the order of changes).
    private func publish() {
        guard current != lastPublished else { return }
        lastPublished = current
        let s = current
        let targets = Array(observers.values)
        guard !targets.isEmpty else { return }
        notifications.async { for t in targets { t(s) } }
    }

    private func note(_ level: MoteLogging.Level, _ message: String) {
        log.append(level, "app", message)
    }

    private static func seconds(_ t: TimeInterval) -> String {
        String(format: "%.1f s", t)
    }

    // MARK: - Test hooks

    /// The server running now (tests stop it behind the controller's back to exercise the
    /// watchdog).
    var currentServerForTesting: RPCServer? {
        lock.lock()
        defer { lock.unlock() }
        return server
    }
}

/// Keeps a ``ServerController/observe(_:)`` registration alive; `cancel()` or dropping it ends it.
public final class StatusObservation: @unchecked Sendable {
    private let lock = NSLock()
    private var onCancel: (() -> Void)?   // guarded by `lock`

    init(_ onCancel: @escaping () -> Void) { self.onCancel = onCancel }

    /// Stop the calls. A second call does nothing.
    public func cancel() {
        lock.lock()
        let f = onCancel
        onCancel = nil
        lock.unlock()
        f?()
    }

    deinit { cancel() }
}
