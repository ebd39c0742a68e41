// swift-tools-version:5.9
// The Swift package `Mote`, at the repository root so that SwiftPM can add it by URL
// (`.package(url: "https://.../mote.git", from: "0.1.0")`). Two products, alternatives (an app
// links one of them; docs/swiftpm.md, "Two products"):
// - `Mote`, the inference library: the idiomatic layer (Sources/Mote) over uniffi's generated
//   code (Sources/MoteUniFFI, Sources/MoteFFI), over the Rust crate mote-swift;
// - `MoteRPC`, Mote's RPC server for an RPC app (Sources/MoteRPC, with Mote's MoteError.swift
//   and Logging.swift as symbolic links) over Sources/MoteRPCUniFFI and Sources/MoteRPCFFI, over
//   the crate mote-swift-rpc. The inference library carries no RPC server.
// Its sources live in bindings-swift/; the generated ones are written by
// scripts/swift-bindings.sh, never by hand. docs/swiftpm.md.
import PackageDescription
import Foundation

/// The binaries Apple platforms link: on main, empty, and the package uses the XCFrameworks that
/// scripts/build-xcframework.sh builds into bindings-swift/Mote.xcframework and
/// bindings-swift/MoteRPC.xcframework (on a Mac with Xcode and rustup, or on Linux in CI). A
/// release commit names the published zips instead: written by `scripts/swiftpm-release.sh --url
/// URL` (both lines: MoteRPC.xcframework.zip beside Mote.xcframework.zip unless --rpc-url says
/// otherwise), never by hand (a checksum is the zip's SHA-256, what `swift package
/// compute-checksum` prints).
let release = (url: "", checksum: "")
let rpcRelease = (url: "", checksum: "")

// Which branch the manifest describes. SwiftPM evaluates a manifest on the machine that builds,
// so Apple hosts always take the binary target. On Linux the package links the host build of
// the Rust library, unless MOTE_SWIFTPM_APPLE is set: CI sets it to check the Apple branch
// (`swift package dump-package`) without a Mac.
#if os(Linux)
let apple = ProcessInfo.processInfo.environment["MOTE_SWIFTPM_APPLE"] != nil
#else
let apple = true
#endif

