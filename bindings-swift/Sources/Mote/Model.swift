import Foundation
import MoteUniFFI

/// Mote's version.
public func moteVersion() -> String { MoteUniFFI.version() }

/// Backends that can run offloaded subgraphs here, in the default order (`"cpu"` last).
public func moteBackends() -> [String] { MoteUniFFI.backendNames() }

/// Load a backend plug-in library (docs/backend-plugin-abi.md) for every session in the
/// process; returns the backend's name (usable in ``SessionOptions/backends``).
public func moteLoadPlugin(path: String) throws -> String {
    try bridged { try loadPlugin(path: path) }
}

/// A model library compiled by TVM 0.27 (`export_library`): a Relax program or a kernel-only
/// library.
///
/// **Sendable: yes.** A model is immutable once loaded; any number of threads and tasks may
/// share one and make sessions from it at once.
public final class Model: Sendable {
    let raw: NativeModel

    /// Load the library at `path`. Throws ``MoteError/io(_:)`` for a missing file and
    /// ``MoteError/load(_:)`` for a file the system loader refuses.
    public init(path: String) throws {
        Logging.installDefault()
        raw = try bridged { try NativeModel.load(path: path) }
    }

    /// Load the library at `path`, as data when `codeFree` is true: nothing in the file is
    /// mapped as code or run, only its module blob is read, so this works where a process may
    /// not load code (on iOS every load is code-free). The file is mapped read-only while the
    /// model lives (weights only offloaded regions read stay in it): replace it by renaming,
    /// never rewrite it in place. A library whose program calls compiled kernels
    /// throws ``MoteError/unsupported(_:)`` naming them. See `docs/code-free.md`.
    public init(path: String, codeFree: Bool) throws {
        Logging.installDefault()
        raw = try bridged { try NativeModel.loadWith(path: path, codeFree: codeFree) }
    }

    /// A model linked into the program as a TVM system library (built with the module attribute
    /// `system_lib_prefix`), by its prefix, e.g. `"mlp_"`. Its objects must be linked whole
    /// (`-force_load` on Apple, `--whole-archive` elsewhere) or they are dropped; an unknown
    /// prefix throws ``MoteError/load(_:)`` listing the prefixes there are. See
    /// `docs/system-lib.md`.
    public init(systemLib prefix: String) throws {
        Logging.installDefault()
        raw = try bridged { try NativeModel.fromSystemLib(prefix: prefix) }
    }

    /// The prefixes of the models linked into this program as TVM system libraries, sorted:
    /// what ``init(systemLib:)`` accepts (and what an RPC server gives out through
    /// `ffi.SystemLib(prefix)`).
    public static var systemLibPrefixes: [String] { MoteUniFFI.systemLibPrefixes() }

    /// Whether the program calls no compiled kernel, so it can be loaded code-free.
    public var isCodeFree: Bool { raw.isCodeFree() }

    /// Whether this model was loaded code-free (read as data, nothing mapped as code).
    public var isLoadedCodeFree: Bool { raw.isLoadedCodeFree() }

    /// Load the library at `url` (a file URL).
    public convenience init(url: URL) throws {
        try self.init(path: url.path)
    }

    /// Whether the library holds kernels only: call them with ``Session/callKernel(_:_:)``.
    public var isKernelLibrary: Bool { raw.isKernelLibrary() }

    /// The functions callers can call (Relax functions, or a kernel library's kernels).
    public var functionNames: [String] { raw.functionNames() }

    /// The parameter names of the Relax function `function`, in order.
    public func parameterNames(of function: String) throws -> [String] {
        try bridged { try raw.parameterNames(function: function) }
    }

    /// A new session with `options`.
    public func session(_ options: SessionOptions = SessionOptions()) throws -> Session {
        try Session(model: self, options: options)
    }
}

/// Options of a ``Session``.
public struct SessionOptions: Sendable {
    /// Threads for parallel kernels (the calling thread counts as one); `nil`: Mote's default
    /// (the CPU count, or `MOTE_NUM_THREADS`).
    public var threads: Int?
    /// Backends for offloaded subgraphs in order of preference (`"bnns"`, `"acl"`, `"cpu"`, a
    /// plug-in's name); empty: every backend available here.
    public var backends: [String]
    /// Time every kernel and function call (read with ``Session/profile()``).
    public var profiling: Bool
    /// Fill intermediate buffers with NaN / 0xA5 before use, so work a kernel skipped shows in
    /// the outputs (for tests).
    public var poisonMemory: Bool

    /// Options with every field at its default unless given.
    public init(threads: Int? = nil, backends: [String] = [], profiling: Bool = false, poisonMemory: Bool = false) {
        self.threads = threads
        self.backends = backends
        self.profiling = profiling
        self.poisonMemory = poisonMemory
    }
}

/// Time spent in one callee of a profiled session.
public struct ProfileEntry: Sendable, Equatable {
    /// The kernel, builtin or function name.
    public let name: String
    /// `kernel`, `builtin`, `function` or `registered`.
    public let kind: String
    /// Number of calls.
    public let calls: Int
    /// Total time, in seconds.
    public let seconds: Double
}

