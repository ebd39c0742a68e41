import Foundation
import XCTest
@testable import MoteRPC

/// An RPCServer started from Swift (the product MoteRPC) serves TVM's unchanged Python client
/// (bindings-java/java/src/test/python/rpc_client.py, run with MOTE_PYTHON).
final class RPCServerTests: XCTestCase {
    static var client: String {
        ProcessInfo.processInfo.environment["MOTE_RPC_CLIENT"]
            ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent()
                .appendingPathComponent("../../../bindings-java/java/src/test/python/rpc_client.py").standardized.path
    }

    /// Run the Python client; its exit code and output.
    func runClient(_ args: [String]) throws -> (Int32, String) {
        let python = try Env.require("MOTE_PYTHON")
        XCTAssertTrue(FileManager.default.fileExists(atPath: Self.client), "no client at \(Self.client)")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: python)
        p.arguments = [Self.client] + args
        var env = ProcessInfo.processInfo.environment
        env["PYTHONUNBUFFERED"] = "1"
        p.environment = env
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = pipe
        try p.run()
        let out = pipe.fileHandleForReading.readDataToEndOfFile()
        p.waitUntilExit()
        return (p.terminationStatus, String(decoding: out, as: UTF8.self))
    }

    func testServesTVMsPythonClient() throws {
        var config = RPCServer.Configuration()
        config.key = "swift"
        config.sessionThreads = 2
        let server = try RPCServer(config)
        defer { server.stop() }
        let port = try XCTUnwrap(server.port)
        XCTAssertGreaterThan(port, 0)
        XCTAssertEqual(server.state.mode, "listen")
        XCTAssertEqual(server.state.served, 0)
        let (code, output) = try runClient([try Env.zoo(), "direct", "127.0.0.1", String(port), "swift"])
        XCTAssertEqual(code, 0, "rpc_client.py: \(output)")
        XCTAssertTrue(output.split(separator: "\n").contains { $0.hasPrefix("ok ") }, output)
        let deadline = Date().addingTimeInterval(10)
        while server.state.served < 1 && Date() < deadline { Thread.sleep(forTimeInterval: 0.05) }
        XCTAssertEqual(server.state.served, 1)
        XCTAssertEqual(server.state.active, 0)
        server.stop()
        XCTAssertTrue(server.state.stopped)
        server.stop()   // a second stop does nothing
        // Nothing accepts on the port any more: the client fails.
        let (after, _) = try runClient([try Env.zoo(), "direct", "127.0.0.1", String(port), "swift"])
        XCTAssertNotEqual(after, 0)
    }

    /// A server that loads uploads as data only, as on an iPhone: TVM's client runs and times
    /// code-free models of the offload zoo and gets mlp.so refused as not code-free
    /// (rpc/tests/python/code_free.py).
    func testACodeFreeServerRunsCodeFreeUploadsAndRefusesCode() throws {
        let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("../../../rpc/tests/python/code_free.py").standardized.path
        var config = RPCServer.Configuration()
        config.codeFree = true
        let server = try RPCServer(config)
        defer { server.stop() }
        let port = try XCTUnwrap(server.port)
        let python = try Env.require("MOTE_PYTHON")
        let p = Process()
        p.executableURL = URL(fileURLWithPath: python)
        p.arguments = [script, "127.0.0.1", String(port), try Env.zoo(), try Env.require("MOTE_OFFLOAD_ZOO_DIR")]
        let pipe = Pipe()
        p.standardOutput = pipe
        p.standardError = pipe
        try p.run()
        let out = String(decoding: pipe.fileHandleForReading.readDataToEndOfFile(), as: UTF8.self)
        p.waitUntilExit()
        XCTAssertEqual(p.terminationStatus, 0, out)
        XCTAssertTrue(out.contains("code_free: ok (3 models)"), out)
    }

    func testBadSettingsAndPortInUse() throws {
        let a = try RPCServer()
        defer { a.stop() }
        var c = RPCServer.Configuration()
        c.port = try XCTUnwrap(a.port)
        XCTAssertThrowsError(try RPCServer(c)) { XCTAssertEqual(($0 as? MoteError)?.code, 1, "\($0)") }
        var bad = RPCServer.Configuration()
        bad.allow = ["not-an-ip"]
        XCTAssertThrowsError(try RPCServer(bad)) { XCTAssertEqual(($0 as? MoteError)?.code, 11, "\($0)") }
        bad = RPCServer.Configuration()
        bad.maxSessions = 0
        XCTAssertThrowsError(try RPCServer(bad)) { XCTAssertEqual(($0 as? MoteError)?.code, 11, "\($0)") }
        // Timeouts no UInt64 of milliseconds holds throw instead of trapping.
        for t in [TimeInterval.infinity, .nan, 1e30, -1] {
            bad = RPCServer.Configuration()
            bad.idleTimeout = t
            XCTAssertThrowsError(try RPCServer(bad), "idleTimeout \(t)") {
                XCTAssertEqual(($0 as? MoteError)?.code, 11, "\($0)")
            }
        }
    }

    func testTrackerAndProxyModesReportUnreachablePeers() async throws {
        // A port nobody listens on: take a free one from a server, then stop it.
        let probe = try RPCServer()
        let dead = "127.0.0.1:\(probe.port!)"
        await probe.stop()
        var t = RPCServer.Configuration()
        t.mode = .tracker(dead)
        let tracker = try RPCServer(t)
        var p = RPCServer.Configuration()
        p.mode = .proxy(dead)
        let proxy = try RPCServer(p)
        XCTAssertNil(proxy.port, "nothing listens in proxy mode")
        XCTAssertEqual(tracker.state.mode, "tracker")
        XCTAssertEqual(proxy.state.mode, "proxy")
        let deadline = Date().addingTimeInterval(10)
        while (tracker.state.trackerLastError == nil || proxy.state.proxyLastError == nil) && Date() < deadline {
            try await Task.sleep(nanoseconds: 50_000_000)
        }
        XCTAssertNotNil(tracker.state.trackerLastError)
        XCTAssertFalse(tracker.state.trackerConnected)
        XCTAssertNotNil(proxy.state.proxyLastError)
        // The state stream ends with the stopped state.
        var last: RPCServer.State?
        let stream = tracker.states(every: 0.05)
        Task { try? await Task.sleep(nanoseconds: 200_000_000); await tracker.stop() }
        for await s in stream { last = s }
        XCTAssertEqual(last?.stopped, true)
        await proxy.stop()
        XCTAssertTrue(proxy.state.stopped)
    }

    func testProxyModeServesThroughTVMsProxy() throws {
        let probe = try RPCServer()
        let proxyPort = probe.port!
        probe.stop()
        let proxy = Process()
        proxy.executableURL = URL(fileURLWithPath: try Env.require("MOTE_PYTHON"))
        proxy.arguments = ["-m", "tvm.exec.rpc_proxy", "--host", "127.0.0.1", "--port", String(proxyPort),
                           "--port-end", String(proxyPort + 1), "--web-port", "0"]
        proxy.standardOutput = FileHandle.nullDevice
        proxy.standardError = FileHandle.nullDevice
        try proxy.run()
        defer { proxy.terminate(); proxy.waitUntilExit() }
        var config = RPCServer.Configuration()
        config.key = "swift-proxy"
        config.mode = .proxy("127.0.0.1:\(proxyPort)")
        let server = try RPCServer(config)
        defer { server.stop() }
        XCTAssertNil(server.port)
        let deadline = Date().addingTimeInterval(30)
        while !server.state.proxyWaiting && Date() < deadline && proxy.isRunning { Thread.sleep(forTimeInterval: 0.05) }
        XCTAssertTrue(server.state.proxyWaiting, "never waiting at TVM's proxy: \(server.state)")
        let (code, output) = try runClient([try Env.zoo(), "direct", "127.0.0.1", String(proxyPort), "swift-proxy"])
        XCTAssertEqual(code, 0, "rpc_client.py through the proxy: \(output)")
        let served = Date().addingTimeInterval(10)
        while server.state.served < 1 && Date() < served { Thread.sleep(forTimeInterval: 0.05) }
        XCTAssertEqual(server.state.served, 1)
        XCTAssertEqual(server.state.proxySessions, 1)
        server.stop()
        XCTAssertTrue(server.state.stopped)
        XCTAssertFalse(server.state.proxyWaiting)
    }

    func testTrackerModeRegistersServesAndLeaves() throws {
        let python = try Env.require("MOTE_PYTHON")
        let probe = try RPCServer()
        let trackerPort = probe.port!
        probe.stop()
        let tracker = Process()
        tracker.executableURL = URL(fileURLWithPath: python)
        tracker.arguments = ["-m", "tvm.exec.rpc_tracker", "--host", "127.0.0.1", "--port", String(trackerPort),
                             "--port-end", String(trackerPort + 1)]
        tracker.standardOutput = FileHandle.nullDevice
        tracker.standardError = FileHandle.nullDevice
        try tracker.run()
        defer { tracker.terminate(); tracker.waitUntilExit() }
        var config = RPCServer.Configuration()
        config.key = "swift-tracker"
        // maxSessions left to its default: one place in tracker mode, as TVM's server offers.
        config.mode = .tracker("127.0.0.1:\(trackerPort)")
        let server = try RPCServer(config)
        defer { server.stop() }
        XCTAssertNotNil(server.port)
        // The client (tracker mode of rpc_client.py): "listed", runs the mlp flow on the session
        // the tracker hands out ("ran ..."), then after a line on stdin waits until the tracker
        // lists the server no more ("gone").
        let client = Process()
        client.executableURL = URL(fileURLWithPath: python)
        client.arguments = [Self.client, try Env.zoo(), "tracker", "127.0.0.1", String(trackerPort), "swift-tracker"]
        var env = ProcessInfo.processInfo.environment
        env["PYTHONUNBUFFERED"] = "1"
        client.environment = env
        let out = Pipe(), input = Pipe()
        client.standardOutput = out
        client.standardError = out
        client.standardInput = input
        try client.run()
        var text = ""
        func waitFor(_ word: String, _ seconds: Double) {
            let deadline = Date().addingTimeInterval(seconds)
            while !text.contains(word) && Date() < deadline {
                let d = out.fileHandleForReading.availableData
                if d.isEmpty { break }
                text += String(decoding: d, as: UTF8.self)
            }
        }
        waitFor("ran ", 90)
        XCTAssertTrue(text.contains("listed"), text)
        XCTAssertTrue(text.contains("ran "), text)
        let s = server.state
        XCTAssertEqual(s.mode, "tracker")
        XCTAssertGreaterThanOrEqual(s.trackerRegistrations, 1, "\(s)")
        let served = Date().addingTimeInterval(10)
        while server.state.served < 1 && Date() < served { Thread.sleep(forTimeInterval: 0.05) }
        XCTAssertEqual(server.state.served, 1)
        // The place is offered again after the session: one offer at a time, never more.
        let offered = Date().addingTimeInterval(10)
        while server.state.trackerOffers.isEmpty && Date() < offered { Thread.sleep(forTimeInterval: 0.05) }
        XCTAssertEqual(server.state.trackerOffers.count, 1, "\(server.state)")
        server.stop()
        XCTAssertTrue(server.state.stopped)
        input.fileHandleForWriting.write(Data("stopped\n".utf8))
        try? input.fileHandleForWriting.close()
        let rest = out.fileHandleForReading.readDataToEndOfFile()
        text += String(decoding: rest, as: UTF8.self)
        client.waitUntilExit()
        XCTAssertEqual(client.terminationStatus, 0, text)
        XCTAssertTrue(text.contains("gone"), text)
    }
}
