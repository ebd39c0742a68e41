import Foundation
// uniffi's generated module is an implementation detail: not re-exported, and no public
// declaration may mention its types (docs/uniffi.md).
#if compiler(>=6.0)
internal import MoteUniFFI
#else
@_implementationOnly import MoteUniFFI
#endif

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
        MoteLogging.installDefault()
        raw = try bridged { try NativeModel.load(path: path) }
    }

    /// Load the library at `path`, as data when `codeFree` is true: nothing in the file is
    /// mapped as code or run, only its module blob is read, so this works where a process may
    /// not load code (on iOS every load is code-free). The file is mapped read-only while the
    /// model lives (weights only offloaded regions read stay in it): replace it by renaming,
    /// never rewrite it in place. A library whose program calls compiled kernels
    /// throws ``MoteError/unsupported(_:)`` naming them. See `docs/code-free.md`.
    public convenience init(path: String, codeFree: Bool) throws {
        try self.init(path: path, options: LoadOptions(codeFree: codeFree))
    }

    /// Load the library at `path` with `options`: ``init(path:codeFree:)`` plus, for a
    /// code-free load, reading the file into memory instead of mapping it
    /// (``LoadOptions/readIntoMemory``) and a bound on what decoding may allocate
    /// (``LoadOptions/memoryBudgetBytes``; a gzip `.tar` inflating past it throws
    /// ``MoteError/resourceExhausted(_:)``). An invalid combination or value throws
    /// ``MoteError/invalidArgument(_:)``; nothing is silently ignored.
    public init(path: String, options: LoadOptions) throws {
        MoteLogging.installDefault()
        var budget: UInt64?
        if let b = options.memoryBudgetBytes {
            guard b >= 1 else {
                throw MoteError.invalidArgument("LoadOptions.memoryBudgetBytes is \(b) (must be at least 1; nil keeps Mote's default)")
            }
            budget = UInt64(b)
        }
        raw = try bridged {
            try NativeModel.loadWith(path: path, options: LoadConfig(
                codeFree: options.codeFree, readIntoMemory: options.readIntoMemory, memoryBudgetBytes: budget))
        }
    }

    /// A model linked into the program as a TVM system library (built with the module attribute
    /// `system_lib_prefix`), by its prefix, e.g. `"mlp_"`. Its objects must be linked whole
    /// (`-force_load` on Apple, `--whole-archive` elsewhere) or they are dropped; an unknown
    /// prefix throws ``MoteError/load(_:)`` listing the prefixes there are. See
    /// `docs/system-lib.md`.
    public init(systemLib prefix: String) throws {
        MoteLogging.installDefault()
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

    /// The parameters of `function` (a Relax function, or a kernel of a kernel-only library):
    /// each one's name, and its dtype and shape where the model records them.
    public func parameters(of function: String) throws -> [Parameter] {
        try bridged { try raw.parameters(function: function) }.map { try Parameter(native: $0, of: function) }
    }

    /// What `run` of the Relax function `function` returns: one entry per tensor, in the order
    /// `run` gives them back, named `output` (or `output[0]`, `output[1]`... for a tuple), with
    /// dtype and shape where the model's instructions say (TVM's executables carry no return
    /// type: Mote reads them from how the function allocates and checks its results). `nil` when
    /// not even their number is known, and for a kernel-only library's kernels, which return
    /// nothing (they write into their arguments).
    public func outputs(of function: String) throws -> [Parameter]? {
        try bridged { try raw.outputs(function: function) }?.map { try Parameter(native: $0, of: function) }
    }

    /// A new session with `options`.
    public func session(_ options: SessionOptions = SessionOptions()) throws -> Session {
        try Session(model: self, options: options)
    }
}

/// A parameter of a model's function (``Model/parameters(of:)``), or one of its outputs
/// (``Model/outputs(of:)``).
public struct Parameter: Sendable, Equatable, CustomStringConvertible {
    /// One dimension of a shape.
    public enum Dimension: Sendable, Equatable, CustomStringConvertible {
        /// A size fixed when the model was compiled.
        case fixed(Int)
        /// A size chosen per call (TVM's symbolic variable, by the name the model gives it).
        case symbolic(String)