/// An argument of a kernel call: a tensor the kernel reads or writes, or a scalar.
public enum Argument: Sendable {
    /// A tensor.
    case tensor(Tensor)
    /// An integer scalar.
    case int(Int64)
    /// A floating-point scalar.
    case float(Double)
    /// A boolean scalar.
    case bool(Bool)

    var native: NativeArg {
        switch self {
        case .tensor(let t): return .tensor(tensor: t.raw)
        case .int(let v): return .int(value: v)
        case .float(let v): return .float(value: v)
        case .bool(let v): return .bool(value: v)
        }
    }
}

/// A session: runs a model's functions.
///
/// **Sendable: yes, serialized.** One call at a time: a call while another is running (from
/// another thread or task, or from a callback of its own call) throws ``MoteError/busy(_:)``
/// instead of waiting or racing. Use one session per thread or task; they may share a
/// ``Model``.
public final class Session: @unchecked Sendable {
    let raw: NativeSession
    /// The model this session runs.
    public let model: Model

    init(model: Model, options: SessionOptions) throws {
        if let t = options.threads, t < 1 || t > Int(UInt32.max) {
            throw MoteError.invalidArgument("thread count \(t) (must be at least 1)")
        }
        self.model = model
        raw = try bridged {
            try NativeSession(model: model.raw, config: SessionConfig(
                threads: UInt32(options.threads ?? 0), backends: options.backends,
                poisonMemory: options.poisonMemory, profiling: options.profiling))
        }
    }

    /// Threads parallel kernels may use.
    public var threads: Int {
        get throws { Int(try bridged { try raw.threads() }) }
    }

    /// Run the Relax function `function` on `inputs` (by position); returns its outputs (a
    /// tuple's fields in order). Inputs are only read, never copied.
    public func run(_ function: String, _ inputs: [Tensor]) throws -> [Tensor] {
        try bridged { try raw.run(function: function, inputs: inputs.map { $0.raw }) }.map { try Tensor(raw: $0) }
    }

    /// Run `function` with inputs by parameter name (``Model/parameterNames(of:)``); every
    /// parameter must be given, and no other name (else ``MoteError/invalidArgument(_:)``).
    public func run(_ function: String, inputs: [String: Tensor]) throws -> [Tensor] {
        try run(function, ordered(function, inputs))
    }

    /// ``run(_:_:)`` off the caller's thread (on a Dispatch worker), so the main actor stays
    /// free while the model runs.
    public func run(_ function: String, _ inputs: [Tensor]) async throws -> [Tensor] {
        try await withCheckedThrowingContinuation { (c: CheckedContinuation<[Tensor], Error>) in
            DispatchQueue.global(qos: .userInitiated).async {
                c.resume(with: Result { try self.run(function, inputs) })
            }
        }
    }

    /// Call the kernel `kernel` of a kernel-only library. Kernels write their outputs into
    /// tensors passed here (in place). Each tensor is held by the kernel alone for the call
    /// (others touching it meanwhile get ``MoteError/busy(_:)``); one passed twice is passed as
    /// a copy at its later positions.
    public func callKernel(_ kernel: String, _ args: [Argument]) throws {
        try bridged { try raw.callKernel(kernel: kernel, args: args.map { $0.native }) }
    }

    /// Stateful API (TVM's `set_input`): keep `inputs` for ``invokeStateful(_:)``.
    public func setInput(_ function: String, _ inputs: [Tensor]) throws {
        try bridged { try raw.setInput(function: function, inputs: inputs.map { $0.raw }) }
    }

    /// Stateful API (TVM's `invoke_stateful`): run `function` on the inputs set before.
    public func invokeStateful(_ function: String) throws {
        try bridged { try raw.invokeStateful(function: function) }
    }

    /// Stateful API (TVM's `get_output`): the outputs of the last ``invokeStateful(_:)``.
    public func output(_ function: String) throws -> [Tensor] {
        try bridged { try raw.getOutput(function: function) }.map { try Tensor(raw: $0) }
    }

    /// Time per callee since profiling started or the last call of this method (then reset).
    /// Empty unless ``SessionOptions/profiling`` or ``setProfiling(_:)`` turned it on.
    public func profile() throws -> [ProfileEntry] {
        try bridged { try raw.takeProfile() }.map {
            ProfileEntry(name: $0.name, kind: $0.kind, calls: Int($0.calls), seconds: Double($0.totalNanos) / 1e9)
        }
    }

    /// Turn profiling on or off.
    public func setProfiling(_ on: Bool) throws {
        try bridged { try raw.setProfiling(on: on) }
    }

    private func ordered(_ function: String, _ inputs: [String: Tensor]) throws -> [Tensor] {
        let names = try model.parameterNames(of: function)
        let unknown = Set(inputs.keys).subtracting(names)
        guard unknown.isEmpty else {
            throw MoteError.invalidArgument("`\(function)` has no parameter named \(unknown.sorted()) (parameters: \(names))")
        }
        return try names.map { name in
            guard let t = inputs[name] else {
                throw MoteError.invalidArgument("`\(function)`: no input named `\(name)` (parameters: \(names))")
            }
            return t
        }
    }
}
