// uniffi's generated module is an implementation detail: not re-exported, and no public
// declaration may mention its types (docs/uniffi.md).
#if compiler(>=6.0)
internal import MoteUniFFI
#else
@_implementationOnly import MoteUniFFI
#endif

// Hooks for the package's own tests (internal: reached with `@testable import Mote`).

/// Mote's error codes and names, from the Rust side.
func testingErrorCodes() -> [(code: Int, name: String)] {
    errorCodes().map { (code: Int($0.code), name: $0.name) }
}

// The rest calls exports only a `test-hooks` build of the library has (docs/uniffi.md, "Test
// hooks"): compiled when scripts/test-swift.sh names that build's bindings (Package.swift).
#if MOTE_TEST_HOOKS

/// Make the Rust side fail with `code` and `message`.
func testingRaise(code: Int, message: String) throws {
    try bridged { try raiseForTest(code: UInt32(code), message: message) }
}

/// Make the Rust side panic (uniffi catches it; Swift gets ``MoteError/internal(_:)``).
func testingPanic(_ message: String) throws {
    try bridged { try panicForTest(message: message) }
}

/// Write a code-free model file whose `main()` loops forever (Mote's
/// `fuzzing::craft::endless_loop`): only ``SessionOptions/maxInstructions`` or an interrupt
/// ends a call of it.
func testingWriteEndlessLoop(to path: String) throws {
    try bridged { try writeEndlessLoopForTest(path: path) }
}

#endif
