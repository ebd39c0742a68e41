import Foundation
import XCTest
@testable import Mote

/// Budgets and cancellation (docs/untrusted-models.md §3-4) on a model whose `main()` loops
/// forever, written by Mote's own crafting code (`fuzzing::craft::endless_loop`, through
/// `testingWriteEndlessLoop`): only `maxInstructions` or an interrupt ends a call of it.
final class BudgetsAndCancellationTests: XCTestCase {
    private static let endlessPath = FileManager.default.temporaryDirectory
        .appendingPathComponent("mote-swift-endless-\(getpid()).tar").path

    override class func setUp() {
        super.setUp()
        do { try testingWriteEndlessLoop(to: endlessPath) } catch { XCTFail("writing the model: \(error)") }
    }

    override class func tearDown() {
        try? FileManager.default.removeItem(atPath: endlessPath)
        super.tearDown()
    }

    private func endless(maxInstructions: Int?) throws -> Session {
        let model = try Model(path: Self.endlessPath, options: LoadOptions(codeFree: true, readIntoMemory: true))
        return try model.session(SessionOptions(threads: 1, maxInstructions: maxInstructions))
    }

    /// The blocking `run` of `main` (an async test would pick the `async` overload).
    private func runBlocking(_ session: Session) throws -> [Tensor] {
        try session.run("main", [])
    }

    /// Time of `body`, in seconds.
    private func timed<T>(_ body: () async throws -> T) async rethrows -> (T, Double) {
        let start = Date()
        let r = try await body()
        return (r, Date().timeIntervalSince(start))
    }

    /// `r` is the instruction budget's error, of `budget` instructions when given.
    private func assertExhausted(_ r: Result<[Tensor], Error>, _ what: String, budget: Int? = nil,
                                 file: StaticString = #filePath, line: UInt = #line) {
        guard case .failure(MoteError.resourceExhausted(let m)) = r else {
            return XCTFail("\(what): \(r) is not .resourceExhausted", file: file, line: line)
        }
        XCTAssertTrue(m.contains("max_instructions"), "\(what): \(m)", file: file, line: line)
        if let budget {
            XCTAssertTrue(m.contains("budget of \(budget) instructions"), "\(what): \(m)", file: file, line: line)
        }
    }

    // (a) The instruction budget ends the loop, with the case and code the table gives.
    func testMaxInstructionsEndsTheLoopAsResourceExhausted() async throws {
        let session = try endless(maxInstructions: 10_000)
        XCTAssertThrowsError(try runBlocking(session)) { e in
            guard let m = e as? MoteError, case .resourceExhausted = m else { return XCTFail("\(e)") }
            XCTAssertEqual(m.code, 18)
            XCTAssertEqual(m.name, "resourceExhausted")
        }
        let r = await outcome { try await session.run("main", []) }
        assertExhausted(r, "async run", budget: 10_000)
        XCTAssertFalse(session.interruptHandle.isPending)
    }

    /// Calls queue on a busy session: an `async` run waiting behind an endless one is cancelled
    /// while it waits (`CancellationError`, at once, without running or stopping the other);
    /// another waits, then runs once the first is interrupted.
    func testRunsWaitingForABusySessionQueueAndCancel() async throws {
        let session = try endless(maxInstructions: nil)
        let first = Task { await outcome { try await session.run("main", []) } }
        try await Task.sleep(nanoseconds: 100_000_000)
        let waiting = Task { await outcome { try await session.run("main", []) } }
        try await Task.sleep(nanoseconds: 100_000_000)
        waiting.cancel()
        let (r, seconds) = await timed { await waiting.value }
        guard case .failure(let e) = r, e is CancellationError else { return XCTFail("queued run: \(r)") }
        XCTAssertLessThan(seconds, 1.0)
        let second = Task { await outcome { try await session.run("main", []) } }
        try await Task.sleep(nanoseconds: 100_000_000)
        session.interruptHandle.interrupt()
        guard case .failure(MoteError.cancelled) = await first.value else { return XCTFail("the first run was not interrupted") }
        // The second now runs (the endless loop), until interrupted in turn: interrupt every
        // 50 ms until it ends (an interrupt between the two calls may be dropped).
        let handle = session.interruptHandle
        let stopper = Task {
            while !Task.isCancelled {
                try? await Task.sleep(nanoseconds: 50_000_000)
                handle.interrupt()
            }
        }
        let r2 = await second.value
        stopper.cancel()
        guard case .failure(MoteError.cancelled) = r2 else { return XCTFail("the second run: \(r2)") }
    }

