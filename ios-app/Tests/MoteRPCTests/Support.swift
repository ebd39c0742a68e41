import Foundation
import XCTest
@testable import MoteRPC

/// The zoos (MOTE_ZOO_DIR, MOTE_OFFLOAD_ZOO_DIR) and the venv python (MOTE_PYTHON): tests fail
/// loudly without them (scripts/test-ios-app.sh sets them); nothing is skipped.
enum Env {
    static func require(_ name: String) throws -> String {
        guard let v = ProcessInfo.processInfo.environment[name], !v.isEmpty else {
            XCTFail("\(name) is not set: set it (scripts/test-ios-app.sh does) — nothing is skipped")
            throw MoteError.invalidArgument("\(name) unset")
        }
        return v
    }

    static func zoo() throws -> String { try require("MOTE_ZOO_DIR") }
}
