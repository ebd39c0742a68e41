import Foundation

/// What the user asked for on the app's screen: where to serve and under which key.
///
/// `host:port` means, by ``Mode``:
/// - ``Mode/standalone``: the address the phone listens on (`0.0.0.0`: every interface; port 0:
///   any free port, shown in the status);
/// - ``Mode/tracker``: the TVM tracker (`python -m tvm.exec.rpc_tracker`) the phone registers
///   with; the phone itself listens on every interface at
///   ``ServerController/Options/trackerListenPort`` (9090) and the tracker hands that out;
/// - ``Mode/proxy``: the TVM proxy (`python -m tvm.exec.rpc_proxy`) the phone connects out to;
///   nothing listens on the phone.
///
/// A value is plain data and may hold anything; ``validate()`` (which
/// ``ServerController/start(_:)`` calls) says what is wrong with it as a ``SettingsError``.
/// **Sendable: yes** (a value type).
public struct AppSettings: Sendable, Equatable, Codable {
    /// How clients reach the server; see the type's comment.
    public enum Mode: String, Sendable, Equatable, Codable, CaseIterable {
        /// Listen at host:port.
        case standalone
        /// Register with the TVM tracker at host:port.
        case tracker
        /// Wait for clients at the TVM proxy at host:port.
        case proxy
    }

    /// The listening address (standalone) or the tracker's or proxy's address.
    public var host: String
    /// The listening port (standalone; 0 = any free port) or the tracker's or proxy's port.
    public var port: Int
    /// The key clients ask for (`rpc.connect(host, port, key=...)`, `tracker.request(key)`).
    /// Not a secret: anyone who can reach the phone can connect.
    public var key: String
    /// Standalone, tracker or proxy.
    public var mode: Mode

    /// Settings as given; nothing is checked here (see ``validate()``).
    public init(host: String, port: Int, key: String, mode: Mode) {
        self.host = host
        self.port = port
        self.key = key
        self.mode = mode
    }

    /// What the app shows on its first start: listen on every interface at 9090, key `iphone`.
    public static let defaults = AppSettings(host: "0.0.0.0", port: 9090, key: "iphone", mode: .standalone)

    /// Settings from the screen's text fields (trimmed), checked: the port must be a number.
    public static func parse(host: String, port: String, key: String, mode: Mode) throws -> AppSettings {
        let p = port.trimmingCharacters(in: .whitespaces)
        guard let n = Int(p) else { throw SettingsError.portNotANumber(port) }
        let s = AppSettings(host: host.trimmingCharacters(in: .whitespaces), port: n,
                            key: key.trimmingCharacters(in: .whitespaces), mode: mode)
        try s.validate()
        return s
    }

    /// Throws the first problem found, as a ``SettingsError``; returns when the settings can be
    /// served.
    public func validate() throws {
        if host.isEmpty {
            switch mode {
            case .standalone: throw SettingsError.emptyHost
            case .tracker: throw SettingsError.emptyTrackerAddress
            case .proxy: throw SettingsError.emptyProxyAddress
            }
        }
        if host.contains(where: { $0.isWhitespace || $0 == "/" }) {
            throw SettingsError.invalidHost(host)
        }
        if !(0...65535).contains(port) { throw SettingsError.portOutOfRange(port) }
        if port == 0 && mode != .standalone { throw SettingsError.portZeroNeedsStandalone(mode) }
        if key.contains(where: { $0.isWhitespace || $0.isNewline }) { throw SettingsError.invalidKey(key) }
        if key.isEmpty && mode == .tracker { throw SettingsError.emptyKeyForTracker }
    }

    /// `host:port`, IPv6 literals bracketed (what the tracker and proxy settings of
    /// `RPCServer` want).
    public var address: String {
        let h = host.contains(":") && !host.hasPrefix("[") ? "[\(host)]" : host
        return "\(h):\(port)"
    }
}

