import Foundation
import MoteRPC
import XCTest
@testable import RPCAppCore

/// The controller serving TVM's unchanged Python client, as the app does on a phone: models
/// linked into the program (scripts/test-ios-app.sh links the zoo's system libraries whole into
/// this test executable) and code-free uploads; everything else is refused.
final class ServerControllerTests: XCTestCase {
    private func fastOptions() -> ServerController.Options {
        var o = ServerController.Options()
        o.checkInterval = 0.05
        o.initialBackoff = 0.2
        o.maxBackoff = 0.4
        return o
    }

    private func loopback(_ port: Int = 0, key: String = "") -> AppSettings {
        AppSettings(host: "127.0.0.1", port: port, key: key, mode: .standalone)
    }

    /// b and c of the brief: ffi.SystemLib by prefix, mote.system_libs, code-free uploads run and
    /// timed, mlp.so refused; the status counts the sessions and the log holds Mote's lines.
    func testStandaloneServesLinkedAndCodeFreeModelsToTVMsClient() throws {
        let names = try Env.linkedModels()
        let zoo = try Env.zoo(), ozoo = try Env.offloadZoo()
        var options = fastOptions()
        options.logCapacity = 60
        let controller = ServerController(options: options)
        defer { controller.stop() }
        // A second controller, never started, whose small log gets the same records of Mote's.
        var small = fastOptions()
        small.logCapacity = 8
        let quiet = ServerController(options: small)
        XCTAssertTrue(Set(names.map { $0 + "_" }).isSubset(of: Set(controller.linkedModels)), "\(controller.linkedModels)")

        let started = try controller.start(loopback())
        XCTAssertEqual(started.phase, .running, started.summary)
        let port = try XCTUnwrap(started.port, started.summary)
        XCTAssertGreaterThan(port, 0)
        XCTAssertEqual(started.address, "127.0.0.1:\(port)")
        XCTAssertTrue(started.codeFree)
        XCTAssertEqual(started.linkedModels, controller.linkedModels)
        XCTAssertEqual(started.servedSessions, 0)
        XCTAssertTrue(controller.log.snapshot.contains { $0.message.contains("linked models: ") && $0.message.contains("mlp_") },
                      "the linked models are logged at start")

        // 1. Linked models by prefix (python/rpc_zoo_client.py --system-lib): an unknown prefix
        //    is an empty module (as on TVM's server), mote.system_libs lists every prefix, each linked model's
        //    cases match TVM's outputs.
        let (code, out) = try runPython([Env.root + "/python/rpc_zoo_client.py", "--host", "127.0.0.1",
                                         "--port", String(port), "--zoo", zoo, "--system-lib"])
        XCTAssertEqual(code, 0, out)
        XCTAssertTrue(out.contains("ok   mote.system_libs lists"), out)
        XCTAssertTrue(out.contains("ok   mlp.forward"), out)
        let summary = out.split(separator: "\n").last { $0.hasPrefix("rpc zoo: ") }.map(String.init) ?? ""
        let passed = Int(summary.split(separator: " ").dropFirst(2).first ?? "") ?? 0
        XCTAssertEqual(summary, "rpc zoo: \(passed) passed, 0 failed", out)
        XCTAssertGreaterThanOrEqual(passed, 2 + names.count - 1, "two checks and a case per linked model: \(out)")
        print("ios app: system-lib client: \(summary)")

        // 2. Code-free uploads of the offload zoo run and are timed; mlp.so (compiled kernels)
        //    is refused as not code-free (rpc/tests/python/code_free.py).
        let script = Env.root + "/rpc/tests/python/code_free.py"
        let (code2, out2) = try runPython([script, "127.0.0.1", String(port), zoo, ozoo])
        XCTAssertEqual(code2, 0, out2)
        XCTAssertTrue(out2.contains("code_free: ok (3 models)"), out2)

        // 3. The status counts both sessions, none running.
        XCTAssertTrue(waitUntil(10) { controller.status.servedSessions == 2 }, controller.status.summary)
        let s = controller.status
        XCTAssertEqual(s.activeSessions, 0, s.summary)
        XCTAssertEqual(s.phase, .running)
        XCTAssertEqual(s.restarts, 0)

        // 4. The log holds Mote's own lines (connections, load_module of an upload, sessions
        //    ended) and stays within its capacity.
        let lines = controller.log.snapshot
        XCTAssertLessThanOrEqual(lines.count, 60)
        XCTAssertEqual(controller.log.count, lines.count)
        let text = lines.map { "\($0.source): \($0.message)" }.joined(separator: "\n")
        XCTAssertTrue(lines.contains { $0.source.hasPrefix("mote_rpc") && $0.message.contains("load_module") }, text)
        XCTAssertTrue(lines.contains { $0.message.contains("connected with key") }, text)
        XCTAssertTrue(lines.contains { $0.message.contains("session ended") }, text)
        print("ios app: \(lines.count) log lines kept (capacity 60), \(controller.log.dropped) dropped")
        XCTAssertEqual(quiet.log.count, 8, "the small log is full")
        XCTAssertGreaterThan(quiet.log.dropped, 0, "and dropped older lines")
        XCTAssertTrue(quiet.log.snapshot.contains { $0.message.contains("session ended") }, "the newest lines are kept")
        XCTAssertEqual(quiet.status.phase, .stopped)
    }

