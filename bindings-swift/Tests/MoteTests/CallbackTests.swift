import Foundation
import XCTest
@testable import Mote

/// Swift closures as functions models call: the `packed` model's `mote.zoo.scale_shift`.
final class CallbackTests: XCTestCase {
    func testScaleShiftFromSwiftAtOneAndTwoThreads() throws {
        final class Counter: @unchecked Sendable { let lock = NSLock(); var n = 0 }
        let calls = Counter()
        Functions.register(scaleShiftName) { args in
            calls.lock.lock(); calls.n += 1; calls.lock.unlock()
            return try scaleShift(args)
        }
        defer { Functions.register(scaleShiftName, scaleShift) }
        XCTAssertTrue(Functions.exists(scaleShiftName))
        let model = try Model(path: try Env.zoo("packed.so"))
        let ins = try inputs("packed.main.inputs.npz")
        let expected = try loadNpz(Env.zoo("packed.main.expected.npz"))[0].tensor
        for threads in [1, 2] {
            let out = try model.session(SessionOptions(threads: threads, poisonMemory: true)).run("main", ins)
            try assertClose(out[0], expected, Tolerance(rtol: 1e-5, atol: 1e-5), "packed at \(threads)")
        }
        XCTAssertGreaterThanOrEqual(calls.n, 2)
    }

    func testThrowingClosureSurfacesItsMessageAndSessionGoesOn() throws {
        struct Refused: Error, CustomStringConvertible { var description: String { "swift says no (42)" } }
        let model = try Model(path: try Env.zoo("packed.so"))
        let session = try model.session(SessionOptions(threads: 1))
        let ins = try inputs("packed.main.inputs.npz")
        Functions.register(scaleShiftName) { _ in throw Refused() }
        XCTAssertThrowsError(try session.run("main", ins)) { e in
            guard let m = e as? MoteError, m.code == 9 || m.code == 10 else { return XCTFail("\(e)") }
            XCTAssertTrue(m.message.contains("swift says no (42)"), m.message)
        }
        Functions.register(scaleShiftName, scaleShift)
        let out = try session.run("main", ins)
        try assertClose(out[0], try loadNpz(Env.zoo("packed.main.expected.npz"))[0].tensor, Tolerance(rtol: 1e-5, atol: 1e-5), "after the throw")
    }

    func testUnregister() throws {
        Functions.register("mote.swift.test.tmp") { _ in .int(1) }
        XCTAssertTrue(Functions.exists("mote.swift.test.tmp"))
        XCTAssertTrue(Functions.unregister("mote.swift.test.tmp"))
        XCTAssertFalse(Functions.exists("mote.swift.test.tmp"))
        XCTAssertFalse(Functions.unregister("mote.swift.test.tmp"))
    }
}