        public var description: String {
            switch self {
            case .fixed(let n): return String(n)
            case .symbolic(let name): return name
            }
        }
    }

    /// The parameter's name.
    public let name: String
    /// Its element type; `nil` for a scalar or a value that is not a tensor, or when the model
    /// does not record it.
    public let dtype: DType?
    /// Its shape; `nil` when the model does not record it.
    public let shape: [Dimension]?

    /// `"x: float32[n, 16]"`.
    public var description: String {
        let shape = self.shape.map { "[" + $0.map(\.description).joined(separator: ", ") + "]" } ?? ""
        return "\(name): \(dtype?.rawValue ?? "?")\(shape)"
    }
}

/// Options of a load (``Model/init(path:options:)``).
public struct LoadOptions: Sendable {
    /// Read the file as data, never mapped as code (`docs/code-free.md`).
    public var codeFree: Bool
    /// With ``codeFree``: read the whole file into memory instead of mapping it, so nothing of
    /// it stays mapped and a later truncation or rewrite of the file (by another process, or
    /// whoever controls it) cannot crash the process; every weight is then copied
    /// (`docs/code-free.md` §4). Use it for files the app does not control. Without
    /// ``codeFree`` the load throws ``MoteError/invalidArgument(_:)``.
    public var readIntoMemory: Bool
    /// With ``codeFree``: the most bytes decoding the file may allocate (a gzip `.tar` is
    /// inflated only up to it, else ``MoteError/resourceExhausted(_:)``); `nil`: Mote's
    /// default, 16 times the file's size plus 64 MiB, at most 4 GiB
    /// (`docs/untrusted-models.md` §3). Less than 1, or set without ``codeFree`` (a load that
    /// maps code has no budget), throws ``MoteError/invalidArgument(_:)``.
    public var memoryBudgetBytes: Int?

    /// Options with every field at its default unless given.
    public init(codeFree: Bool = false, readIntoMemory: Bool = false, memoryBudgetBytes: Int? = nil) {
        self.codeFree = codeFree
        self.readIntoMemory = readIntoMemory
        self.memoryBudgetBytes = memoryBudgetBytes
    }
}

/// Options of a ``Session``.
///
/// The four budgets bound what one call of an untrusted model may take
/// (`docs/untrusted-models.md` §3); going over one throws
/// ``MoteError/resourceExhausted(_:)`` naming it, and the session runs its next call normally.
/// `nil` keeps Mote's default; a value below 1 throws ``MoteError/invalidArgument(_:)`` when
/// the session is made (never replaced by a default).
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
    /// The most bytes of storage the session's calls may hold at once (intermediate buffers,
    /// outputs still held, offloaded regions' scratch); `nil`: half the physical memory.
    public var memoryBudgetBytes: Int?
    /// The most VM registers all frames of a call may hold together; `nil`: 2^20.
    public var maxRegisters: Int?
    /// Bytes of the calling thread's stack nested Relax calls may use; `nil`: 256 KiB (fits
    /// a 512 KiB secondary thread of iOS).
    public var stackBudgetBytes: Int?
    /// The most VM instructions one call may execute (a kernel counts one); `nil`: 2^28, about
    /// a second of a tight loop.
    public var maxInstructions: Int?
    /// The OpenCL device a model compiled for OpenCL runs on: an index into the devices OpenCL
    /// lists; `nil`: the first GPU, else the first device. An index past the list throws
    /// ``MoteError/invalidArgument(_:)`` when the session is made; no OpenCL library or no
    /// device throws ``MoteError/device(_:)``. Ignored for models without OpenCL code.
    public var openclDevice: Int?
    /// Time each OpenCL kernel launch of the session's calls. Ignored for models without
    /// OpenCL code.
    public var openclProfiling: Bool
    /// A directory of the app's own (what is in it is loaded into the OpenCL driver) where
    /// compiled OpenCL programs are kept, so that loading the same model again skips the
    /// compiler; `nil`: no cache. An empty path throws ``MoteError/invalidArgument(_:)``.
    public var openclProgramCache: String?

    /// Options with every field at its default unless given.
    public init(threads: Int? = nil, backends: [String] = [], profiling: Bool = false, poisonMemory: Bool = false,
                memoryBudgetBytes: Int? = nil, maxRegisters: Int? = nil, stackBudgetBytes: Int? = nil,
                maxInstructions: Int? = nil, openclDevice: Int? = nil, openclProfiling: Bool = false,
                openclProgramCache: String? = nil) {
        self.threads = threads
        self.backends = backends
        self.profiling = profiling
        self.poisonMemory = poisonMemory
        self.memoryBudgetBytes = memoryBudgetBytes
        self.maxRegisters = maxRegisters
        self.stackBudgetBytes = stackBudgetBytes
        self.maxInstructions = maxInstructions
        self.openclDevice = openclDevice
        self.openclProfiling = openclProfiling
        self.openclProgramCache = openclProgramCache
    }

    /// A budget as the bridge takes it: `nil` stays `nil`; below 1 throws.
    static func budget(_ name: String, _ value: Int?) throws -> UInt64? {
        guard let v = value else { return nil }
        guard v >= 1 else {
            throw MoteError.invalidArgument("SessionOptions.\(name) is \(v) (must be at least 1; nil keeps Mote's default)")
        }
        return UInt64(v)
    }
}

