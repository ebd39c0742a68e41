import Foundation
// uniffi's generated module is an implementation detail: not re-exported, and no public
// declaration may mention its types (docs/uniffi.md).
#if compiler(>=6.0)
internal import MoteRPCUniFFI
#else
@_implementationOnly import MoteRPCUniFFI
#endif

/// Mote's RPC server (docs/rpc.md): TVM's unchanged Python client (`rpc.connect`, `upload`,
/// `load_module`, `time_evaluator`) runs models on the machine this app runs on.
///
/// **Sendable: yes.** Every method may be called from any thread. A started server runs
/// until ``stop()`` (which waits for running calls to end) or until the object is released
/// (which never waits: a server released while running is stopped on a thread of its own).
public final class RPCServer: Sendable {
    /// How clients reach the server (docs/rpc.md "Three ways to serve").
    public enum Mode: Sendable, Equatable {
        /// Clients connect to the listening socket.
        case listen
        /// Listen, and offer sessions to the TVM tracker at `tracker` (`"host:port"`);
        /// `customAddress` is the address the tracker hands to clients.
        case tracker(String, customAddress: String? = nil)
        /// Nothing listens: wait for clients at the TVM proxy at `proxy` (`"host:port"`).
        case proxy(String)
    }

    /// A server's settings.
    public struct Configuration: Sendable {
        /// Address to bind (default `127.0.0.1`; `0.0.0.0` for every interface).
        public var host: String = "127.0.0.1"
        /// Port to bind; 0 (default): any free port (read it with ``RPCServer/port``).
        public var port: UInt16 = 0
        /// The key clients present (`rpc.connect(host, port, key=...)`). Not a secret.
        public var key: String = ""
        /// Listen (default), tracker or proxy.
        public var mode: Mode = .listen
        /// Only these peer addresses may connect; empty: anyone who can reach the socket.
        public var allow: [String] = []
        /// Sessions served at once; `nil`: Mote's default, 4, and 1 in tracker mode, where it is
        /// also the number of places offered to the tracker (TVM's server offers one: a tuning
        /// tool timing two uploads at once on one device would get wrong numbers).
        public var maxSessions: Int?
        /// Threads of each session's runtime; `nil`: Mote's default.
        public var sessionThreads: Int?
        /// End sessions idle this long; `nil`: never.
        public var idleTimeout: TimeInterval?
        /// Folder for the sessions' sandboxes; `nil`: a temporary folder, removed at stop.
        public var sandbox: String?
        /// Load uploaded libraries as data only: code-free models run, a library that calls
        /// compiled kernels is refused naming them (`docs/code-free.md`). Always so on iOS,
        /// whatever this says; set it elsewhere to serve as an iPhone would.
        public var codeFree: Bool = false

        /// Defaults: listen on 127.0.0.1, any port, empty key.
        public init() {}
    }

    /// A snapshot of a server's state.
    public struct State: Sendable, Equatable {
        /// `listen`, `tracker` or `proxy`.
        public let mode: String
        /// The listening address (`host:port`); `nil` in proxy mode.
        public let address: String?
        /// Sessions running now.
        public let active: Int
        /// Sessions that have ended.
        public let served: Int
        /// Connections refused.
        public let refused: Int
        /// Tracker mode: registered on a live connection.
        public let trackerConnected: Bool
        /// Tracker mode: registrations so far.
        public let trackerRegistrations: Int
        /// Tracker mode: offers live at the tracker.
        public let trackerOffers: [String]
        /// Tracker mode: why the last attempt failed.
        public let trackerLastError: String?
        /// Proxy mode: a connection waits at the proxy.
        public let proxyWaiting: Bool
        /// Proxy mode: sessions paired so far.
        public let proxySessions: Int
        /// Proxy mode: why the last attempt failed.
        public let proxyLastError: String?
        /// The server has stopped.
        public let stopped: Bool
    }

    private let raw: NativeRpcServer