    /// d of the brief: stop frees the port; the watchdog replaces a server stopped behind the
    /// controller's back, and starts nothing after a requested stop.
    func testStopAndWatchdog() throws {
        let controller = ServerController(options: fastOptions())
        let seen = PhaseRecorder()
        let token = controller.observe { seen.add($0.phase) }
        defer { token.cancel() }
        XCTAssertEqual(controller.status.phase, .stopped)

        let first = try XCTUnwrap(try controller.start(loopback()).port)
        XCTAssertTrue(accepts(port: first))
        let original = try XCTUnwrap(controller.currentServerForTesting)
        original.stop()   // behind the controller's back
        XCTAssertTrue(waitUntil(10) { controller.status.restarts == 1 && controller.status.isRunning
                                      && controller.currentServerForTesting !== original },
                      controller.status.summary)
        let second = try XCTUnwrap(controller.status.port)
        XCTAssertTrue(accepts(port: second), "the replacement listens")
        XCTAssertTrue(controller.log.snapshot.contains { $0.message.contains("restarting (1)") })

        controller.stop()
        let s = controller.status
        XCTAssertEqual(s.phase, .stopped, s.summary)
        XCTAssertNil(s.port)
        XCTAssertNil(controller.currentServerForTesting)
        XCTAssertFalse(accepts(port: second), "nothing accepts on the port after stop")
        Thread.sleep(forTimeInterval: 0.5)   // ten watchdog periods
        XCTAssertEqual(controller.status.phase, .stopped)
        XCTAssertEqual(controller.status.restarts, 1, "no restart after a requested stop")
        XCTAssertNil(controller.currentServerForTesting)
        controller.stop()   // a second stop does nothing

        XCTAssertTrue(waitUntil(5) { seen.phases.last == .stopped }, "\(seen.phases)")
        let phases = seen.phases
        XCTAssertEqual(phases.first, .stopped, "the observer gets the status at once")
        XCTAssertTrue(phases.contains(.running), "\(phases)")
    }

    /// A port in use is not a crash: the status says retrying with the reason, and the server
    /// comes up once the port is free.
    func testAFailedStartIsRetried() throws {
        let blocker = try RPCServer()
        let port = try XCTUnwrap(blocker.port)
        let controller = ServerController(options: fastOptions())
        defer { controller.stop() }
        let s = try controller.start(loopback(Int(port)))
        XCTAssertEqual(s.phase, .retrying, s.summary)
        XCTAssertNotNil(s.lastError, s.summary)
        XCTAssertTrue(controller.log.snapshot.contains { $0.message.hasPrefix("start failed") })
        blocker.stop()
        XCTAssertTrue(waitUntil(10) { controller.status.isRunning }, controller.status.summary)
        XCTAssertEqual(controller.status.port, port)
        XCTAssertEqual(controller.status.restarts, 0, "a retried start is not a restart")
        XCTAssertTrue(accepts(port: port))
    }

    /// Starts from several threads at once leave one server running and none behind: after
    /// stop(), no port any start reported accepts.
    func testConcurrentStartsLeaveOneServer() throws {
        let controller = ServerController(options: fastOptions())
        let ports = PortRecorder()
        DispatchQueue.concurrentPerform(iterations: 6) { _ in
            if let p = (try? controller.start(self.loopback()))?.port { ports.add(p) }
        }
        XCTAssertTrue(waitUntil(10) { controller.status.isRunning }, controller.status.summary)
        let running = try XCTUnwrap(controller.status.port)
        ports.add(running)
        XCTAssertTrue(accepts(port: running))
        let others = ports.all.filter { $0 != running }
        XCTAssertTrue(others.allSatisfy { !accepts(port: $0) }, "replaced servers still listen: \(others)")
        controller.stop()
        XCTAssertEqual(controller.status.phase, .stopped)
        XCTAssertTrue(ports.all.allSatisfy { !accepts(port: $0) }, "\(ports.all)")
        Thread.sleep(forTimeInterval: 0.3)
        XCTAssertNil(controller.currentServerForTesting, "no watchdog started a server after stop")
    }

    func testBadSettingsStartNothing() throws {
        let controller = ServerController(options: fastOptions())
        XCTAssertThrowsError(try controller.start(AppSettings(host: "", port: 9190, key: "k", mode: .tracker))) {
            XCTAssertEqual($0 as? SettingsError, .emptyTrackerAddress)
        }
        XCTAssertThrowsError(try controller.start(AppSettings(host: "127.0.0.1", port: 70000, key: "", mode: .standalone))) {
            XCTAssertEqual($0 as? SettingsError, .portOutOfRange(70000))
        }
        XCTAssertEqual(controller.status.phase, .stopped)
        XCTAssertNil(controller.currentServerForTesting)
    }

