import Foundation
import XCTest
@testable import Mote

/// The two ways a model reaches a process that may not load code (iOS): linked into the
/// program as a TVM system library, and read as data (code-free). scripts/test-swift.sh links
/// the zoo's system-library objects whole into this test executable (MOTE_SYSLIB_MODELS names
/// them) and points MOTE_OFFLOAD_ZOO_DIR at the offload zoo, whose manifest marks the
/// code-free models.
final class StaticAndCodeFreeTests: XCTestCase {
    /// Call-mode cases of `models` in the manifest at `dir`, against TVM's outputs.
    private func check(_ model: Model, cases: [[String: Any]], dir: String, _ what: String) throws -> Int {
        var checked = 0
        for c in cases where (c["mode"] as? String) == "call" && c["expect_error"] as? String == nil {
            let ins = try loadNpz(dir + "/" + (c["inputs"] as! String)).map { $0.tensor }
            let want = try loadNpz(dir + "/" + (c["expected"] as! String)).map { $0.tensor }
            let t = c["tolerance"] as? [String: Double] ?? [:]
            let tol = Tolerance(rtol: t["rtol"] ?? 1e-5, atol: t["atol"] ?? 1e-5)
            for threads in [1, 2] {
                let session = try model.session(SessionOptions(threads: threads, poisonMemory: true))
                for round in 1...2 {
                    let out = try session.run(c["function"] as! String, ins)
                    XCTAssertEqual(out.count, want.count, what)
                    for (i, (a, e)) in zip(out, want).enumerated() {
                        try assertClose(a, e, tol, "\(what) \(c["case"]!) at \(threads) thread(s), round \(round), output \(i)")
                    }
                    checked += 1
                }
            }
        }
        return checked
    }

    private func manifest(_ dir: String) throws -> [[String: Any]] {
        let data = try Data(contentsOf: URL(fileURLWithPath: dir + "/manifest.json"))
        let root = try JSONSerialization.jsonObject(with: data) as? [String: Any]
        return (root?["models"] as? [[String: Any]]) ?? []
    }

    func testLinkedModelsLoadByPrefixAndMatchTvm() throws {
        let names = try Env.require("MOTE_SYSLIB_MODELS").split(separator: ",").map(String.init)
        XCTAssertFalse(names.isEmpty)
        let dir = try Env.zoo()
        XCTAssertTrue(Set(names.map { $0 + "_" }).isSubset(of: Set(Model.systemLibPrefixes)), "\(Model.systemLibPrefixes)")
        var checked = 0
        for m in try manifest(dir) where names.contains(m["name"] as! String) {
            let name = m["name"] as! String
            let model = try Model(systemLib: name + "_")
            XCTAssertFalse(model.isLoadedCodeFree)
            checked += try check(model, cases: m["cases"] as? [[String: Any]] ?? [], dir: dir, "system library \(name)_")
        }
        print("system libraries: \(checked) runs checked over \(names.count) linked models")
        XCTAssertGreaterThanOrEqual(checked, 4 * (names.count - 1), "runs checked")
    }

    func testAnUnknownPrefixIsALoadErrorListingTheLinkedOnes() throws {
        let names = try Env.require("MOTE_SYSLIB_MODELS").split(separator: ",").map(String.init)
        XCTAssertThrowsError(try Model(systemLib: "nope_")) { e in
            guard case MoteError.load(let m) = e else { return XCTFail("\(e) is not .load") }
            for n in names { XCTAssertTrue(m.contains(n + "_"), "`\(m)` lists \(n)_") }
        }
    }

    func testCodeFreeModelsLoadAsDataAndMatchTvm() throws {
        let dir = try Env.require("MOTE_OFFLOAD_ZOO_DIR")
        var models = 0, checked = 0, refused = 0
        for m in try manifest(dir) {
            let name = m["name"] as! String, path = dir + "/" + (m["file"] as! String)
            if m["code_free"] as? Bool == true {
                let model = try Model(path: path, codeFree: true)
                XCTAssertTrue(model.isLoadedCodeFree, name)
                XCTAssertTrue(model.isCodeFree, name)
                checked += try check(model, cases: m["cases"] as? [[String: Any]] ?? [], dir: dir, "code-free \(name)")
                models += 1
            } else {
                XCTAssertThrowsError(try Model(path: path, codeFree: true), name) { e in
                    guard case MoteError.unsupported(let msg) = e else { return XCTFail("\(name): \(e) is not .unsupported") }
                    XCTAssertTrue(msg.contains("not code-free"), "\(name): \(msg)")
                }
                XCTAssertFalse(try Model(path: path).isCodeFree, name)
                refused += 1
            }
        }
        print("code-free: \(models) models, \(checked) runs checked; \(refused) libraries refused")
        XCTAssertGreaterThanOrEqual(models, 10)
        XCTAssertGreaterThan(refused, 0)
    }
}
