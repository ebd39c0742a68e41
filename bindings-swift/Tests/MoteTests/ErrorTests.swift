import Foundation
import XCTest
@testable import Mote

/// Every error path gives its MoteError case, and the cases match Mote's codes one to one.
final class ErrorTests: XCTestCase {
    func expect(_ code: Int, _ what: String, contains text: String? = nil, _ body: () throws -> Void) {
        XCTAssertThrowsError(try body(), what) { e in
            guard let m = e as? MoteError else { return XCTFail("\(what): \(e) is not a MoteError") }
            XCTAssertEqual(m.code, code, "\(what): got \(m)")
            if let text { XCTAssertTrue(m.message.contains(text), "\(what): `\(m.message)` lacks `\(text)`") }
        }
    }

    /// What apps show and log: `localizedDescription` is Mote's message (not "error 0"), and as
    /// an `NSError` the domain is `org.mote` with Mote's code.
    func testErrorsDescribeThemselvesToFoundation() throws {
        do {
            _ = try Model(path: "/no/such/model.so")
            XCTFail("loaded a missing file")
        } catch {
            XCTAssertTrue(error.localizedDescription.hasPrefix("io: "), error.localizedDescription)
            XCTAssertTrue(error.localizedDescription.contains("/no/such/model.so"), error.localizedDescription)
            let ns = error as NSError
            XCTAssertEqual(ns.domain, "org.mote")
            XCTAssertEqual(ns.code, 1)
            XCTAssertEqual(ns.userInfo["name"] as? String, "io")
            XCTAssertEqual(ns.localizedDescription, error.localizedDescription)
        }
        XCTAssertEqual(MoteError.device("no GPU").localizedDescription, "device: no GPU")
        XCTAssertEqual((MoteError.cancelled("x") as NSError).code, 19)
    }

    func testMissingAndGarbageFiles() throws {
        expect(1, "missing file", contains: "/no/such/model.so") { _ = try Model(path: "/no/such/model.so") }
        let garbage = FileManager.default.temporaryDirectory.appendingPathComponent("mote-swift-garbage-\(getpid()).so")
        try Data("this is not an ELF file".utf8).write(to: garbage)
        defer { try? FileManager.default.removeItem(at: garbage) }
        expect(2, "garbage file") { _ = try Model(path: garbage.path) }
        expect(2, "a JSON file") { _ = try Model(path: try Env.zoo("manifest.json")) }
    }

    func testCallErrors() throws {
        let model = try Model(path: try Env.zoo("mlp.so"))
        let session = try model.session(SessionOptions(threads: 1))
        let ins = try inputs("mlp.forward.inputs.npz")
        expect(6, "unknown function", contains: "forward") { _ = try session.run("nope", ins) }
        expect(7, "arity", contains: "5") { _ = try session.run("forward", Array(ins.prefix(2))) }
        expect(8, "shape") {
            _ = try session.run("forward", [try Tensor([Float](repeating: 0, count: 48), shape: [3, 16])] + ins.dropFirst())
        }
        expect(8, "dtype") { _ = try session.run("forward", [try Tensor([Int32](repeating: 0, count: 32), shape: [2, 16])] + ins.dropFirst()) }
        expect(11, "inputs by name: unknown name") { _ = try session.run("forward", inputs: ["nope": ins[0]]) }
        // The session goes on after every error.
        XCTAssertEqual(try session.run("forward", ins).count, 1)
    }

    func testKernelRaisedErrorKeepsTVMsMessage() throws {
        let model = try Model(path: try Env.zoo("raise.so"))
        let session = try model.session()
        expect(9, "kernel error", contains: "mote-zoo: first element must be non-negative") {
            _ = try session.run("main", try inputs("raise.negative.inputs.npz"))
        }
        let ok = try session.run("main", try inputs("raise.ok.inputs.npz"))
        try assertClose(ok[0], try loadNpz(Env.zoo("raise.ok.expected.npz"))[0].tensor, Tolerance(rtol: 1e-5, atol: 1e-5), "raise ok after error")
    }

    func testKernelLibraryErrors() throws {
        let session = try Model(path: try Env.zoo("gemm.so")).session()
        let a = try Tensor.zeros(shape: [64, 32], dtype: .float32), b = try Tensor.zeros(shape: [32, 48], dtype: .float32)
        expect(9, "kernel arity", contains: "Expected 3 arguments") { try session.callKernel("gemm", [.tensor(a), .tensor(b)]) }
        expect(11, "run on a kernel library") { _ = try session.run("gemm", [a, b]) }
        expect(6, "unknown kernel") { try session.callKernel("nope", [.tensor(a)]) }
    }

    func testBadSettings() throws {
        let model = try Model(path: try Env.zoo("mlp.so"))
        expect(11, "zero threads") { _ = try model.session(SessionOptions(threads: 0)) }
        expect(16, "missing plug-in (the runtime reports it as a backend error)") { _ = try moteLoadPlugin(path: "/no/such/plugin.so") }
        expect(8, "byte count") { _ = try Tensor(data: Data(count: 3), shape: [4], dtype: .float32) }
        expect(8, "toArray of the wrong type") { _ = try Tensor([Float](repeating: 1, count: 4)).toArray(of: Int32.self) }
    }

    func testEveryCodeMapsOneToOne() throws {
        let codes = testingErrorCodes()
        XCTAssertEqual(codes.map { $0.code }, Array(1...20))
        XCTAssertEqual(codes.suffix(3).map { $0.name }, ["resourceExhausted", "cancelled", "device"])
        for (code, name) in codes {
            XCTAssertThrowsError(try testingRaise(code: code, message: "m\(code)")) { e in
                guard let m = e as? MoteError else { return XCTFail("code \(code): \(e)") }
                XCTAssertEqual(m.code, code)
                XCTAssertEqual(m.name, name, "code \(code)")
                XCTAssertEqual(m.message, "m\(code)")
                XCTAssertEqual(MoteError(code: code, message: "x").code, code)
            }
        }
    }

    func testRustPanicIsAThrownInternalError() throws {
        XCTAssertThrowsError(try testingPanic("boom")) { e in
            guard case MoteError.internal(let m) = e else { return XCTFail("\(e) is not .internal") }
            XCTAssertTrue(m.contains("boom"), m)
        }
        XCTAssertFalse(moteVersion().isEmpty, "the process goes on after the panic")
    }
}