/// Where a ``Session`` runs its model's kernels (``Session/device``).
public enum Device: Equatable, Sendable, CustomStringConvertible {
    /// The CPU: every model without OpenCL code.
    case cpu
    /// OpenCL device `index` of the devices OpenCL lists (``SessionOptions/openclDevice``).
    case opencl(index: Int)

    /// `cpu` or `opencl:N`, as Mote's messages name devices.
    public var description: String {
        switch self {
        case .cpu: return "cpu"
        case .opencl(let index): return "opencl:\(index)"
        }
    }
}

/// Stops a ``Session``'s running call from any thread: the call throws
/// ``MoteError/cancelled(_:)`` at its next VM call or backward jump (a kernel already running finishes
/// first; an offloaded region stops between its backend segments). With no call running, the
/// session's next call is cancelled as it starts: an interrupt is never lost, and each one
/// cancels one call; the session stays usable (`docs/untrusted-models.md` §4).
///
/// **Sendable: yes.** Every handle of a session is the same handle.
public final class InterruptHandle: Sendable {
    let raw: NativeInterruptHandle

    init(raw: NativeInterruptHandle) { self.raw = raw }

    /// Cancel the session's running call, or its next one if none is running.
    public func interrupt() { raw.interrupt() }

    /// Whether an interrupt waits for a call to consume it.
    public var isPending: Bool { raw.isPending() }
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

/// The one-call-at-a-time rule of a ``Session``: callers from other threads and tasks wait
/// their turn (in no promised order), a waiting `async` run gives up when its task is
/// cancelled, and a call from inside a Mote callback (the session's own model calling Swift,
/// which calls the session again) does not wait, since the call it would wait for is the one
/// running it: Mote answers it with ``MoteError/busy(_:)``.
final class CallGate: @unchecked Sendable {
    private let condition = NSCondition()
    private var running = false

    /// Runs `body` when no other call of the session runs; `cancelled` is polled while waiting.
    func run<R>(cancelled: () -> Bool = { false }, _ body: () throws -> R) throws -> R {
        if Functions.insideCallback {
            return try body()
        }
        condition.lock()
        while running {
            if cancelled() {
                condition.unlock()
                throw CancellationError()
            }
            _ = condition.wait(until: Date(timeIntervalSinceNow: 0.01))
        }
        running = true
        condition.unlock()
        defer {
            condition.lock()
            running = false
            condition.signal()
            condition.unlock()
        }
        return try body()
    }
}

/// A session: runs a model's functions.
///
/// **Sendable: yes, calls queue.** One call runs at a time; calls from other threads and tasks
/// wait for it (as ONNX Runtime and Core ML let several callers share one session), and an
/// `async` run waiting its turn stops waiting when its task is cancelled. A call from a callback
/// of the session's own running call (the model calling Swift, which calls the same session)
/// cannot wait for the call that runs it, and throws ``MoteError/busy(_:)``. For calls in
/// parallel, use one session per thread or task; they may share a ``Model``.
public final class Session: @unchecked Sendable {
    let raw: NativeSession
    private let gate = CallGate()
    /// The model this session runs.
    public let model: Model

