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
// Linux: the uniffi header and module map come from a C target.
let nativeLinker: [LinkerSetting] = [
    .linkedLibrary("mote_swift"),
    .unsafeFlags(["-L", libDir, "-Xlinker", "-rpath", "-Xlinker", libDir]),
]
let nativeDependencies: [Target.Dependency] = ["MoteFFI"]
let nativeTargets: [Target] = [.target(name: "MoteFFI", path: "Sources/MoteFFI")]
#else
// Apple platforms: the static library comes as a binary target, Mote.xcframework (built by
// scripts/build-xcframework.sh, which copies it here), whose headers carry the `moteFFI` module
// the generated code imports; the `bnns` backend calls Accelerate. A release would name the
// zipped framework by URL and checksum instead:
//   .binaryTarget(name: "MoteNative", url: ".../Mote.xcframework.zip", checksum: "<sha256>")
let nativeLinker: [LinkerSetting] = [.linkedFramework("Accelerate")]
let nativeDependencies: [Target.Dependency] = ["MoteNative"]
let nativeTargets: [Target] = [.binaryTarget(name: "MoteNative", path: "Mote.xcframework")]
#endif

let package = Package(
    name: "Mote",
    platforms: [.iOS(.v15), .macOS(.v12)],
    products: [
        .library(name: "Mote", targets: ["Mote"]),
    ],
    targets: nativeTargets + [
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
