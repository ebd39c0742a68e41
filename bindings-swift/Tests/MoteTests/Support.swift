import Foundation
import XCTest
@testable import Mote

/// The zoo (MOTE_ZOO_DIR) and the venv python (MOTE_PYTHON): tests fail loudly without them.
enum Env {
    static func require(_ name: String) throws -> String {
        guard let v = ProcessInfo.processInfo.environment[name], !v.isEmpty else {
            XCTFail("\(name) is not set: set it (scripts/test-swift.sh does) — nothing is skipped")
            throw MoteError.invalidArgument("\(name) unset")
        }
        return v
    }

    static func zoo() throws -> String { try require("MOTE_ZOO_DIR") }
    static func zoo(_ file: String) throws -> String { try zoo() + "/" + file }
}

struct Tolerance { let rtol: Double; let atol: Double }

/// Elements of a tensor as doubles (float16 decoded here), for comparison with numpy's values.
func values(_ t: Tensor) throws -> [Double] {
    switch t.dtype {
    case .float32: return try t.toArray(of: Float.self).map(Double.init)
    case .float64: return try t.toArray(of: Double.self)
    case .int8: return try t.toArray(of: Int8.self).map(Double.init)
    case .uint8: return try t.toArray(of: UInt8.self).map(Double.init)
    case .int32: return try t.toArray(of: Int32.self).map(Double.init)
    case .int64: return try t.toArray(of: Int64.self).map(Double.init)
    case .bool: return try t.toArray(of: Bool.self).map { $0 ? 1 : 0 }
    case .float16:
        return try t.withUnsafeBytes { raw in
            (0..<t.count).map { i in halfToDouble(raw.load(fromByteOffset: 2 * i, as: UInt16.self)) }
        }
    default: throw MoteError.unsupported("no comparison for \(t.dtype)")
    }
}

func halfToDouble(_ h: UInt16) -> Double {
    let sign: Double = (h & 0x8000) != 0 ? -1 : 1
    let exp = Int((h >> 10) & 0x1f), frac = Double(h & 0x3ff)
    if exp == 0 { return sign * frac * pow(2, -24) }
    if exp == 31 { return frac == 0 ? sign * .infinity : .nan }
    return sign * (1 + frac / 1024) * pow(2, Double(exp - 15))
}

/// Assert `actual` matches numpy's `expected` as numpy.allclose does (NaN never matches).
func assertClose(_ actual: Tensor, _ expected: Tensor, _ tol: Tolerance, _ what: String,
                 file: StaticString = #filePath, line: UInt = #line) throws {
    XCTAssertEqual(actual.shape, expected.shape, "\(what): shape", file: file, line: line)
    XCTAssertEqual(actual.dtype, expected.dtype, "\(what): dtype", file: file, line: line)
    let a = try values(actual), e = try values(expected)
    XCTAssertEqual(a.count, e.count, "\(what): element count", file: file, line: line)
    var bad = 0
    for (i, (x, y)) in zip(a, e).enumerated() where !(abs(x - y) <= tol.atol + tol.rtol * abs(y)) {
        if bad < 3 { XCTFail("\(what): element \(i) is \(x), TVM says \(y)", file: file, line: line) }
        bad += 1
    }
    XCTAssertEqual(bad, 0, "\(what): \(bad) elements differ", file: file, line: line)
}

/// Fill a tensor's memory with 0xFF bytes (NaN for floats), so work a kernel skips shows.
func poison(_ t: Tensor) throws {
    try t.withUnsafeMutableBytes { _ = $0.initializeMemory(as: UInt8.self, repeating: 0xFF) }
}

/// The zoo's scale_shift (what the `packed` model calls): dst[i] = 2 * src[i] + 1.
let scaleShiftName = "mote.zoo.scale_shift"
@Sendable func scaleShift(_ args: [CallbackArgument]) throws -> CallbackResult {
    guard args.count == 3, case .pointer(let src?) = args[0], case .pointer(let dst?) = args[1],
          case .int(let n) = args[2] else {
        throw MoteError.invalidArgument("scale_shift: unexpected arguments \(args)")
    }
    let s = src.assumingMemoryBound(to: Float.self), d = dst.assumingMemoryBound(to: Float.self)
    for i in 0..<Int(n) { d[i] = 2 * s[i] + 1 }
    return .none
}

/// Load the npz inputs of a case, in order.
func inputs(_ file: String) throws -> [Tensor] {
    try loadNpz(Env.zoo(file)).map { $0.tensor }
}

struct ZooCase {
    let model: String, file: String, kind: String, name: String, function: String
    let inputs: String, expected: String?, mode: String, expectError: String?
    let outputs: [Int], scalars: [Int], tolerance: Tolerance?
}

func zooCases() throws -> [ZooCase] {
    let data = try Data(contentsOf: URL(fileURLWithPath: Env.zoo("manifest.json")))
    let root = try JSONSerialization.jsonObject(with: data) as? [String: Any]
    guard let models = root?["models"] as? [[String: Any]], !models.isEmpty else {
        throw MoteError.format("manifest.json has no models")
    }
    var out: [ZooCase] = []
    for m in models {
        for c in (m["cases"] as? [[String: Any]]) ?? [] {
            let tol = (c["tolerance"] as? [String: Double]).map { Tolerance(rtol: $0["rtol"] ?? 0, atol: $0["atol"] ?? 0) }
            out.append(ZooCase(
                model: m["name"] as! String, file: m["file"] as! String, kind: m["kind"] as! String,
                name: c["case"] as! String, function: c["function"] as! String,
                inputs: c["inputs"] as! String, expected: c["expected"] as? String,
                mode: c["mode"] as! String, expectError: c["expect_error"] as? String,
                outputs: (c["outputs"] as? [Int]) ?? [], scalars: (c["scalars"] as? [Int]) ?? [],
                tolerance: tol))
        }
    }
    return out
}