extension AppSettings: CustomStringConvertible {
    /// `standalone 0.0.0.0:9090 key=iphone`.
    public var description: String { "\(mode.rawValue) \(address) key=\(key)" }
}

/// Why settings cannot be served. Every case says which field is wrong.
public enum SettingsError: Error, Equatable, Sendable, CustomStringConvertible {
    /// Standalone mode: the address to listen on is empty (`0.0.0.0` listens on every interface).
    case emptyHost
    /// Tracker mode: the tracker's address is empty.
    case emptyTrackerAddress
    /// Proxy mode: the proxy's address is empty.
    case emptyProxyAddress
    /// The address has spaces or a slash in it.
    case invalidHost(String)
    /// The port field is not a whole number.
    case portNotANumber(String)
    /// The port is outside 0...65535.
    case portOutOfRange(Int)
    /// Port 0 (any free port) only means something when listening (standalone).
    case portZeroNeedsStandalone(AppSettings.Mode)
    /// The key has spaces in it.
    case invalidKey(String)
    /// Tracker mode: clients ask the tracker for a key, so it cannot be empty.
    case emptyKeyForTracker

    /// A sentence for the screen.
    public var description: String {
        switch self {
        case .emptyHost: return "host is empty (0.0.0.0 listens on every interface)"
        case .emptyTrackerAddress: return "tracker address is empty"
        case .emptyProxyAddress: return "proxy address is empty"
        case .invalidHost(let h): return "host '\(h)' is not an address"
        case .portNotANumber(let p): return "port '\(p)' is not a number"
        case .portOutOfRange(let p): return "port \(p) is out of range (0-65535)"
        case .portZeroNeedsStandalone(let m): return "port 0 (any port) needs standalone mode, not \(m.rawValue)"
        case .invalidKey(let k): return "key '\(k)' has spaces in it"
        case .emptyKeyForTracker: return "tracker mode needs a key"
        }
    }
}

/// Where the app remembers its settings between launches.
///
/// Implementations must be safe to call from any thread (hence `Sendable`).
public protocol SettingsStore: Sendable {
    /// The settings saved last, or `nil` when none were saved or they cannot be read.
    func load() -> AppSettings?
    /// Remember `settings` (replacing what was saved).
    func save(_ settings: AppSettings)
}

extension SettingsStore {
    /// The saved settings, or ``AppSettings/defaults``.
    public func loadOrDefaults() -> AppSettings { load() ?? .defaults }
}

/// Settings in `UserDefaults`, as one JSON value under ``key``.
///
/// **Sendable: yes.** `UserDefaults` is documented as thread-safe; this type holds nothing else.
public final class UserDefaultsSettingsStore: SettingsStore, @unchecked Sendable {
    /// The `UserDefaults` key.
    public let key: String
    private let defaults: UserDefaults

    /// A store in `defaults` (default: the app's standard defaults) under `key`.
    public init(_ defaults: UserDefaults = .standard, key: String = "org.mote.rpcapp.settings") {
        self.defaults = defaults
        self.key = key
    }

    public func load() -> AppSettings? {
        guard let data = defaults.data(forKey: key) else { return nil }
        return try? JSONDecoder().decode(AppSettings.self, from: data)
    }

    public func save(_ settings: AppSettings) {
        // Encoding four plain fields cannot fail; if it ever did, nothing is saved.
        if let data = try? JSONEncoder().encode(settings) { defaults.set(data, forKey: key) }
    }
}

/// Settings in memory only (tests, previews).
///
/// **Sendable: yes**, through a lock.
public final class InMemorySettingsStore: SettingsStore, @unchecked Sendable {
    private let lock = NSLock()
    private var saved: AppSettings?   // guarded by `lock`

    /// An empty store, or one holding `initial`.
    public init(_ initial: AppSettings? = nil) { saved = initial }

    public func load() -> AppSettings? {
        lock.lock()
        defer { lock.unlock() }
        return saved
    }

    public func save(_ settings: AppSettings) {
        lock.lock()
        defer { lock.unlock() }
        saved = settings
    }
}
