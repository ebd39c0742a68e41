import Foundation
import SwiftUI
import UIKit
import RPCAppCore

/// The screen's state on the main actor: the form's fields, the controller's status and log.
/// All logic (validation, the server, the watchdog, the log) is in RPCAppCore, tested on Linux;
/// this only moves values between it and SwiftUI.
@MainActor
final class RPCViewModel: ObservableObject {
    @Published var host: String
    @Published var port: String
    @Published var key: String
    @Published var mode: AppSettings.Mode
    /// Why the last Start was refused (a bad field), shown under the form.
    @Published var formError: String?
    @Published private(set) var status: ServerStatus
    /// Newest first.
    @Published private(set) var logLines: [LogLine] = []
    @Published private(set) var deviceAddresses: [String] = []

    let controller: ServerController
    private let store: any SettingsStore
    private var resumeWhenActive = false
    private var backgroundTask = UIBackgroundTaskIdentifier.invalid
    // The two loops below run for the life of the model (the app's, as a @StateObject of the
    // App); they hold it weakly.
    private var statusTask: Task<Void, Never>?
    private var logTask: Task<Void, Never>?

    init(store: any SettingsStore, controller: ServerController = ServerController()) {
        self.store = store
        self.controller = controller
        let saved = store.loadOrDefaults()
        host = saved.host
        port = String(saved.port)
        key = saved.key
        mode = saved.mode
        status = controller.status
        deviceAddresses = deviceIPv4Addresses()
        let statuses = controller.statuses()
        statusTask = Task { [weak self] in
            for await s in statuses {
                guard let self else { return }
                self.status = s
                // Keep the screen on while serving: a locked phone suspends the app.
                UIApplication.shared.isIdleTimerDisabled = s.phase != .stopped
            }
        }
        let log = controller.log
        logTask = Task { [weak self] in
            var lastId: UInt64 = 0
            while !Task.isCancelled {
                let lines = log.snapshot
                if let newest = lines.last?.id, newest != lastId {
                    lastId = newest
                    self?.logLines = lines.reversed()
                }
                try? await Task.sleep(nanoseconds: 500_000_000)
            }
        }
    }

    /// What the host field means in the chosen mode.
    var hostLabel: String {
        switch mode {
        case .standalone: return "Listen on (0.0.0.0 = every interface)"
        case .tracker: return "Tracker address"
        case .proxy: return "Proxy address"
        }
    }

    /// Check the fields, remember them, and start (or restart) the server.
    func start() {
        do {
            let settings = try AppSettings.parse(host: host, port: port, key: key, mode: mode)
            formError = nil
            store.save(settings)
            deviceAddresses = deviceIPv4Addresses()
            try controller.start(settings)
        } catch let e as SettingsError {
            formError = e.description
        } catch {
            formError = "\(error)"
        }
    }

    /// Stop the server (off the main thread: a stop waits for a running call).
    func stop() {
        resumeWhenActive = false
        Task { await controller.stop() }
    }

    /// The app left the screen: stop serving (iOS is about to suspend it) and start again
    /// when it is back in front.
    func scenePhaseChanged(_ phase: ScenePhase) {
        switch phase {
        case .background:
            guard status.phase != .stopped else { return }
            resumeWhenActive = true
            // A few seconds of background time to close the socket and end the sessions.
            endBackgroundTask()
            backgroundTask = UIApplication.shared.beginBackgroundTask(withName: "Stop the RPC server") { [weak self] in
                MainActor.assumeIsolated { self?.endBackgroundTask() }
            }
            Task {
                await controller.stop()
                endBackgroundTask()
            }
        case .active:
            if resumeWhenActive {
                resumeWhenActive = false
                start()
            }
        default:
            break
        }
    }

    private func endBackgroundTask() {
        guard backgroundTask != .invalid else { return }
        UIApplication.shared.endBackgroundTask(backgroundTask)
        backgroundTask = .invalid
    }
}