    /// Start a server. Binds at once: a port in use throws ``MoteError/io(_:)``, a bad setting
    /// ``MoteError/invalidArgument(_:)``. A tracker or proxy that cannot be reached is not an
    /// error: the server keeps trying and says why in ``state``.
    public init(_ configuration: Configuration = Configuration()) throws {
        let c = configuration
        if let n = c.maxSessions, n < 1 { throw MoteError.invalidArgument("maxSessions must be at least 1") }
        if let t = c.sessionThreads, t < 1 { throw MoteError.invalidArgument("sessionThreads must be at least 1") }
        if let t = c.idleTimeout, !(t > 0) { throw MoteError.invalidArgument("idleTimeout must be positive") }
        // Milliseconds in a UInt64, without trapping: infinite, NaN or astronomically long
        // timeouts are refused.
        var idleMs: UInt64 = 0
        if let t = c.idleTimeout {
            guard t.isFinite, let ms = UInt64(exactly: (t * 1000).rounded(.up)) else {
                throw MoteError.invalidArgument("idleTimeout \(t) s is not a finite number of milliseconds; use nil for none")
            }
            idleMs = ms
        }
        let mode: RpcMode
        switch c.mode {
        case .listen: mode = .listen
        case .tracker(let a, let custom): mode = .tracker(address: a, customAddress: custom)
        case .proxy(let a): mode = .proxy(address: a)
        }
        let config = RpcConfig(
            host: c.host, port: c.port, key: c.key, mode: mode, allow: c.allow,
            maxSessions: UInt32(clamping: c.maxSessions ?? 0), sessionThreads: UInt32(clamping: c.sessionThreads ?? 0),
            idleTimeoutMs: idleMs, sandbox: c.sandbox, codeFree: c.codeFree)
        raw = try bridged { try NativeRpcServer.start(config: config) }
    }

    /// The port clients connect to (the actual one when 0 was asked); `nil` in proxy mode.
    public var port: UInt16? { raw.port() }

    /// The current state.
    public var state: State {
        let s = raw.state()
        return State(
            mode: s.mode, address: s.address, active: Int(s.active), served: Int(s.served),
            refused: Int(s.refused), trackerConnected: s.trackerConnected,
            trackerRegistrations: Int(s.trackerRegistrations), trackerOffers: s.trackerOffers,
            trackerLastError: s.trackerLastError, proxyWaiting: s.proxyWaiting,
            proxySessions: Int(s.proxySessions), proxyLastError: s.proxyLastError, stopped: s.stopped)
    }

    /// Stop: refuse new sessions, let running calls finish, leave the tracker or proxy, remove
    /// the sandboxes, close the socket, and wait for all of it. A second call does nothing.
    public func stop() { raw.stop() }

    /// ``stop()`` off the caller's thread (it may wait for a running call to finish).
    public func stop() async {
        await withCheckedContinuation { (c: CheckedContinuation<Void, Never>) in
            DispatchQueue.global().async {
                self.raw.stop()
                c.resume()
            }
        }
    }

    /// The state now and at every change, polled every `interval` seconds, ending after the
    /// stopped state. For a status screen: `for await s in server.states() { ... }`.
    public func states(every interval: TimeInterval = 0.1) -> AsyncStream<State> {
        // A poll period that cannot trap: NaN, negative or infinite periods poll every 0.1 s,
        // longer than an hour polls hourly.
        let seconds = interval.isFinite && interval > 0 ? min(interval, 3600) : 0.1
        let pause = UInt64((seconds * 1e9).rounded(.up))
        return AsyncStream { continuation in
            let task = Task {
                var last: State?
                while !Task.isCancelled {
                    let s = self.state
                    if s != last { continuation.yield(s); last = s }
                    if s.stopped { break }
                    try? await Task.sleep(nanoseconds: pause)
                }
                continuation.finish()
            }
            continuation.onTermination = { _ in task.cancel() }
        }
    }
}
