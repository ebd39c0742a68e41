import Foundation
import XCTest
@testable import Mote

/// The OpenCL options and ``Session/device`` where the process has no OpenCL library (the
/// trixie chroot scripts/test-swift.sh runs in has none): a session of the OpenCL zoo's
/// `mlp_cl.so` (MOTE_OPENCL_ZOO_DIR) throws ``MoteError/device(_:)`` naming the libraries
/// looked for, and CPU models go on working in the same process.
final class OpenClTests: XCTestCase {
    func mlpCl() throws -> String { try Env.require("MOTE_OPENCL_ZOO_DIR") + "/mlp_cl.so" }

    func testAnOpenClModelWithoutLibOpenClThrowsDeviceAndCpuModelsStillRun() throws {
        let model = try Model(path: try mlpCl())
        for options in [SessionOptions(), SessionOptions(openclDevice: 0, openclProfiling: true)] {
            XCTAssertThrowsError(try model.session(options), "an OpenCL session without libOpenCL") { e in
                guard case MoteError.device(let message) = e else {
                    return XCTFail("expected MoteError.device, got \(e)")
                }
                XCTAssertEqual((e as? MoteError)?.code, 20)
                XCTAssertTrue(message.contains("libOpenCL"), "`\(message)` does not name libOpenCL")
            }
        }
        // The same process, a CPU model: its session runs, on the CPU, whatever the OpenCL options.
        let raise = try Model(path: try Env.zoo("raise.so"))
        let session = try raise.session(SessionOptions(openclDevice: 99, openclProfiling: true))
        XCTAssertEqual(try session.device, .cpu)
        XCTAssertEqual(try session.device.description, "cpu")
        let ok = try session.run("main", try inputs("raise.ok.inputs.npz"))
        try assertClose(ok[0], try loadNpz(Env.zoo("raise.ok.expected.npz"))[0].tensor,
                        Tolerance(rtol: 1e-5, atol: 1e-5), "raise after an OpenCL session failed")
    }

    func testBadOpenClOptionsAreInvalidArguments() throws {
        let raise = try Model(path: try Env.zoo("raise.so"))
        for (what, options) in [("openclDevice -1", SessionOptions(openclDevice: -1)),
                                ("empty openclProgramCache", SessionOptions(openclProgramCache: ""))] {
            XCTAssertThrowsError(try raise.session(options), what) { e in
                guard case MoteError.invalidArgument = e else {
                    return XCTFail("\(what): expected MoteError.invalidArgument, got \(e)")
                }
            }
        }
        XCTAssertEqual(Device.opencl(index: 2).description, "opencl:2")
    }
}
