import Foundation
import XCTest
@testable import Mote

/// The corrupted-file corpus (docs/fuzzing.md, "Corrupted files") through the Swift API. The
/// corpus is the folder the fuzz crate's `corrupt` writes (cut copies of the zoos' files and
/// copies with bytes changed inside their module blob, VM executable and region descriptions),
/// named by MOTE_CORRUPT_DIR: scripts/test-swift.sh writes one when it is unset.
///
/// Every copy is loaded with `Model(path:)` (`.so` copies: their code is never changed) and
/// with `Model(path:codeFree: true)` (every copy). A load that succeeds gets a session and both
/// are released; a load (or session) that fails must throw a typed `MoteError` (code 1...20,
/// never `.internal`, which is a caught Rust panic) with a message. The list is swept twice:
/// after each pass no corpus file is still mapped, and the open descriptors are the same after
/// both passes.
final class CorruptFilesTests: XCTestCase {
    static let passes = 2

    private func seconds(since t: Date) -> String { String(format: "%.1f", Date().timeIntervalSince(t)) }

    /// The open descriptors, each as "fd -> target", without the listing's own.
    private func openFds() throws -> [String] {
        let fm = FileManager.default
        let listing = try fm.destinationOfSymbolicLink(atPath: "/proc/self")
        return try fm.contentsOfDirectory(atPath: "/proc/self/fd").compactMap { fd in
            guard let target = try? fm.destinationOfSymbolicLink(atPath: "/proc/self/fd/" + fd) else {
                return nil // closed since it was listed
            }
            return target == "/proc/\(listing)/fd" ? nil : "\(fd) -> \(target)"
        }.sorted()
    }

    /// Lines of /proc/self/maps naming a file under `dir`: libraries left loaded.
    private func corpusMappings(_ dir: String) throws -> [String] {
        let maps = try String(contentsOfFile: "/proc/self/maps", encoding: .utf8)
        return maps.split(separator: "\n").filter { $0.contains(dir + "/") }.map(String.init)
    }

    /// Outcome counts ("mapped: loaded", "code-free: format"...) and the failures.
    private final class Tally {
        var outcomes: [String: Int] = [:]
        var failures: [String] = []
        var loaded = 0

        func thrown(_ copy: String, _ mode: String, _ error: Error) {
            guard let e = error as? MoteError else {
                outcomes["\(mode): \(type(of: error))", default: 0] += 1
                failures.append("\(copy) (\(mode)): \(error) is not a MoteError")
                return
            }
            outcomes["\(mode): \(e.name)", default: 0] += 1
            if case .internal = e {
                failures.append("\(copy) (\(mode)): \(e)")
            } else if e.message.isEmpty {
                failures.append("\(copy) (\(mode)): \(e.name) without a message")
            }
        }
    }

    private func one(_ tally: Tally, _ path: String, _ copy: String, codeFree: Bool) {
        let mode = codeFree ? "code-free" : "mapped"
        let model: Model
        do {
            model = codeFree ? try Model(path: path, codeFree: true) : try Model(path: path)
        } catch {
            tally.thrown(copy, mode, error)
            return
        }
        tally.outcomes["\(mode): loaded", default: 0] += 1
        tally.loaded += 1
        do {
            _ = try model.session()
        } catch {
            tally.thrown(copy, mode + " session", error)
        }
    }

    func testEveryCopyLoadsOrThrowsATypedError() throws {
        let dir = try Env.require("MOTE_CORRUPT_DIR")
        let real = URL(fileURLWithPath: dir).resolvingSymlinksInPath().path
        guard let listing = try? String(contentsOfFile: dir + "/corpus.tsv", encoding: .utf8) else {
            return XCTFail("MOTE_CORRUPT_DIR=\(dir) has no corpus.tsv (scripts/test-corrupt.sh's corpus writer makes it)")
        }
        let copies = listing.split(separator: "\n").compactMap { line in
            line.split(separator: "\t", maxSplits: 1).first.map(String.init)
        }
        XCTAssertFalse(copies.isEmpty, "no copies listed in \(dir)/corpus.tsv")
        let tally = Tally()
        var fds: [[String]] = []
        let start = Date()
        for pass in 1...Self.passes {
            let t0 = Date()
            for copy in copies {
                // Each load's Model and Session are released when `one` returns.
                let path = dir + "/" + copy
                if copy.hasSuffix(".so") { one(tally, path, copy, codeFree: false) }
                one(tally, path, copy, codeFree: true)
            }
            let left = try corpusMappings(real)
            XCTAssertTrue(left.isEmpty, "pass \(pass): corpus files still mapped: \(left.prefix(4))")
            fds.append(try openFds())
            print("corrupt files (swift) pass \(pass): \(copies.count) copies in \(seconds(since: t0)) s, "
                  + "\(fds[pass - 1].count) descriptors")
        }
        XCTAssertTrue(tally.failures.isEmpty,
                      "\(tally.failures.count) loads broke the rules, first ones:\n  "
                      + tally.failures.prefix(20).joined(separator: "\n  "))
        let first = Set(fds[0]), last = Set(fds[Self.passes - 1])
        XCTAssertEqual(fds[0].count, fds[Self.passes - 1].count,
                       "open descriptors after pass 1 and pass \(Self.passes): new \(last.subtracting(first).sorted()), gone \(first.subtracting(last).sorted())")
        XCTAssertGreaterThan(tally.loaded, 0, "no copy loaded at all: \(tally.outcomes)")
        // The passes make the same loads: every count divides evenly.
        var perPass: [String: Int] = [:]
        for (key, n) in tally.outcomes {
            XCTAssertEqual(n % Self.passes, 0, "the passes differ in \(key): \(tally.outcomes)")
            perPass[key] = n / Self.passes
        }
        let summary = perPass.keys.sorted().map { "\($0)=\(perPass[$0]!)" }.joined(separator: ", ")
        print("corrupt files (swift): \(copies.count) copies x \(Self.passes) passes in \(seconds(since: start)) s, "
              + "per pass {\(summary)}")
    }
}
