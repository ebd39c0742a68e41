import Foundation
import XCTest
@testable import Mote

/// Construction, zero copy both ways, options, inputs by name, profiles, logs.
final class TensorTests: XCTestCase {
    func testConstructionRoundTrips() throws {
        let v: [Float] = [1, 2, 3, 4, 5, 6]
        let a = try Tensor(v, shape: [2, 3])
        XCTAssertEqual(a.shape, [2, 3]); XCTAssertEqual(a.dtype, .float32); XCTAssertEqual(a.byteCount, 24)
        XCTAssertEqual(try a.toArray(of: Float.self), v)
        let d = try Tensor(data: try a.data(), shape: [6], dtype: .float32)
        XCTAssertEqual(try d.toArray(of: Float.self), v)
        let p = try v.withUnsafeBufferPointer { try Tensor($0, shape: [3, 2]) }
        XCTAssertEqual(try p.toArray(of: Float.self), v)
        XCTAssertEqual(try Tensor([Int8](arrayLiteral: -1, 2)).toArray(of: Int8.self), [-1, 2])
        XCTAssertEqual(try Tensor([true, false]).toArray(of: Bool.self), [true, false])
        XCTAssertEqual(try Tensor([Int64](arrayLiteral: 1 << 40)).toArray(of: Int64.self), [1 << 40])
        #if !((os(macOS) || targetEnvironment(macCatalyst)) && arch(x86_64))
        let h: [Float16] = [1.5, -2, 65504]
        let t16 = try Tensor(h, shape: [3])
        XCTAssertEqual(t16.dtype, .float16)
        XCTAssertEqual(try t16.toArray(of: Float16.self), h)
        // IEEE binary16 bits, as Mote's float16 holds them: 1.5 is 0x3e00.
        XCTAssertEqual(try t16.withUnsafeBytes { $0.load(as: UInt16.self) }, 0x3e00)
        #endif
    }

    /// Shapes whose byte count no Int holds throw instead of trapping.
    func testHugeShapesThrow() throws {
        for shape in [[Int.max, 2], [1 << 40, 1 << 40], [Int.max / 2 + 1, 2]] {
            XCTAssertThrowsError(try Tensor([Float](), shape: shape), "\(shape)") {
                XCTAssertEqual(($0 as? MoteError)?.code, 11, "\($0)")
            }
        }
        XCTAssertThrowsError(try Tensor(data: Data(), shape: [Int.max, Int.max], dtype: .int8)) {
            XCTAssertEqual(($0 as? MoteError)?.code, 11, "\($0)")
        }
    }

    func testZeroCopyInPlaceInputAndOutput() throws {
        let model = try Model(path: try Env.zoo("mlp.so"))
        let session = try model.session(SessionOptions(threads: 1))
        var ins = try inputs("mlp.forward.inputs.npz")
        let expected = try loadNpz(Env.zoo("mlp.forward.expected.npz"))[0].tensor
        // Fill a Mote-allocated input in place: no copy of the input.
        let x = try Tensor.zeros(shape: ins[0].shape, dtype: .float32)
        try ins[0].withUnsafeBytes { src in try x.withUnsafeMutableBytes { $0.copyMemory(from: src) } }
        ins[0] = x
        let out1 = try session.run("forward", ins)
        try assertClose(out1[0], expected, Tolerance(rtol: 1e-5, atol: 1e-5), "in-place input")
        // Change the input in place: the next output changes.
        try x.withUnsafeMutableBytes { _ = $0.initializeMemory(as: Float.self, repeating: 0) }
        let out2 = try session.run("forward", ins)
        XCTAssertNotEqual(try out2[0].toArray(of: Float.self), try out1[0].toArray(of: Float.self))
        // Outputs are read in place: the pointer is the tensor's memory, 64-byte aligned.
        try out1[0].withUnsafeBytes { XCTAssertEqual(Int(bitPattern: $0.baseAddress) % 64, 0) }
    }

