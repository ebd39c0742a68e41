import Foundation
// uniffi's generated module is an implementation detail: not re-exported, and no public
// declaration may mention its types (docs/uniffi.md).
#if compiler(>=6.0)
internal import MoteUniFFI
#else
@_implementationOnly import MoteUniFFI
#endif

/// A value a model passes to a Swift function registered with ``Functions/register(_:_:)``.
public enum CallbackArgument {
    /// No value.
    case none
    /// An integer.
    case int(Int64)
    /// A floating-point number.
    case float(Double)
    /// A boolean.
    case bool(Bool)
    /// A string.
    case string(String)
    /// An element type's name.
    case dtype(String)
    /// A raw pointer to a kernel's memory, valid only during the call and unchecked, as in C.
    case pointer(UnsafeMutableRawPointer?)
    /// A tensor: a copy of the caller's (writing it does not change the caller's tensor).
    case tensor(Tensor)
    /// A value Swift cannot use (a shape, tuple, function or storage), by kind.
    case other(String)
}

/// What a registered Swift function returns to the model.
public enum CallbackResult: Sendable {
    /// Nothing.
    case none
    /// An integer.
    case int(Int64)
    /// A floating-point number.
    case float(Double)
    /// A boolean.
    case bool(Bool)
    /// A tensor.
    case tensor(Tensor)
}

/// A Swift closure models call by name.
public typealias MoteFunction = @Sendable ([CallbackArgument]) throws -> CallbackResult

/// The process-wide table of functions models may call by name (TVM's global functions:
/// `T.call_packed("name", ...)` in a kernel, `R.call_packed` in Relax).
public enum Functions {
    /// Register `body` under `name`, replacing any function of that name, for every model
    /// and session in the process.
    ///
    /// `body` may run on the thread that called ``Session/run(_:_:)`` or on one of the
    /// session's worker threads, so it must be thread-safe (hence `@Sendable`). An error it
    /// throws fails the model call with ``MoteError/callback(_:)`` (or
    /// ``MoteError/kernel(_:)`` when a compiled kernel called it) carrying the error's text;
    /// the session stays usable.
    public static func register(_ name: String, _ body: @escaping MoteFunction) {
        registerFunction(name: name, function: Trampoline(body))
    }

    /// Remove the function registered under `name`; whether there was one.
    @discardableResult
    public static func unregister(_ name: String) -> Bool {
        unregisterFunction(name: name)
    }

    /// Whether a function is registered under `name`.
    public static func exists(_ name: String) -> Bool {
        functionExists(name: name)
    }

    /// Whether this thread is running a registered function for Mote (a session's call is
    /// then in progress on its behalf: see ``CallGate``).
    static var insideCallback: Bool {
        Thread.current.threadDictionary[callbackKey] != nil
    }

    static let callbackKey = "org.mote.insideCallback"
}

private final class Trampoline: NativeFunction, @unchecked Sendable {
    let body: MoteFunction
    init(_ body: @escaping MoteFunction) { self.body = body }

    func call(args: [NativeArg]) throws -> NativeArg {
        // Nested callbacks on one thread keep the mark until the outermost ends.
        let thread = Thread.current
        let outermost = thread.threadDictionary[Functions.callbackKey] == nil
        if outermost { thread.threadDictionary[Functions.callbackKey] = true }
        defer { if outermost { thread.threadDictionary.removeObject(forKey: Functions.callbackKey) } }
        do {
            let swiftArgs = try args.map(Trampoline.lift)
            switch try body(swiftArgs) {
            case .none: return .none
            case .int(let v): return .int(value: v)
            case .float(let v): return .float(value: v)
            case .bool(let v): return .bool(value: v)
            case .tensor(let t): return .tensor(tensor: t.raw)
            }
        } catch let e as MoteError {
            throw NativeError.Mote(code: 10, message: e.description)
        } catch {
            throw NativeError.Mote(code: 10, message: String(describing: error))
        }
    }

    static func lift(_ a: NativeArg) throws -> CallbackArgument {
        switch a {
        case .none: return .none
        case .int(let v): return .int(v)
        case .float(let v): return .float(v)
        case .bool(let v): return .bool(v)
        case .str(let v): return .string(v)
        case .dType(let v): return .dtype(v)
        case .pointer(let p): return .pointer(UnsafeMutableRawPointer(bitPattern: UInt(p)))
        case .tensor(let t): return .tensor(try Tensor(raw: t))
        case .other(let k): return .other(k)
        }
    }
}