    init(model: Model, options: SessionOptions) throws {
        if let t = options.threads, t < 1 || t > Int(UInt32.max) {
            throw MoteError.invalidArgument("thread count \(t) (must be at least 1)")
        }
        let config = SessionConfig(
            threads: UInt32(options.threads ?? 0), backends: options.backends,
            poisonMemory: options.poisonMemory, profiling: options.profiling,
            memoryBudgetBytes: try SessionOptions.budget("memoryBudgetBytes", options.memoryBudgetBytes),
            maxRegisters: try SessionOptions.budget("maxRegisters", options.maxRegisters),
            stackBudgetBytes: try SessionOptions.budget("stackBudgetBytes", options.stackBudgetBytes),
            maxInstructions: try SessionOptions.budget("maxInstructions", options.maxInstructions),
            openclDevice: try Session.openclIndex(options.openclDevice),
            openclProfiling: options.openclProfiling,
            openclProgramCache: options.openclProgramCache)
        self.model = model
        raw = try bridged { try NativeSession(model: model.raw, config: config) }
    }

    /// The handle that stops this session's running call from another thread or task (the
    /// call throws ``MoteError/cancelled(_:)``). To stop an `async` run, cancelling its `Task`
    /// is enough.
    public var interruptHandle: InterruptHandle { InterruptHandle(raw: raw.interruptHandle()) }

    static func openclIndex(_ index: Int?) throws -> UInt32? {
        guard let i = index else { return nil }
        guard i >= 0 && i <= Int(UInt32.max) else {
            throw MoteError.invalidArgument("SessionOptions.openclDevice is \(i) (must be 0 or more)")
        }
        return UInt32(i)
    }

    /// The device this session runs its model's kernels on: ``Device/cpu`` unless the model
    /// was compiled for OpenCL.
    public var device: Device {
        get throws {
            let d = try gate.run { try bridged { try raw.device() } }
            switch d.deviceType {
            case 1: return .cpu
            case 4: return .opencl(index: Int(d.deviceId))
            default: throw MoteError.invalidArgument("unknown DLPack device type \(d.deviceType)")
            }
        }
    }

    /// Threads parallel kernels may use.
    public var threads: Int {
        get throws { Int(try gate.run { try bridged { try raw.threads() } }) }
    }

    /// Run the Relax function `function` on `inputs` (by position); returns its outputs (a
    /// tuple's fields in order). Inputs are only read, never copied.
    public func run(_ function: String, _ inputs: [Tensor]) throws -> [Tensor] {
        try gate.run { try bridged { try raw.run(function: function, inputs: inputs.map { $0.raw }) } }.map { try Tensor(raw: $0) }
    }

    /// Run `function` with inputs by parameter name (``Model/parameterNames(of:)``); every
    /// parameter must be given, and no other name (else ``MoteError/invalidArgument(_:)``).
    public func run(_ function: String, inputs: [String: Tensor]) throws -> [Tensor] {
        try run(function, ordered(function, inputs))
    }

