// swift-tools-version:5.10
// The iOS RPC app's logic, `RPCAppCore` (Foundation only: it builds and is tested on Linux), over
// the product `MoteRPC` of the `Mote` package next door: the RPC server without the inference
// library (docs/swiftpm.md, "Two products"). The app itself (App/, SwiftUI) is an Xcode target
// made from project.yml; it is not part of this package (README.md). MoteRPC's own tests are
// here too (Tests/MoteRPCTests): on Linux a test process links one of the two Swift libraries,
// and the root package's tests link Mote's.
import PackageDescription

let package = Package(
    name: "MoteRPCApp",
    platforms: [.iOS(.v15), .macOS(.v12)],
    products: [
        .library(name: "RPCAppCore", targets: ["RPCAppCore"]),
    ],
    dependencies: [
        // A path dependency on the repository root (Mote's Package.swift): on Linux it links
        // libmote_swift_rpc with unsafeFlags, which SwiftPM accepts from local packages only. An
        // app outside this repository names it by URL instead (docs/swiftpm.md).
        .package(name: "Mote", path: ".."),
    ],
    targets: [
        .target(
            name: "RPCAppCore",
            dependencies: [.product(name: "MoteRPC", package: "Mote")],
            path: "Sources/RPCAppCore"
        ),
        .testTarget(
            name: "RPCAppCoreTests",
            dependencies: ["RPCAppCore", .product(name: "MoteRPC", package: "Mote")],
            path: "Tests/RPCAppCoreTests"
        ),
        .testTarget(
            name: "MoteRPCTests",
            dependencies: [.product(name: "MoteRPC", package: "Mote")],
            path: "Tests/MoteRPCTests"
        ),
    ]
)
