import Foundation

/// A snapshot of what a ``ServerController`` is doing, for the status screen.
///
/// **Sendable: yes** (a value type).
public struct ServerStatus: Sendable, Equatable {
    /// Whether a server runs.
    public enum Phase: String, Sendable, Equatable {
        /// Not started, or stopped by ``ServerController/stop()``.
        case stopped
        /// A server runs with ``ServerStatus/settings``.
        case running
        /// Asked to run, but the last start failed (``ServerStatus/lastError`` says why, e.g.
        /// the port is in use); the watchdog tries again after a pause that grows to 30 s.
        case retrying
    }

    /// Tracker mode: how the registration with the TVM tracker goes.
    public struct Tracker: Sendable, Equatable {
        /// Registered on a live connection.
        public var connected: Bool
        /// Registrations so far.
        public var registrations: Int
        /// Offers (keys) live at the tracker.
        public var offers: [String]
        /// Why the last attempt failed.
        public var lastError: String?
    }

    /// Proxy mode: how the connection to the TVM proxy goes.
    public struct Proxy: Sendable, Equatable {
        /// A connection waits at the proxy for a client.
        public var waiting: Bool
        /// Sessions paired so far.
        public var sessions: Int
        /// Why the last attempt failed.
        public var lastError: String?
    }

    /// Running, retrying or stopped.
    public var phase: Phase = .stopped
    /// What was started (kept after a stop, so the screen can say what stopped).
    public var settings: AppSettings?
    /// The listening address (`host:port`) of the running server; `nil` in proxy mode or when
    /// no server runs.
    public var address: String?
    /// The listening port (the actual one when 0 was asked); `nil` as for ``address``.
    public var port: UInt16?
    /// Sessions running now.
    public var activeSessions = 0
    /// Sessions ended since the last ``ServerController/start(_:)`` (over restarts).
    public var servedSessions = 0
    /// Connections refused since the last start (over restarts).
    public var refusedSessions = 0
    /// Tracker mode only.
    public var tracker: Tracker?
    /// Proxy mode only.
    public var proxy: Proxy?
    /// The last thing that went wrong (a failed start, a server that stopped by itself).
    public var lastError: String?
    /// How often the watchdog restarted a server that stopped without being asked to, since the
    /// last start.
    public var restarts = 0
    /// Uploads are loaded as data only (always true here: iOS cannot load uploaded code).
    public var codeFree = true
    /// Prefixes of the models linked into the app (`Model.systemLibPrefixes`): what clients get
    /// with `remote.get_function("ffi.SystemLib")(prefix)`.
    public var linkedModels: [String] = []

    /// The mode of ``settings``.
    public var mode: AppSettings.Mode? { settings?.mode }

    /// Whether a server runs.
    public var isRunning: Bool { phase == .running }

    /// A few lines for the screen (and the tests' failure messages).
    public var summary: String {
        var lines: [String] = []
        lines.append("\(phase.rawValue)\(settings.map { ": \($0)" } ?? "")")
        if let a = address { lines.append("listening on \(a)") }
        lines.append("sessions: \(activeSessions) active, \(servedSessions) served, \(refusedSessions) refused")
        if let t = tracker {
            lines.append("tracker: \(t.connected ? "connected" : "not connected"), \(t.registrations) registrations, offers \(t.offers)\(t.lastError.map { ", last error: \($0)" } ?? "")")
        }
        if let p = proxy {
            lines.append("proxy: \(p.waiting ? "waiting" : "not waiting"), \(p.sessions) sessions\(p.lastError.map { ", last error: \($0)" } ?? "")")
        }
        lines.append("restarts: \(restarts)")
        if let e = lastError { lines.append("last error: \(e)") }
        lines.append("linked models: \(linkedModels.isEmpty ? "none" : linkedModels.joined(separator: ", "))")
        return lines.joined(separator: "\n")
    }
}