    /// ``run(_:_:)`` off the caller's thread (on a Dispatch worker), so the main actor stays
    /// free while the model runs, honouring the task's cancellation.
    ///
    /// - Cancelling the calling `Task` while the model runs stops the call at its next VM
    ///   instruction (through the session's interrupt, `docs/untrusted-models.md` §4), and this
    ///   throws `CancellationError()`. A task cancelled before the call starts throws
    ///   `CancellationError()` without running anything. A cancellation that arrives after
    ///   the model finished changes nothing: the outputs are returned, and the session's next
    ///   call is never cancelled by it.
    /// - An interrupt through ``interruptHandle`` throws ``MoteError/cancelled(_:)`` instead.
    /// - The session is then usable again. While the session runs another call, this waits
    ///   its turn; cancelling the task meanwhile throws `CancellationError()` without running
    ///   anything, and never stops the other call.
    public func run(_ function: String, _ inputs: [Tensor]) async throws -> [Tensor] {
        let token = NativeCancelToken()
        return try await withTaskCancellationHandler {
            try Task.checkCancellation()
            return try await withCheckedThrowingContinuation { (c: CheckedContinuation<[Tensor], Error>) in
                DispatchQueue.global(qos: .userInitiated).async {
                    c.resume(with: Result { try self.run(function, inputs, cancelledBy: token) })
                }
            }
        } onCancel: {
            // May run at once (task already cancelled), concurrently with the call, or after
            // it: the token interrupts the session only while this call runs.
            token.cancel()
        }
    }

    private func run(_ function: String, _ inputs: [Tensor], cancelledBy token: NativeCancelToken) throws -> [Tensor] {
        do {
            return try gate.run(cancelled: { token.isCancelled() }) {
                try bridged {
                    try raw.runCancellable(function: function, inputs: inputs.map { $0.raw }, token: token)
                }
            }.map { try Tensor(raw: $0) }
        } catch MoteError.cancelled(let m) {
            // The task's own cancellation is Swift's CancellationError; an explicit interrupt
            // of the session (nothing cancelled the token) stays MoteError.cancelled.
            if token.isCancelled() { throw CancellationError() }
            throw MoteError.cancelled(m)
        }
    }

    /// Call the kernel `kernel` of a kernel-only library. Kernels write their outputs into
    /// tensors passed here (in place). Each tensor is held by the kernel alone for the call
    /// (others touching it meanwhile get ``MoteError/busy(_:)``); one passed twice is passed as
    /// a copy at its later positions.
    public func callKernel(_ kernel: String, _ args: [Argument]) throws {
        try gate.run { try bridged { try raw.callKernel(kernel: kernel, args: args.map { $0.native }) } }
    }

    /// Stateful API (TVM's `set_input`): keep `inputs` for ``invokeStateful(_:)``.
    public func setInput(_ function: String, _ inputs: [Tensor]) throws {
        try gate.run { try bridged { try raw.setInput(function: function, inputs: inputs.map { $0.raw }) } }
    }

    /// Stateful API (TVM's `invoke_stateful`): run `function` on the inputs set before.
    public func invokeStateful(_ function: String) throws {
        try gate.run { try bridged { try raw.invokeStateful(function: function) } }
    }

    /// Stateful API (TVM's `get_output`): the outputs of the last ``invokeStateful(_:)``.
    public func output(_ function: String) throws -> [Tensor] {
        try gate.run { try bridged { try raw.getOutput(function: function) } }.map { try Tensor(raw: $0) }
    }

    /// Time per callee since profiling started or the last call of this method (then reset).
    /// Empty unless ``SessionOptions/profiling`` or ``setProfiling(_:)`` turned it on.
    public func profile() throws -> [ProfileEntry] {
        try gate.run { try bridged { try raw.takeProfile() } }.map {
            ProfileEntry(name: $0.name, kind: $0.kind, calls: Int($0.calls), seconds: Double($0.totalNanos) / 1e9)
        }
    }

    /// Turn profiling on or off.
    public func setProfiling(_ on: Bool) throws {
        try gate.run { try bridged { try raw.setProfiling(on: on) } }
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

extension Parameter {
    /// The bridge's description of a parameter or output of `function`.
    init(native p: NativeParam, of function: String) throws {
        var dtype: DType?
        if let name = p.dtype {
            guard let d = DType(rawValue: name) else {
                throw MoteError.unsupported("`\(p.name)` of `\(function)` is \(name), which has no Swift DType")
            }
            dtype = d
        }
        self.init(name: p.name, dtype: dtype, shape: p.shape?.map { d in
            switch d {
            case .fixed(let size): return .fixed(Int(size))
            case .symbolic(let name): return .symbolic(name)
            }
        })
    }
}
