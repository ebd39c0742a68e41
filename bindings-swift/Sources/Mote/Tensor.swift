import Foundation
// uniffi's generated module is an implementation detail: not re-exported, and no public
// declaration may mention its types (docs/uniffi.md).
#if compiler(>=6.0)
internal import MoteUniFFI
#else
@_implementationOnly import MoteUniFFI
#endif

/// The element type of a tensor (DLPack's type codes; names as TVM and numpy spell them).
public enum DType: String, Sendable, CaseIterable {
    /// 32-bit IEEE float.
    case float32
    /// 16-bit IEEE float.
    case float16
    /// 64-bit IEEE float.
    case float64
    /// bfloat16.
    case bfloat16
    /// Signed integers.
    case int8, int16, int32, int64
    /// Unsigned integers.
    case uint8, uint16, uint32, uint64
    /// Relax's `bool`, one byte per element.
    case bool

    /// Bytes per element.
    public var size: Int {
        switch self {
        case .int8, .uint8, .bool: return 1
        case .float16, .bfloat16, .int16, .uint16: return 2
        case .float32, .int32, .uint32: return 4
        case .float64, .int64, .uint64: return 8
        }
    }
}

/// A Swift type whose memory layout is one tensor element of ``dtype``.
public protocol TensorElement {
    /// The element type this Swift type stores.
    static var dtype: DType { get }
}

extension Float: TensorElement {
    /// `float32`.
    public static var dtype: DType { .float32 }
}
extension Double: TensorElement {
    /// `float64`.
    public static var dtype: DType { .float64 }
}
extension Int8: TensorElement {
    /// `int8`.
    public static var dtype: DType { .int8 }
}
extension Int16: TensorElement {
    /// `int16`.
    public static var dtype: DType { .int16 }
}
extension Int32: TensorElement {
    /// `int32`.
    public static var dtype: DType { .int32 }
}
extension Int64: TensorElement {
    /// `int64`.
    public static var dtype: DType { .int64 }
}
extension UInt8: TensorElement {
    /// `uint8`.
    public static var dtype: DType { .uint8 }
}
extension UInt16: TensorElement {
    /// `uint16`.
    public static var dtype: DType { .uint16 }
}
extension UInt32: TensorElement {
    /// `uint32`.
    public static var dtype: DType { .uint32 }
}
extension UInt64: TensorElement {
    /// `uint64`.
    public static var dtype: DType { .uint64 }
}
// Swift has no Float16 on Intel Macs (x86_64 macOS and Mac Catalyst); everywhere else it is
// IEEE binary16, the layout of `float16`.
#if !((os(macOS) || targetEnvironment(macCatalyst)) && arch(x86_64))
extension Float16: TensorElement {
    /// `float16`.
    public static var dtype: DType { .float16 }
}
#endif
extension Bool: TensorElement {
    /// `bool` (Swift's `Bool` is one byte, 0 or 1).
    public static var dtype: DType { .bool }
}

/// An n-dimensional array in Mote's memory (64-byte aligned, as Mote's kernels need).
///
/// **Copies.** The initializers from `[T]`, `Data` and `UnsafeBufferPointer` copy the
/// elements once, straight into Mote's memory (Swift arrays are not 64-byte aligned and
/// uniffi cannot hand Swift-owned memory to Rust). ``withUnsafeBytes(_:)`` and
/// ``withUnsafeMutableBytes(_:)`` read and write Mote's memory **in place, with no copy**: to
/// avoid the input copy, make a tensor with ``zeros(shape:dtype:)`` and fill it there; outputs
/// are read in place the same way. ``toArray(of:)`` and ``data()`` copy once.
///
/// **Sendable.** Yes, and checked at run time rather than by the compiler: any number of
/// readers (in-place reads, sessions using the tensor as an input) or one in-place writer; a
/// conflicting request throws ``MoteError/busy(_:)`` at once instead of racing. Writing in place
/// also requires that nobody else holds the memory (a session's stateful inputs, another
/// output of the same call that is the same tensor): else ``MoteError/invalidArgument(_:)``.
public final class Tensor: @unchecked Sendable {
    let raw: NativeTensor

    /// The dimensions.
    public let shape: [Int]
    /// The element type.
    public let dtype: DType

