import Foundation
import XCTest
@testable import Mote

/// Every case of the zoo's manifest, at 1 and 2 threads, against TVM's outputs
/// (`<model>.<case>.expected.npz`, written by TVM 0.27 when the zoo was built).
final class ZooTests: XCTestCase {
    override class func setUp() {
        Functions.register(scaleShiftName, scaleShift)
    }

    func testEveryCaseAtOneAndTwoThreads() throws {
        let cases = try zooCases()
        XCTAssertGreaterThanOrEqual(cases.count, 20, "the manifest lists \(cases.count) cases")
        var checked = 0
        for c in cases {
            let model = try Model(path: Env.zoo(c.file))
            XCTAssertEqual(model.isKernelLibrary, c.kind == "kernels", c.model)
            for threads in [1, 2] {
                let what = "\(c.model).\(c.name) at \(threads) thread(s)"
                let session = try model.session(SessionOptions(threads: threads, poisonMemory: true))
                XCTAssertEqual(try session.threads, threads)
                try run(c, session, what)
                checked += 1
            }
        }
        print("zoo: \(checked) case runs checked (\(cases.count) cases × 2 thread counts)")
        XCTAssertEqual(checked, 2 * cases.count)
    }

    private func run(_ c: ZooCase, _ session: Session, _ what: String) throws {
        let ins = try inputs(c.inputs)
        let expected = try c.expected.map { try loadNpz(Env.zoo($0)).map { $0.tensor } }
        switch c.mode {
        case "call":
            // Twice per session: the second run reuses (poisoned) buffers.
            for round in 1...2 {
                if let message = c.expectError {
                    XCTAssertThrowsError(try session.run(c.function, ins), what) { e in
                        guard case MoteError.kernel(let m) = e else { return XCTFail("\(what): \(e) is not .kernel") }
                        XCTAssertTrue(m.contains(message), "\(what): `\(m)` lacks TVM's `\(message)`")
                    }
                    continue
                }
                let out = try session.run(c.function, ins)
                XCTAssertEqual(out.count, expected?.count, what)
                for (i, (a, e)) in zip(out, expected ?? []).enumerated() {
                    try assertClose(a, e, c.tolerance!, "\(what) round \(round) output \(i)")
                }
            }
        case "stateful":
            try session.setInput(c.function, ins)
            try session.invokeStateful(c.function)
            let out = try session.output(c.function)
            XCTAssertEqual(out.count, expected?.count, what)
            for (i, (a, e)) in zip(out, expected ?? []).enumerated() {
                try assertClose(a, e, c.tolerance!, "\(what) stateful output \(i)")
            }
        case "kernel":
            var args: [Argument] = []
            var tensors: [Int: Tensor] = [:]
            for (i, t) in ins.enumerated() {
                if c.scalars.contains(i) {
                    let v = try values(t)[0]
                    args.append(t.dtype == .float32 || t.dtype == .float64 ? .float(v) : .int(Int64(v)))
                } else {
                    let copy = try t.copy()
                    if c.outputs.contains(i) { try poison(copy) }
                    tensors[i] = copy
                    args.append(.tensor(copy))
                }
            }
            if let message = c.expectError {
                XCTAssertThrowsError(try session.callKernel(c.function, args), what) { e in
                    guard case MoteError.kernel(let m) = e else { return XCTFail("\(what): \(e) is not .kernel") }
                    XCTAssertTrue(m.contains(message), "\(what): `\(m)` lacks TVM's `\(message)`")
                }
                return
            }
            try session.callKernel(c.function, args)
            XCTAssertEqual(c.outputs.count, expected?.count, what)
            for (k, (i, e)) in zip(c.outputs, expected ?? []).enumerated() {
                try assertClose(tensors[i]!, e, c.tolerance!, "\(what) output \(k)")
            }
        default:
            XCTFail("\(what): unknown mode \(c.mode)")
        }
    }
}