let nativeTargets: [Target]
let nativeDependencies: [Target.Dependency]
let nativeLinker: [LinkerSetting]
let rpcNativeTargets: [Target]
let rpcNativeDependencies: [Target.Dependency]
let rpcNativeLinker: [LinkerSetting]
// The package's own tests (Linux only) call test hooks that release builds of the library do
// not export: scripts/test-swift.sh builds libmote_swift with its `test-hooks` feature,
// generates that build's bindings into a folder inside the package and names it here; the
// `Mote` target then compiles its hooks (MOTE_TEST_HOOKS). Unset, the package is the release
// one, and its tests do not compile (docs/uniffi.md, "Test hooks").
let testHooks = apple ? nil : ProcessInfo.processInfo.environment["MOTE_SWIFT_TEST_HOOKS_DIR"]
let bridgeSources = testHooks ?? "bindings-swift/Sources"
let hookSettings: [SwiftSetting] = testHooks == nil ? [] : [.define("MOTE_TEST_HOOKS")]
if apple {
    // The static library and its headers (modules `moteFFI`, which the generated code
    // imports, and `MoteC`, the C ABI) come as a binary target; the `bnns` backend calls
    // Accelerate, which a static library cannot bring along by itself (docs/apple.md).
    nativeTargets = [
        release.url.isEmpty
            ? .binaryTarget(name: "MoteNative", path: "bindings-swift/Mote.xcframework")
            : .binaryTarget(name: "MoteNative", url: release.url, checksum: release.checksum),
    ]
    nativeDependencies = ["MoteNative"]
    nativeLinker = [.linkedFramework("Accelerate")]
    // MoteRPC's static library (mote-swift-rpc, modules `mote_rpcFFI` and `MoteC`), the same way.
    rpcNativeTargets = [
        rpcRelease.url.isEmpty
            ? .binaryTarget(name: "MoteRPCNative", path: "bindings-swift/MoteRPC.xcframework")
            : .binaryTarget(name: "MoteRPCNative", url: rpcRelease.url, checksum: rpcRelease.checksum),
    ]
    rpcNativeDependencies = ["MoteRPCNative"]
    rpcNativeLinker = [.linkedFramework("Accelerate")]
} else {
    // Linux: the uniffi header and module map come from a C target, and libmote_swift from
    // the host build (`cargo build -p mote-swift`), in MOTE_SWIFT_LIB_DIR (scripts/test-swift.sh
    // sets it), default target/debug. unsafeFlags: SwiftPM takes them from local packages only,
    // which is how this branch is used.
    let libDir = ProcessInfo.processInfo.environment["MOTE_SWIFT_LIB_DIR"]
        ?? URL(fileURLWithPath: #filePath).deletingLastPathComponent()
            .appendingPathComponent("target/debug").standardized.path
    nativeTargets = [.target(name: "MoteFFI", path: "\(bridgeSources)/MoteFFI")]
    nativeDependencies = ["MoteFFI"]
    nativeLinker = [
        .linkedLibrary("mote_swift"),
        .unsafeFlags(["-L", libDir, "-Xlinker", "-rpath", "-Xlinker", libDir]),
    ]
    // MoteRPC: libmote_swift_rpc (`cargo build -p mote-swift-rpc`) from the same folder. Never
    // in one process with libmote_swift: both carry the runtime and export its C symbols
    // (docs/swiftpm.md, "Two products"). The RPC bindings have no test-hooks variant.
    rpcNativeTargets = [.target(name: "MoteRPCFFI", path: "bindings-swift/Sources/MoteRPCFFI")]
    rpcNativeDependencies = ["MoteRPCFFI"]
    rpcNativeLinker = [
        .linkedLibrary("mote_swift_rpc"),
        .unsafeFlags(["-L", libDir, "-Xlinker", "-rpath", "-Xlinker", libDir]),
    ]
}

let package = Package(
    name: "Mote",
    platforms: [.iOS(.v15), .macOS(.v12)],
    products: [
        .library(name: "Mote", targets: ["Mote"]),
        // The RPC server, for RPC apps, instead of `Mote` (never beside it).
        .library(name: "MoteRPC", targets: ["MoteRPC"]),
    ],
    targets: nativeTargets + rpcNativeTargets + [
        .target(
            name: "MoteUniFFI",
            dependencies: nativeDependencies,
            path: "\(bridgeSources)/MoteUniFFI",
            linkerSettings: nativeLinker
        ),
        .target(
            name: "Mote",
            dependencies: ["MoteUniFFI"],
            path: "bindings-swift/Sources/Mote",
            // The privacy manifest an app's own manifest is merged with (docs/swiftpm.md).
            resources: [.copy("PrivacyInfo.xcprivacy")],
            swiftSettings: hookSettings
        ),
        .testTarget(name: "MoteTests", dependencies: ["Mote"], path: "bindings-swift/Tests/MoteTests"),
        .target(
            name: "MoteRPCUniFFI",
            dependencies: rpcNativeDependencies,
            path: "bindings-swift/Sources/MoteRPCUniFFI",
            linkerSettings: rpcNativeLinker
        ),
        .target(
            name: "MoteRPC",
            dependencies: ["MoteRPCUniFFI"],
            path: "bindings-swift/Sources/MoteRPC",
            // The same privacy manifest as Mote's (a symbolic link to it).
            resources: [.copy("PrivacyInfo.xcprivacy")],
            // Which bridge the files shared with Mote (MoteError.swift, Logging.swift) call.
            swiftSettings: [.define("MOTE_RPC")]
        ),
        // MoteRPC's tests live in ios-app's package (ios-app/Tests/MoteRPCTests): a Linux test
        // process links one of the two libraries, and this package's tests link Mote's.
    ]
)