    func testInvalidBudgetsAndLoadOptionsThrow() throws {
        let model = try Model(path: Self.endlessPath, options: LoadOptions(codeFree: true))
        let bad: [(String, SessionOptions)] = [0, -1].flatMap { v in [
            ("memoryBudgetBytes", SessionOptions(memoryBudgetBytes: v)),
            ("maxRegisters", SessionOptions(maxRegisters: v)),
            ("stackBudgetBytes", SessionOptions(stackBudgetBytes: v)),
            ("maxInstructions", SessionOptions(maxInstructions: v)),
        ] }
        for (name, options) in bad {
            XCTAssertThrowsError(try model.session(options), name) { e in
                guard case MoteError.invalidArgument(let m) = e else { return XCTFail("\(name): \(e)") }
                XCTAssertTrue(m.contains(name), m)
            }
        }
        let badLoads: [(String, LoadOptions)] = [
            ("zero load budget", LoadOptions(codeFree: true, memoryBudgetBytes: 0)),
            ("negative load budget", LoadOptions(codeFree: true, memoryBudgetBytes: -5)),
            ("budget of a mapped load", LoadOptions(memoryBudgetBytes: 1 << 20)),
            ("readIntoMemory of a mapped load", LoadOptions(readIntoMemory: true)),
        ]
        for (what, options) in badLoads {
            XCTAssertThrowsError(try Model(path: Self.endlessPath, options: options), what) { e in
                guard case MoteError.invalidArgument = e else { return XCTFail("\(what): \(e)") }
            }
        }
        // Large budgets are taken as given.
        let s = try model.session(SessionOptions(memoryBudgetBytes: 1 << 40, maxRegisters: 1 << 30,
                                                 stackBudgetBytes: 1 << 20, maxInstructions: 1_000))
        assertExhausted(Result { try s.run("main", []) }, "large budgets", budget: 1_000)
    }

    /// The offload zoo's gzip `.tar` exports: a load budget below what one inflates to stops it.
    func testLoadMemoryBudgetAndReadIntoMemory() throws {
        let dir = try Env.require("MOTE_OFFLOAD_ZOO_DIR")
        let tars = try FileManager.default.contentsOfDirectory(atPath: dir).filter { $0.hasSuffix(".tar") }.sorted()
        var checked = 0
        for name in tars {
            let path = dir + "/" + name
            guard let mapped = try? Model(path: path, codeFree: true) else { continue }
            let read = try Model(path: path, options: LoadOptions(codeFree: true, readIntoMemory: true))
            XCTAssertTrue(read.isLoadedCodeFree, name)
            XCTAssertEqual(read.functionNames, mapped.functionNames, name)
            XCTAssertNoThrow(try Model(path: path, options: LoadOptions(codeFree: true, memoryBudgetBytes: 64 << 20)), name)
            for readIntoMemory in [false, true] {
                XCTAssertThrowsError(try Model(path: path, options: LoadOptions(
                    codeFree: true, readIntoMemory: readIntoMemory, memoryBudgetBytes: 1024)), name) { e in
                    guard case MoteError.resourceExhausted = e else { return XCTFail("\(name): \(e)") }
                }
            }
            checked += 1
        }
        XCTAssertGreaterThanOrEqual(checked, 3, "code-free .tar files in \(dir): \(tars)")
    }

    // (b) Cancelling the Task stops the running call promptly with CancellationError; the
    // same session then runs to its budget, not cancelled.
    func testCancellingTheTaskStopsTheRunAndTheSessionGoesOn() async throws {
        let session = try endless(maxInstructions: 1 << 26)
        let (fullRun, full) = await timed { await outcome { try await session.run("main", []) } }
        assertExhausted(fullRun, "an uncancelled run", budget: 1 << 26)

        let task = Task { try await session.run("main", []) }
        try await Task.sleep(nanoseconds: 50_000_000)
        let (r, cancelledAfter) = await timed { () -> Result<[Tensor], Error> in
            task.cancel()
            return await task.result
        }
        guard case .failure(let e) = r, e is CancellationError else { return XCTFail("cancelled run: \(r)") }
        XCTAssertLessThan(cancelledAfter, min(1.0, full / 2), "stopped after \(cancelledAfter) s; a full run takes \(full) s")
        XCTAssertFalse(session.interruptHandle.isPending)

        let (again, t) = await timed { await outcome { try await session.run("main", []) } }
        assertExhausted(again, "the same session after the cancellation", budget: 1 << 26)
        XCTAssertGreaterThan(t, full / 4, "ran to its budget")
    }