    /// `Tensor(borrowing:...)`: a kernel writes its output straight into the app's own
    /// memory (the gemm kernel into a NaN-filled buffer), a session reads a borrowed input, the
    /// deallocator runs once when Mote lets go, and a misaligned or short buffer throws with
    /// the memory left to the app (its deallocator never called).
    func testBorrowedMemoryIsUsedInPlace() throws {
        final class Count: @unchecked Sendable { let lock = NSLock(); var n = 0 }
        let freed = Count()
        let release: @Sendable (UnsafeMutableRawBufferPointer) -> Void = { b in
            freed.lock.lock(); freed.n += 1; freed.lock.unlock()
            b.deallocate()
        }
        let model = try Model(path: try Env.zoo("gemm.so"))
        let session = try model.session(SessionOptions(threads: 1))
        let ins = try inputs("gemm.gemm.inputs.npz")
        let expected = try loadNpz(Env.zoo("gemm.gemm.expected.npz"))[0].tensor
        let out = UnsafeMutableRawBufferPointer.allocate(byteCount: 64 * 48 * 4, alignment: 64)
        out.initializeMemory(as: Float.self, repeating: .nan)
        var c: Tensor? = try Tensor(borrowing: out, shape: [64, 48], dtype: .float32, deallocator: release)
        try session.callKernel("gemm", [.tensor(ins[0]), .tensor(ins[1]), .tensor(c!)])
        // The app's own buffer holds the result (read without Mote).
        let written = Array(out.bindMemory(to: Float.self))
        try assertClose(try Tensor(written, shape: [64, 48]), expected, Tolerance(rtol: 1e-5, atol: 1e-5), "borrowed output")
        XCTAssertEqual(freed.n, 0)
        c = nil
        XCTAssertEqual(freed.n, 1, "released once Mote lets go")

        let mlp = try Model(path: try Env.zoo("mlp.so")).session(SessionOptions(threads: 1))
        let mins = try inputs("mlp.forward.inputs.npz")
        let xb = UnsafeMutableRawBufferPointer.allocate(byteCount: mins[0].byteCount, alignment: 64)
        try mins[0].withUnsafeBytes { xb.copyMemory(from: $0) }
        let x = try Tensor(borrowing: xb, shape: mins[0].shape, dtype: .float32, deallocator: release)
        let y = try mlp.run("forward", [x] + mins.dropFirst())
        try assertClose(y[0], try loadNpz(Env.zoo("mlp.forward.expected.npz"))[0].tensor, Tolerance(rtol: 1e-5, atol: 1e-5), "borrowed input")

        let raw = UnsafeMutableRawBufferPointer.allocate(byteCount: 256, alignment: 64)
        defer { raw.deallocate() }
        let misaligned = UnsafeMutableRawBufferPointer(rebasing: raw[4..<132])
        XCTAssertThrowsError(try Tensor(borrowing: misaligned, shape: [32], dtype: .float32, deallocator: release)) {
            XCTAssertEqual(($0 as? MoteError)?.code, 11, "\($0)")
        }
        XCTAssertThrowsError(try Tensor(borrowing: raw, shape: [65], dtype: .float32, deallocator: release)) {
            XCTAssertEqual(($0 as? MoteError)?.code, 8, "\($0)")
        }
        XCTAssertEqual(freed.n, 1, "refused buffers stay the app's")
    }

    func testSharedTensorRefusesInPlaceWrites() throws {
        let model = try Model(path: try Env.zoo("multi.so"))
        let session = try model.session()
        let ins = try inputs("multi.embed_stateful.inputs.npz")
        try session.setInput("embed", ins)   // the session now holds the inputs
        XCTAssertThrowsError(try ins[0].withUnsafeMutableBytes { _ in }) { e in
            XCTAssertEqual((e as? MoteError)?.code, 11, "\(e)")
        }
        try ins[0].copy().withUnsafeMutableBytes { _ in }   // a copy is writable
        // A writer excludes readers (busy, no waiting).
        let t = try Tensor([Float](repeating: 1, count: 4))
        try t.withUnsafeMutableBytes { _ in
            XCTAssertThrowsError(try t.withUnsafeBytes { _ in }) { e in XCTAssertEqual((e as? MoteError)?.code, 17) }
        }
    }

    /// What a model says of its inputs, as `mote inspect` prints it: names, dtypes and shapes
    /// with symbolic dimensions by name; a kernel's scalar parameter has neither dtype nor shape.
    func testParametersDescribeInputs() throws {
        let dyn = try Model(path: try Env.zoo("mlp_dyn.so"))
        let p = try dyn.parameters(of: "forward")
        XCTAssertEqual(p.map(\.description), [
            "x: float32[n, 16]", "fc1.weight: float32[32, 16]", "fc1.bias: float32[32]",
            "fc2.weight: float32[8, 32]", "fc2.bias: float32[8]",
        ])
        XCTAssertEqual(p[0].shape, [.symbolic("n"), .fixed(16)])
        XCTAssertEqual(p[0].dtype, .float32)
        XCTAssertEqual(try dyn.parameterNames(of: "forward"), p.map(\.name))
        let kernels = try Model(path: try Env.zoo("kernels.so"))
        let shift = try kernels.parameters(of: "shift")
        XCTAssertEqual(shift.map(\.name), ["X", "n", "Y"])
        XCTAssertEqual(shift[0], Parameter(name: "X", dtype: .int32, shape: [.fixed(16)]))
        XCTAssertNil(shift[1].dtype); XCTAssertNil(shift[1].shape)
        XCTAssertThrowsError(try dyn.parameters(of: "nope")) { XCTAssertEqual(($0 as? MoteError)?.code, 6, "\($0)") }
    }

