// swift-tools-version:5.9
// The Swift package `Mote`: the idiomatic layer (Sources/Mote) over uniffi's generated code
// (Sources/MoteUniFFI, Sources/MoteFFI; written by scripts/swift-bindings.sh, never by hand).
import PackageDescription
import Foundation

// Where the Rust library libmote_swift is. Linux: the host build (`cargo build -p mote-swift`),
// named by MOTE_SWIFT_LIB_DIR (scripts/test-swift.sh sets it), default ../target/debug.
let libDir = ProcessInfo.processInfo.environment["MOTE_SWIFT_LIB_DIR"]
    ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .appendingPathComponent("../target/debug").standardized.path

#if os(Linux)
let nativeLinker: [LinkerSetting] = [
    .linkedLibrary("mote_swift"),
    .unsafeFlags(["-L", libDir, "-Xlinker", "-rpath", "-Xlinker", libDir]),
]
let nativeDependencies: [Target.Dependency] = ["MoteFFI"]
let nativeTargets: [Target] = []
#else
// Apple platforms: the static library will come as a binary target (an XCFramework built by a
// later packaging script, issue 12 item 5); until then link a host build the same way.
// TODO(packaging): replace with
//   .binaryTarget(name: "MoteNative", url: ".../Mote.xcframework.zip", checksum: "...")
// and depend on it from MoteUniFFI.
let nativeLinker: [LinkerSetting] = [
    .linkedLibrary("mote_swift"),
    .unsafeFlags(["-L", libDir]),
]
let nativeDependencies: [Target.Dependency] = ["MoteFFI"]
let nativeTargets: [Target] = []
#endif

let package = Package(
    name: "Mote",
    platforms: [.iOS(.v15), .macOS(.v12)],
    products: [
        .library(name: "Mote", targets: ["Mote"]),
    ],
    targets: nativeTargets + [
        .target(name: "MoteFFI", path: "Sources/MoteFFI"),
        .target(
            name: "MoteUniFFI",
            dependencies: nativeDependencies,
            path: "Sources/MoteUniFFI",
            linkerSettings: nativeLinker
        ),
        .target(name: "Mote", dependencies: ["MoteUniFFI"], path: "Sources/Mote"),
        .testTarget(name: "MoteTests", dependencies: ["Mote"], path: "Tests/MoteTests"),
    ]
)
