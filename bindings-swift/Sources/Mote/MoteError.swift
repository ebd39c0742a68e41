import Foundation
// Compiled into both products (docs/swiftpm.md, "Two products"): this file is Mote's, and
// Sources/MoteRPC/MoteError.swift is a symbolic link to it. Each product calls its own library's
// bridge, which exports the same names (bindings-swift/src/error.rs is compiled into both Rust
// crates): MOTE_RPC (set by Package.swift for the MoteRPC target) says which.
// uniffi's generated module is an implementation detail: not re-exported, and no public
// declaration may mention its types (docs/uniffi.md).
#if MOTE_RPC
#if compiler(>=6.0)
internal import MoteRPCUniFFI
#else
@_implementationOnly import MoteRPCUniFFI
#endif
#else
#if compiler(>=6.0)
internal import MoteUniFFI
#else
@_implementationOnly import MoteUniFFI
#endif
#endif

/// An error from Mote. One case per Mote error code (`mote::ErrorCode`, the C ABI's
/// `MoteErrorCode`, the Java exception classes): same numbers, same names. Each case carries
/// Mote's full message, which is also its `localizedDescription` (``LocalizedError``) and, as an
/// `NSError`, its `NSLocalizedDescriptionKey`, in domain ``errorDomain`` with the code as
/// `code` (``CustomNSError``).
public enum MoteError: Error, Equatable, CustomStringConvertible, LocalizedError, CustomNSError {
    /// 1: a file could not be read or written.
    case io(String)
    /// 2: the system loader refused the model library.
    case load(String)
    /// 3: the model's embedded data is malformed.
    case format(String)
    /// 4: the model uses a feature Mote does not implement.
    case unsupported(String)
    /// 5: the model calls functions nobody provides.
    case missingFunctions(String)
    /// 6: no function of that name in the model.
    case unknownFunction(String)
    /// 7: wrong number of arguments.
    case argumentCount(String)
    /// 8: an argument has the wrong type, rank, shape or dtype.
    case mismatch(String)
    /// 9: a compiled kernel reported an error (its message is kept verbatim).
    case kernel(String)
    /// 10: a registered function (a Swift closure) failed.
    case callback(String)
    /// 11: a caller-supplied value is invalid.
    case invalidArgument(String)
    /// 12: an `.npy`/`.npz` file is malformed.
    case npy(String)
    /// 13: the VM hit an inconsistent state.
    case vm(String)
    /// 14: memory could not be allocated.
    case outOfMemory(String)
    /// 15: an offloaded subgraph description is malformed or does not match its call.
    case subgraph(String)
    /// 16: a backend failed to load, prepare or run.
    case backend(String)
    /// 17: the object is in use by another call (a session on another thread, a tensor being
    /// written); nothing waited.
    case busy(String)
    /// 18: a budget of the load or session options would be exceeded (the message names the
    /// option, e.g. `SessionOptions::max_instructions`); nothing is left half-done and the
    /// session runs its next call normally. See `docs/untrusted-models.md` §3.
    case resourceExhausted(String)
    /// 19: the call was interrupted through the session's ``InterruptHandle`` (a cancelled
    /// `Task` throws `CancellationError` instead: ``Session/run(_:_:)-async``).
    case cancelled(String)
    /// 20: a device (OpenCL) failed or is missing: no `libOpenCL` or no device where a model
    /// compiled for OpenCL needs one, a program the driver rejects (its build log in the
    /// message), or an allocation, copy or launch the driver refuses. The message names the
    /// device (`opencl` or `opencl:N`). See `docs/opencl.md`.
    case device(String)
    /// Not a Mote error code: a bug in Mote (a Rust panic, caught before it reached Swift), or a
    /// code this version does not know.
    case `internal`(String)