    /// The explicit handle: MoteError.cancelled, once per interrupt, pending when idle.
    func testInterruptHandleGivesMoteErrorCancelled() async throws {
        let session = try endless(maxInstructions: 1 << 27)
        let handle = session.interruptHandle
        DispatchQueue.global().asyncAfter(deadline: .now() + 0.05) { handle.interrupt() }
        let r = await outcome { try await session.run("main", []) }
        guard case .failure(let e) = r, let m = e as? MoteError, case .cancelled = m else { return XCTFail("interrupted: \(r)") }
        XCTAssertEqual(m.code, 19)
        handle.interrupt()
        XCTAssertTrue(handle.isPending)
        XCTAssertThrowsError(try runBlocking(session)) { e in
            guard case MoteError.cancelled = e else { return XCTFail("next call: \(e)") }
        }
        XCTAssertFalse(handle.isPending)
        let small = try endless(maxInstructions: 1_000)
        small.interruptHandle.interrupt()
        _ = try? runBlocking(small)
        assertExhausted(Result { try runBlocking(small) }, "one interrupt cancels one call")
    }

    // (c) A task cancelled before the run starts throws without running: with this budget a
    // run that started would end .resourceExhausted, and would leave nothing pending.
    func testATaskCancelledBeforeTheRunThrowsWithoutRunning() async throws {
        let session = try endless(maxInstructions: 1_000)
        let task = Task { () async throws -> [Tensor] in
            while !Task.isCancelled { await Task.yield() }
            return try await session.run("main", [])
        }
        task.cancel()
        let r = await task.result
        guard case .failure(let e) = r, e is CancellationError else { return XCTFail("pre-cancelled: \(r)") }
        XCTAssertFalse(session.interruptHandle.isPending, "no interrupt left for the next call")
        assertExhausted(await outcome { try await session.run("main", []) }, "the next call", budget: 1_000)
    }

    // (d) Many tasks, random cancellation: every run ends with its result (outputs, or the
    // budget) or, only for a cancelled task, CancellationError; none hangs; and afterwards
    // every session runs normally (no cancellation leaked into a later call).
    func testManyTasksWithRandomCancellation() async throws {
        let mlp = try Model(path: try Env.zoo("mlp.so"))
        let ins = try inputs("mlp.forward.inputs.npz")
        let loop = try Model(path: Self.endlessPath, options: LoadOptions(codeFree: true))
        let sessions: [(Session, String, [Tensor])] = try (0..<8).map { i in
            i % 2 == 0
                ? (try loop.session(SessionOptions(threads: 1, maxInstructions: 1 << 19)), "main", [])
                : (try mlp.session(SessionOptions(threads: 1)), "forward", ins)
        }
        final class Tally: @unchecked Sendable {
            let lock = NSLock()
            var results = 0, cancellations = 0, failures: [String] = []
            func add(_ f: () -> Void) { lock.lock(); f(); lock.unlock() }
        }
        let tally = Tally()
        let deadline = Date().addingTimeInterval(120)
        for round in 0..<6 {
            var tasks: [(Task<Void, Never>, Bool)] = []
            for (i, (session, function, args)) in sessions.enumerated() {
                let task = Task {
                    for run in 0..<4 {
                        let r = await outcome { try await session.run(function, args) }
                        let what = "round \(round) session \(i) run \(run)"
                        switch r {
                        case .success(let out): tally.add { if out.count == 1 { tally.results += 1 } else { tally.failures.append("\(what): \(out.count) outputs") } }
                        case .failure(MoteError.resourceExhausted) where function == "main": tally.add { tally.results += 1 }
                        case .failure(let e) where e is CancellationError:
                            tally.add { if Task.isCancelled { tally.cancellations += 1 } else { tally.failures.append("\(what): cancelled, never asked") } }
                        case .failure(let e): tally.add { tally.failures.append("\(what): \(e)") }
                        }
                    }
                }
                let cancel = Bool.random()
                tasks.append((task, cancel))
                if cancel {
                    let delay = UInt64.random(in: 0...20_000_000)
                    Task { try? await Task.sleep(nanoseconds: delay); task.cancel() }
                }
            }
            for (task, _) in tasks { await task.value }
            XCTAssertLessThan(Date(), deadline, "the stress rounds took too long")
            // Every session runs normally after the round.
            for (i, (session, function, args)) in sessions.enumerated() {
                let r = await outcome { try await session.run(function, args) }
                switch r {
                case .success: break
                case .failure(MoteError.resourceExhausted) where function == "main": break
                case .failure(let e): XCTFail("round \(round) session \(i) after the round: \(e)")
                }
                XCTAssertFalse(session.interruptHandle.isPending, "round \(round) session \(i)")
            }
        }
        XCTAssertEqual(tally.failures, [])
        XCTAssertEqual(tally.results + tally.cancellations, 6 * 8 * 4)
        XCTAssertGreaterThan(tally.results, 0)
        XCTAssertGreaterThan(tally.cancellations, 0)
        print("cancellation stress: \(tally.results) results, \(tally.cancellations) cancellations")
    }
}

/// The outcome of an async throwing call.
func outcome<T>(_ body: () async throws -> T) async -> Result<T, Error> {
    do { return .success(try await body()) } catch { return .failure(error) }
}
