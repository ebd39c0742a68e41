import Foundation
import XCTest
#if canImport(Glibc)
import Glibc
#elseif canImport(Darwin)
import Darwin
#endif

/// The zoos and the venv python: tests fail loudly without them (scripts/test-ios-app.sh sets
/// them); nothing is skipped.
enum Env {
    static func require(_ name: String) throws -> String {
        guard let v = ProcessInfo.processInfo.environment[name], !v.isEmpty else {
            XCTFail("\(name) is not set: set it (scripts/test-ios-app.sh does) — nothing is skipped")
            throw EnvError.unset(name)
        }
        return v
    }

    enum EnvError: Error { case unset(String) }

    static func zoo() throws -> String { try require("MOTE_ZOO_DIR") }
    static func offloadZoo() throws -> String { try require("MOTE_OFFLOAD_ZOO_DIR") }
    static func python() throws -> String { try require("MOTE_PYTHON") }
    /// Names of the zoo models linked into this test executable (scripts/test-ios-app.sh).
    static func linkedModels() throws -> [String] {
        try require("MOTE_SYSLIB_MODELS").split(separator: ",").map(String.init)
    }

    /// The repository's root (this file is ios-app/Tests/RPCAppCoreTests/Support.swift).
    static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../../..").standardized.path
}

/// Run the venv's python with `args`; its exit code and combined output.
func runPython(_ args: [String]) throws -> (Int32, String) {
    let p = Process()
    p.executableURL = URL(fileURLWithPath: try Env.python())
    p.arguments = args
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

/// Poll `condition` every 20 ms until it holds or `seconds` pass; whether it held.
@discardableResult
func waitUntil(_ seconds: Double, _ condition: () -> Bool) -> Bool {
    let deadline = Date().addingTimeInterval(seconds)
    while Date() < deadline {
        if condition() { return true }
        Thread.sleep(forTimeInterval: 0.02)
    }
    return condition()
}

/// Whether something accepts TCP connections on 127.0.0.1:`port`.
func accepts(port: UInt16) -> Bool {
    #if canImport(Glibc)
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    #else
    let fd = socket(AF_INET, SOCK_STREAM, 0)
    #endif
    guard fd >= 0 else { return false }
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = port.bigEndian
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    let rc = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) {
            connect(fd, $0, socklen_t(MemoryLayout<sockaddr_in>.size))
        }
    }
    return rc == 0
}

/// A port nobody listens on now (bound and released).
func freePort() -> UInt16 {
    #if canImport(Glibc)
    let fd = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
    #else
    let fd = socket(AF_INET, SOCK_STREAM, 0)
    #endif
    defer { close(fd) }
    var addr = sockaddr_in()
    addr.sin_family = sa_family_t(AF_INET)
    addr.sin_port = 0
    addr.sin_addr.s_addr = inet_addr("127.0.0.1")
    var len = socklen_t(MemoryLayout<sockaddr_in>.size)
    _ = withUnsafePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { bind(fd, $0, len) }
    }
    _ = withUnsafeMutablePointer(to: &addr) {
        $0.withMemoryRebound(to: sockaddr.self, capacity: 1) { getsockname(fd, $0, &len) }
    }
    return UInt16(bigEndian: addr.sin_port)
}
