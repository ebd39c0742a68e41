import Foundation
import MoteRPC
import XCTest
@testable import RPCAppCore

final class LogBufferTests: XCTestCase {
    func testKeepsTheLastLinesInOrder() {
        let b = LogBuffer(capacity: 5)
        for i in 1...12 { b.append(.info, "t", "line \(i)") }
        XCTAssertEqual(b.count, 5)
        XCTAssertEqual(b.dropped, 7)
        XCTAssertEqual(b.snapshot.map(\.message), (8...12).map { "line \($0)" })
        let ids = b.snapshot.map(\.id)
        XCTAssertEqual(ids, ids.sorted())
        XCTAssertEqual(Set(ids).count, 5)
        b.clear()
        XCTAssertEqual(b.count, 0)
        b.append(.warn, "t", "after")
        XCTAssertEqual(b.snapshot.map(\.message), ["after"])
    }

    func testManyThreadsAtOnce() {
        let b = LogBuffer(capacity: 100)
        DispatchQueue.concurrentPerform(iterations: 8) { t in
            for i in 0..<500 { b.append(.info, "t\(t)", "\(i)") }
        }
        XCTAssertEqual(b.count, 100)
        XCTAssertEqual(b.dropped, 8 * 500 - 100)
        XCTAssertEqual(Set(b.snapshot.map(\.id)).count, 100)
    }
}

final class LogLineTests: XCTestCase {
    func testProblemsAreErrorsAndWarnings() {
        let b = LogBuffer(capacity: 10)
        for level in [MoteLogging.Level.error, .warn, .info, .debug, .trace] { b.append(level, "t", "x") }
        XCTAssertEqual(b.snapshot.map(\.isProblem), [true, true, false, false, false])
    }
}