    /// What a model's functions return, read from their instructions, as `mote inspect` prints
    /// it: the symbolic batch carried through, a tuple as two outputs in `run`'s order, and
    /// nothing for a kernel (kernels write into their arguments).
    func testOutputsDescribeWhatRunReturns() throws {
        let dyn = try Model(path: try Env.zoo("mlp_dyn.so"))
        XCTAssertEqual(try dyn.outputs(of: "forward")?.map(\.description), ["output: float32[n, 8]"])
        let multi = try Model(path: try Env.zoo("multi.so"))
        let embed = try XCTUnwrap(try multi.outputs(of: "embed"))
        XCTAssertEqual(embed.map(\.description), ["output[0]: float32[2, 8]", "output[1]: float32[2, 8]"])
        let a = try Tensor([Float](repeating: 1, count: 16), shape: [2, 8])
        let w = try Tensor([Float](repeating: 0.5, count: 64), shape: [8, 8])
        let b = try Tensor([Float](repeating: 0, count: 8), shape: [8])
        let out = try multi.session().run("embed", [a, a, w, b])
        XCTAssertEqual(out.map { $0.shape }, embed.map { $0.shape!.map { d -> Int in
            if case .fixed(let n) = d { return n }
            return -1
        } })
        XCTAssertEqual(out.map { $0.dtype }, embed.map { $0.dtype! })
        let kernels = try Model(path: try Env.zoo("kernels.so"))
        XCTAssertNil(try kernels.outputs(of: "shift"))
        XCTAssertThrowsError(try dyn.outputs(of: "nope")) { XCTAssertEqual(($0 as? MoteError)?.code, 6, "\($0)") }
    }

    func testInputsByNameProfilesAndOptions() throws {
        let model = try Model(path: try Env.zoo("mlp.so"))
        let names = try model.parameterNames(of: "forward")
        XCTAssertEqual(names.count, 5)
        XCTAssertTrue(model.functionNames.contains("forward"))
        let ins = try inputs("mlp.forward.inputs.npz")
        let session = try model.session(SessionOptions(threads: 2, backends: ["cpu"], profiling: true))
        XCTAssertEqual(try session.threads, 2)
        let byName = try session.run("forward", inputs: Dictionary(uniqueKeysWithValues: zip(names, ins)))
        let byPosition = try session.run("forward", ins)
        XCTAssertEqual(try byName[0].toArray(of: Float.self), try byPosition[0].toArray(of: Float.self))
        let profile = try session.profile()
        XCTAssertTrue(profile.contains { $0.kind == "kernel" && $0.calls >= 2 && $0.seconds > 0 }, "\(profile)")
        XCTAssertEqual(try session.profile(), [], "profile() resets")
        XCTAssertTrue(moteBackends().contains("cpu"))
    }

    func testLogsReachTheSwiftHandler() throws {
        final class Records: @unchecked Sendable { let lock = NSLock(); var all: [(MoteLogging.Level, String, String)] = [] }
        let records = Records()
        MoteLogging.setHandler(level: .debug) { level, target, message in
            records.lock.lock(); records.all.append((level, target, message)); records.lock.unlock()
        }
        defer { MoteLogging.setHandler(level: .off, nil) }
        MoteLogging.log(.info, "hello from swift")
        MoteLogging.log(.trace, "too verbose")
        _ = try Model(path: try Env.zoo("mlp.so")).session().run("forward", try inputs("mlp.forward.inputs.npz"))
        records.lock.lock(); defer { records.lock.unlock() }
        XCTAssertTrue(records.all.contains { $0.0 == .info && $0.2 == "hello from swift" }, "\(records.all)")
        XCTAssertFalse(records.all.contains { $0.2 == "too verbose" })
        XCTAssertTrue(records.all.contains { $0.1.hasPrefix("mote") && $0.2 != "hello from swift" },
                      "Mote's own records arrive too: \(records.all.map { $0.1 })")
    }
}