    init(raw: NativeTensor) throws {
        self.raw = raw
        self.shape = raw.shape().map { Int($0) }
        guard let dt = DType(rawValue: raw.dtype()) else {
            throw MoteError.unsupported("element type \(raw.dtype()) has no Swift DType")
        }
        self.dtype = dt
    }

    /// A zero-filled tensor.
    public static func zeros(shape: [Int], dtype: DType) throws -> Tensor {
        try Tensor(raw: bridged { try NativeTensor.zeros(shape: shape.map(Int64.init), dtype: dtype.rawValue) })
    }

    /// A tensor holding a copy of `bytes`, which must be exactly `shape` × `dtype.size` long.
    public convenience init(bytes: UnsafeRawBufferPointer, shape: [Int], dtype: DType) throws {
        try self.init(raw: Tensor.filled(bytes, shape: shape, dtype: dtype))
    }

    /// A tensor over the caller's memory, **without a copy** (as ONNX Runtime wraps an
    /// `NSMutableData` and Core ML an `MLMultiArray(dataPointer:...)`): sessions read it and
    /// kernel calls write it in place.
    ///
    /// `buffer` must be 64-byte aligned (Mote's kernels need it; allocate with
    /// `UnsafeMutableRawBufferPointer.allocate(byteCount:alignment: 64)`) and hold at least
    /// `shape` x `dtype.size` bytes, else this throws ``MoteError/invalidArgument(_:)`` or
    /// ``MoteError/mismatch(_:)`` and the memory stays yours (`deallocator` is not called).
    /// Otherwise Mote holds it until the tensor and every session or output holding it are
    /// gone, then calls `deallocator` once, on any thread (`nil`: nothing is called; the memory
    /// must then outlive every use). Until then the memory must stay valid, and you must not
    /// write it while a call uses the tensor, nor read it while a kernel call writes it:
    /// through ``withUnsafeBytes(_:)``/``withUnsafeMutableBytes(_:)`` Mote enforces that for
    /// you.
    public convenience init(
        borrowing buffer: UnsafeMutableRawBufferPointer, shape: [Int], dtype: DType,
        deallocator: (@Sendable (UnsafeMutableRawBufferPointer) -> Void)?
    ) throws {
        guard let base = buffer.baseAddress else {
            throw MoteError.invalidArgument("the borrowed buffer has no memory")
        }
        // The closure is @Sendable and a buffer pointer is not: carry the address and length.
        let address = UInt(bitPattern: base), count = buffer.count
        let release = deallocator.map { d in
            Deallocator { d(UnsafeMutableRawBufferPointer(start: UnsafeMutableRawPointer(bitPattern: address), count: count)) }
        }
        try self.init(raw: bridged {
            try NativeTensor.borrowing(
                address: UInt64(UInt(bitPattern: base)), byteLen: UInt64(buffer.count),
                shape: shape.map(Int64.init), dtype: dtype.rawValue, deallocator: release)
        })
    }

    /// A tensor holding a copy of `data` (raw little-endian elements of `dtype`).
    public convenience init(data: Data, shape: [Int], dtype: DType) throws {
        let raw = try data.withUnsafeBytes { try Tensor.filled($0, shape: shape, dtype: dtype) }
        try self.init(raw: raw)
    }

    /// A tensor holding a copy of `elements`.
    public convenience init<T: TensorElement>(_ elements: UnsafeBufferPointer<T>, shape: [Int]) throws {
        try self.init(raw: Tensor.filled(UnsafeRawBufferPointer(elements), shape: shape, dtype: T.dtype))
    }

    /// A tensor holding a copy of `elements`; `shape` defaults to one dimension.
    public convenience init<T: TensorElement>(_ elements: [T], shape: [Int]? = nil) throws {
        let raw = try elements.withUnsafeBytes {
            try Tensor.filled($0, shape: shape ?? [elements.count], dtype: T.dtype)
        }
        try self.init(raw: raw)
    }