    /// Proxy mode through TVM's own proxy: nothing listens on the phone; TVM's client reaches
    /// the linked models through the proxy.
    func testProxyModeThroughTVMsProxy() throws {
        let python = try Env.python(), zoo = try Env.zoo()
        let proxyPort = freePort()
        let proxy = Process()
        proxy.executableURL = URL(fileURLWithPath: python)
        proxy.arguments = ["-m", "tvm.exec.rpc_proxy", "--host", "127.0.0.1", "--port", String(proxyPort),
                           "--port-end", String(proxyPort + 1), "--web-port", "0"]
        proxy.standardOutput = FileHandle.nullDevice
        proxy.standardError = FileHandle.nullDevice
        try proxy.run()
        defer { proxy.terminate(); proxy.waitUntilExit() }
        XCTAssertTrue(waitUntil(30) { accepts(port: proxyPort) }, "TVM's proxy never listened")

        let controller = ServerController(options: fastOptions())
        defer { controller.stop() }
        try controller.start(AppSettings(host: "127.0.0.1", port: Int(proxyPort), key: "iphone-proxy", mode: .proxy))
        XCTAssertTrue(waitUntil(30) { controller.status.proxy?.waiting == true }, controller.status.summary)
        XCTAssertNil(controller.status.port, "nothing listens in proxy mode")
        XCTAssertNil(controller.status.tracker)

        let (code, out) = try runPython([Env.root + "/python/rpc_zoo_client.py", "--host", "127.0.0.1",
                                         "--port", String(proxyPort), "--key", "iphone-proxy", "--zoo", zoo,
                                         "--system-lib", "--only", "mlp"])
        XCTAssertEqual(code, 0, out)
        XCTAssertTrue(out.contains("ok   mlp.forward"), out)
        XCTAssertTrue(waitUntil(10) { controller.status.servedSessions == 1 }, controller.status.summary)
        XCTAssertEqual(controller.status.proxy?.sessions, 1, controller.status.summary)
        controller.stop()
        XCTAssertEqual(controller.status.phase, .stopped)
    }

    /// e of the brief: tracker mode through TVM's own tracker; TVM's client gets a session from
    /// the tracker and runs a linked model by prefix.
    func testTrackerModeThroughTVMsTracker() throws {
        let python = try Env.python(), zoo = try Env.zoo()
        let trackerPort = freePort()
        let tracker = Process()
        tracker.executableURL = URL(fileURLWithPath: python)
        tracker.arguments = ["-m", "tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", String(trackerPort),
                             "--port-end", String(trackerPort + 1)]
        tracker.standardOutput = FileHandle.nullDevice
        tracker.standardError = FileHandle.nullDevice
        try tracker.run()
        defer { tracker.terminate(); tracker.waitUntilExit() }
        XCTAssertTrue(waitUntil(30) { accepts(port: trackerPort) }, "TVM's tracker never listened")

        var options = fastOptions()
        options.trackerListenHost = "127.0.0.1"
        options.trackerListenPort = 0
        let controller = ServerController(options: options)
        defer { controller.stop() }
        try controller.start(AppSettings(host: "127.0.0.1", port: Int(trackerPort), key: "iphone", mode: .tracker))
        XCTAssertTrue(waitUntil(30) { controller.status.tracker?.connected == true }, controller.status.summary)
        XCTAssertNotNil(controller.status.port, "the phone listens in tracker mode")

        let (code, out) = try runPython([Env.root + "/ios-app/Tests/python/tracker_client.py", "127.0.0.1",
                                         String(trackerPort), "iphone", zoo, "mlp"])
        XCTAssertEqual(code, 0, out)
        XCTAssertTrue(out.contains("tracker: ok mlp"), out)
        XCTAssertTrue(waitUntil(10) { controller.status.servedSessions == 1 }, controller.status.summary)
        let s = controller.status
        XCTAssertEqual(s.mode, .tracker)
        XCTAssertGreaterThanOrEqual(s.tracker?.registrations ?? 0, 1, s.summary)
        XCTAssertNil(s.proxy)
        controller.stop()
        XCTAssertEqual(controller.status.phase, .stopped)
        XCTAssertNil(controller.status.tracker)
    }
}

/// Phases an observer saw, in order.
final class PhaseRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private var seen: [ServerStatus.Phase] = []   // guarded by `lock`

    func add(_ p: ServerStatus.Phase) {
        lock.lock()
        defer { lock.unlock() }
        if seen.last != p { seen.append(p) }
    }

    var phases: [ServerStatus.Phase] {
        lock.lock()
        defer { lock.unlock() }
        return seen
    }
}

/// Ports seen from several threads.
final class PortRecorder: @unchecked Sendable {
    private let lock = NSLock()
    private var ports: Set<UInt16> = []   // guarded by `lock`

    func add(_ p: UInt16) {
        lock.lock()
        defer { lock.unlock() }
        ports.insert(p)
    }

    var all: [UInt16] {
        lock.lock()
        defer { lock.unlock() }
        return ports.sorted()
    }
}
