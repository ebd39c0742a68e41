import Foundation
import XCTest
@testable import Mote

/// One Model shared by several threads and tasks, one Session each; one Session shared by
/// several queues its calls; a Session re-entered from its own callback refuses.
final class ThreadsTests: XCTestCase {
    func testOneModelManyThreads() throws {
        let model = try Model(path: try Env.zoo("mlp.so"))
        let ins = try inputs("mlp.forward.inputs.npz")
        let expected = try loadNpz(Env.zoo("mlp.forward.expected.npz"))[0].tensor
        let lock = NSLock()
        var failures: [String] = [], runs = 0
        DispatchQueue.concurrentPerform(iterations: 4) { worker in
            do {
                let session = try model.session(SessionOptions(threads: 1 + worker % 2, poisonMemory: true))
                for i in 0..<25 {
                    let out = try session.run("forward", ins)
                    let a = try values(out[0]), e = try values(expected)
                    if a.count != e.count || zip(a, e).contains(where: { !(abs($0 - $1) <= 1e-5 + 1e-5 * abs($1)) }) {
                        lock.lock(); failures.append("worker \(worker) run \(i)"); lock.unlock()
                    }
                    lock.lock(); runs += 1; lock.unlock()
                }
            } catch {
                lock.lock(); failures.append("worker \(worker): \(error)"); lock.unlock()
            }
        }
        XCTAssertEqual(failures, [])
        XCTAssertEqual(runs, 100)
    }

    func testAsyncRunsFromTasks() async throws {
        let model = try Model(path: try Env.zoo("cnn.so"))
        let ins = try inputs("cnn.forward.inputs.npz")
        let expected = try loadNpz(Env.zoo("cnn.forward.expected.npz"))[0].tensor
        let outputs = try await withThrowingTaskGroup(of: [Tensor].self) { group in
            for _ in 0..<3 {
                group.addTask {
                    let session = try model.session(SessionOptions(threads: 1))
                    return try await session.run("forward", ins)
                }
            }
            var all: [[Tensor]] = []
            for try await o in group { all.append(o) }
            return all
        }
        XCTAssertEqual(outputs.count, 3)
        for o in outputs { try assertClose(o[0], expected, Tolerance(rtol: 1e-5, atol: 1e-5), "async cnn") }
    }

    /// 100 calls from 8 threads and 20 tasks on one session: none is refused as busy (they
    /// queue), every output right.
    func testConcurrentCallsOnOneSessionQueue() async throws {
        let model = try Model(path: try Env.zoo("mlp.so"))
        let session = try model.session(SessionOptions(threads: 2, poisonMemory: true))
        let ins = try inputs("mlp.forward.inputs.npz")
        let expected = try values(try loadNpz(Env.zoo("mlp.forward.expected.npz"))[0].tensor)
        let check: @Sendable ([Tensor]) throws -> Bool = { out in
            let a = try values(out[0])
            return a.count == expected.count && !zip(a, expected).contains(where: { !(abs($0 - $1) <= 1e-5 + 1e-5 * abs($1)) })
        }
        final class Tally: @unchecked Sendable { let lock = NSLock(); var good = 0; var bad: [String] = [] }
        let tally = Tally()
        DispatchQueue.concurrentPerform(iterations: 8) { worker in
            for _ in 0..<10 {
                do {
                    let ok = try check(try session.run("forward", ins))
                    tally.lock.lock(); if ok { tally.good += 1 } else { tally.bad.append("thread \(worker): wrong output") }; tally.lock.unlock()
                } catch {
                    tally.lock.lock(); tally.bad.append("thread \(worker): \(error)"); tally.lock.unlock()
                }
            }
        }
        let asyncGood = try await withThrowingTaskGroup(of: Bool.self) { group in
            for _ in 0..<20 { group.addTask { try check(try await session.run("forward", ins)) } }
            var n = 0
            for try await ok in group where ok { n += 1 }
            return n
        }
        XCTAssertEqual(tally.bad, [])
        XCTAssertEqual(tally.good + asyncGood, 100)
    }

    func testSessionReenteredFromItsCallbackIsBusy() throws {
        let model = try Model(path: try Env.zoo("packed.so"))
        let session = try model.session(SessionOptions(threads: 1))
        let ins = try inputs("packed.main.inputs.npz")
        final class Box: @unchecked Sendable { var error: Error?; var session: Session? }
        let box = Box()
        box.session = session
        Functions.register(scaleShiftName) { args in
            do { _ = try box.session?.run("main", ins) } catch { box.error = error }
            return try scaleShift(args)
        }
        defer { Functions.register(scaleShiftName, scaleShift) }
        let out = try session.run("main", ins)
        guard case MoteError.busy(let m)? = box.error as? MoteError else {
            return XCTFail("re-entry gave \(String(describing: box.error))")
        }
        XCTAssertTrue(m.contains("one session per thread"), m)
        try assertClose(out[0], try loadNpz(Env.zoo("packed.main.expected.npz"))[0].tensor, Tolerance(rtol: 1e-5, atol: 1e-5), "packed after re-entry")
    }
}