    /// New Mote memory holding a copy of `bytes` (the one copy: straight into aligned memory).
    private static func filled(_ bytes: UnsafeRawBufferPointer, shape: [Int], dtype: DType) throws -> NativeTensor {
        guard shape.allSatisfy({ $0 >= 0 }) else {
            throw MoteError.mismatch("negative dimension in shape \(shape)")
        }
        let n = try checkedByteCount(of: shape, dtype: dtype)
        guard bytes.count == n else {
            throw MoteError.mismatch(
                "\(bytes.count) bytes given for a \(dtype.rawValue) tensor of shape \(shape) (\(n) bytes)")
        }
        let raw = try bridged { try NativeTensor.zeros(shape: shape.map(Int64.init), dtype: dtype.rawValue) }
        let access = try bridged { try raw.beginWrite() }
        defer { access.end() }
        if n > 0, let src = bytes.baseAddress, let dst = UnsafeMutableRawPointer(bitPattern: UInt(access.address())) {
            dst.copyMemory(from: src, byteCount: n)
        }
        return raw
    }

    /// Number of elements.
    public var count: Int { shape.reduce(1, *) }

    /// Bytes of data.
    public var byteCount: Int { Int(raw.byteLen()) }

    /// Read the tensor's memory in place (no copy). The pointer is valid only inside `body`.
    /// Throws ``MoteError/busy(_:)`` while another thread writes the tensor in place or a
    /// kernel call holds it.
    public func withUnsafeBytes<R>(_ body: (UnsafeRawBufferPointer) throws -> R) throws -> R {
        let access = try bridged { try raw.beginRead() }
        defer { access.end() }
        return try body(UnsafeRawBufferPointer(start: UnsafeRawPointer(bitPattern: UInt(access.address())), count: byteCount))
    }

    /// Write the tensor's memory in place (no copy). The pointer is valid only inside `body`.
    /// Throws ``MoteError/busy(_:)`` while anyone else reads or writes it, and
    /// ``MoteError/invalidArgument(_:)`` when its memory is shared.
    public func withUnsafeMutableBytes<R>(_ body: (UnsafeMutableRawBufferPointer) throws -> R) throws -> R {
        let access = try bridged { try raw.beginWrite() }
        defer { access.end() }
        return try body(UnsafeMutableRawBufferPointer(start: UnsafeMutableRawPointer(bitPattern: UInt(access.address())), count: byteCount))
    }

    /// The elements, copied into an array. `T` must match ``dtype`` (else
    /// ``MoteError/mismatch(_:)``).
    public func toArray<T: TensorElement>(of type: T.Type = T.self) throws -> [T] {
        guard T.dtype == dtype else {
            throw MoteError.mismatch("tensor holds \(dtype.rawValue), not \(T.dtype.rawValue)")
        }
        let n = count
        return try withUnsafeBytes { src in
            [T](unsafeUninitializedCapacity: n) { dst, initialized in
                if n > 0 { UnsafeMutableRawPointer(dst.baseAddress!).copyMemory(from: src.baseAddress!, byteCount: n * MemoryLayout<T>.stride) }
                initialized = n
            }
        }
    }

    /// The raw bytes, copied.
    public func data() throws -> Data {
        try withUnsafeBytes { Data($0) }
    }

    /// A deep copy in new memory (writable in place even when this one is shared).
    public func copy() throws -> Tensor {
        try Tensor(raw: bridged { try raw.deepCopy() })
    }
}

/// Calls a Swift deallocator when Mote lets go of borrowed memory.
private final class Deallocator: NativeDeallocator, @unchecked Sendable {
    let body: @Sendable () -> Void
    init(_ body: @escaping @Sendable () -> Void) { self.body = body }
    func release() { body() }
}

/// Bytes of a tensor of `shape` and `dtype`, or ``MoteError/invalidArgument(_:)`` when that
/// does not fit in an `Int` (a shape from user input must not trap).
func checkedByteCount(of shape: [Int], dtype: DType) throws -> Int {
    var n = dtype.size
    for d in shape {
        let (p, overflow) = n.multipliedReportingOverflow(by: d)
        guard !overflow else {
            throw MoteError.invalidArgument("a \(dtype.rawValue) tensor of shape \(shape) has more bytes than an Int holds")
        }
        n = p
    }
    return n
}

/// The arrays of a numpy `.npz` file, in file order (read by Mote's own reader: float16/32/64,
/// signed and unsigned integers, bool; uncompressed or deflated members).
public func loadNpz(_ path: String) throws -> [(name: String, tensor: Tensor)] {
    try bridged { try readNpz(path: path) }.map { (name: $0.name, tensor: try Tensor(raw: $0.tensor)) }
}