    /// The stable code (1...20; 0 for ``internal(_:)``).
    public var code: Int {
        switch self {
        case .io: return 1
        case .load: return 2
        case .format: return 3
        case .unsupported: return 4
        case .missingFunctions: return 5
        case .unknownFunction: return 6
        case .argumentCount: return 7
        case .mismatch: return 8
        case .kernel: return 9
        case .callback: return 10
        case .invalidArgument: return 11
        case .npy: return 12
        case .vm: return 13
        case .outOfMemory: return 14
        case .subgraph: return 15
        case .backend: return 16
        case .busy: return 17
        case .resourceExhausted: return 18
        case .cancelled: return 19
        case .device: return 20
        case .internal: return 0
        }
    }

    /// Mote's message.
    public var message: String {
        switch self {
        case .io(let m), .load(let m), .format(let m), .unsupported(let m),
             .missingFunctions(let m), .unknownFunction(let m), .argumentCount(let m),
             .mismatch(let m), .kernel(let m), .callback(let m), .invalidArgument(let m),
             .npy(let m), .vm(let m), .outOfMemory(let m), .subgraph(let m), .backend(let m),
             .busy(let m), .resourceExhausted(let m), .cancelled(let m), .device(let m),
             .internal(let m):
            return m
        }
    }

    /// The case's name as Mote's error code list spells it (`"invalidArgument"`).
    public var name: String {
        switch self {
        case .io: return "io"
        case .load: return "load"
        case .format: return "format"
        case .unsupported: return "unsupported"
        case .missingFunctions: return "missingFunctions"
        case .unknownFunction: return "unknownFunction"
        case .argumentCount: return "argumentCount"
        case .mismatch: return "mismatch"
        case .kernel: return "kernel"
        case .callback: return "callback"
        case .invalidArgument: return "invalidArgument"
        case .npy: return "npy"
        case .vm: return "vm"
        case .outOfMemory: return "outOfMemory"
        case .subgraph: return "subgraph"
        case .backend: return "backend"
        case .busy: return "busy"
        case .resourceExhausted: return "resourceExhausted"
        case .cancelled: return "cancelled"
        case .device: return "device"
        case .internal: return "internal"
        }
    }

    /// `"<name>: <message>"`.
    public var description: String { "\(name): \(message)" }

    /// ``description``: what `localizedDescription` shows (Mote's messages are English).
    public var errorDescription: String? { description }

    /// `"org.mote"`.
    public static var errorDomain: String { "org.mote" }

    /// ``code``.
    public var errorCode: Int { code }

    /// The message under `NSLocalizedDescriptionKey`, and the case's name under `"name"`.
    public var errorUserInfo: [String: Any] {
        [NSLocalizedDescriptionKey: description, "name": name]
    }

    /// The error of a code and message (an unknown code gives ``internal(_:)``).
    public init(code: Int, message: String) {
        switch code {
        case 1: self = .io(message)
        case 2: self = .load(message)
        case 3: self = .format(message)
        case 4: self = .unsupported(message)
        case 5: self = .missingFunctions(message)
        case 6: self = .unknownFunction(message)
        case 7: self = .argumentCount(message)
        case 8: self = .mismatch(message)
        case 9: self = .kernel(message)
        case 10: self = .callback(message)
        case 11: self = .invalidArgument(message)
        case 12: self = .npy(message)
        case 13: self = .vm(message)
        case 14: self = .outOfMemory(message)
        case 15: self = .subgraph(message)
        case 16: self = .backend(message)
        case 17: self = .busy(message)
        case 18: self = .resourceExhausted(message)
        case 19: self = .cancelled(message)
        case 20: self = .device(message)
        default: self = .internal("code \(code): \(message)")
        }
    }
}

/// Run a bridge call, turning the bridge's errors into ``MoteError``.
@inline(__always)
func bridged<T>(_ body: () throws -> T) throws -> T {
    do {
        return try body()
    } catch let e as NativeError {
        switch e {
        case .Mote(let code, let message): throw MoteError(code: Int(code), message: message)
        }
    } catch let e as MoteError {
        throw e
    } catch {
        // uniffi's own errors: a caught Rust panic, or a malformed value.
        throw MoteError.internal(String(describing: error))
    }
}
