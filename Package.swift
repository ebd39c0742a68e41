// swift-tools-version:5.9
// The Swift package `Mote`, at the repository root so that SwiftPM can add it by URL
// (`.package(url: "https://.../mote.git", from: "0.1.0")`). Its sources live in bindings-swift/:
// the idiomatic layer (Sources/Mote) over uniffi's generated code (Sources/MoteUniFFI,
// Sources/MoteFFI; written by scripts/swift-bindings.sh, never by hand). docs/swiftpm.md.
import PackageDescription
import Foundation

/// The binary Apple platforms link: on main, empty, and the package uses the XCFramework that
/// scripts/build-xcframework.sh builds into bindings-swift/Mote.xcframework (on a Mac with Xcode
/// and rustup, or on Linux in CI). A release commit names the published zip instead: written by
/// `scripts/swiftpm-release.sh --version V --base-url URL`, never by hand (the checksum is the
/// zip's SHA-256, what `swift package compute-checksum` prints).
let release = (url: "", checksum: "")

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
}

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
    ]
)
