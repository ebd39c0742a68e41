import Foundation
#if canImport(CoreVideo)
import CoreVideo
#endif

/// Pixel layouts ``Tensor/image(_:layout:channels:mean:std:)`` reads: what cameras and image
/// decoders give on Apple platforms (`CVPixelBuffer`'s `kCVPixelFormatType_*`).
public enum PixelFormat: Sendable, Equatable {
    /// One plane, 4 bytes per pixel: blue, green, red, alpha (`32BGRA`, the camera's default).
    case bgra8
    /// One plane, 4 bytes per pixel: red, green, blue, alpha (`32RGBA`).
    case rgba8
    /// One plane, 4 bytes per pixel: alpha, red, green, blue (`32ARGB`).
    case argb8
    /// Two planes (`420YpCbCr8BiPlanar`, NV12): full-resolution luma, then interleaved Cb/Cr at
    /// half resolution in both directions; `fullRange` false for video range (16...235 luma,
    /// 16...240 chroma). Converted to RGB with BT.601's coefficients, as Core Image does for
    /// these buffers by default.
    case yuv420BiPlanar(fullRange: Bool)
}

/// One plane of pixel memory: its first byte, and bytes from one row to the next.
public struct PixelPlane {
    public let base: UnsafeRawPointer
    public let bytesPerRow: Int
    public init(base: UnsafeRawPointer, bytesPerRow: Int) {
        self.base = base
        self.bytesPerRow = bytesPerRow
    }
}

/// Pixels ``Tensor/image(_:layout:channels:mean:std:)`` can read: `CVPixelBuffer` on Apple
/// platforms, or any type that describes its memory this way.
public protocol PixelSource {
    var pixelWidth: Int { get }
    var pixelHeight: Int { get }
    /// The layout, or `nil` for one Mote does not read (the call then throws).
    var pixelFormat: PixelFormat? { get }
    /// Calls `body` with the planes (one for 4-byte formats, two for bi-planar YUV), readable
    /// for the duration of the call only.
    func withPixelPlanes<R>(_ body: ([PixelPlane]) throws -> R) throws -> R
}

/// How ``Tensor/image(_:layout:channels:mean:std:)`` lays out an image.
public enum ImageLayout: Sendable {
    /// `[1, 3, height, width]` (PyTorch and most ONNX exports).
    case nchw
    /// `[1, height, width, 3]` (TensorFlow and TFLite exports).
    case nhwc
}

/// The order of the three channels in the tensor.
public enum ChannelOrder: Sendable {
    case rgb
    case bgr
}

extension Tensor {
    /// A float32 tensor of an image: each channel value `v` in 0...255 becomes
    /// `(v / 255 - mean[c]) / std[c]`, for tensor channel `c` in `channels` order (`mean` and
    /// `std` are in that order too; the defaults are ImageNet's RGB ones, as torchvision's
    /// models expect); alpha is dropped. Throws
    /// ``MoteError/invalidArgument(_:)`` for an unknown pixel format, an empty image, rows
    /// shorter than the width, an odd-sized bi-planar image, or `mean`/`std` not of 3 finite
    /// values (`std` non-zero).
    public static func image(
        _ source: PixelSource, layout: ImageLayout = .nchw, channels: ChannelOrder = .rgb,
        mean: [Float] = [0.485, 0.456, 0.406], std: [Float] = [0.229, 0.224, 0.225]
    ) throws -> Tensor {
        guard let format = source.pixelFormat else {
            throw MoteError.invalidArgument("the pixel buffer's format is not one Mote reads (BGRA, RGBA, ARGB, NV12)")
        }
        let w = source.pixelWidth, h = source.pixelHeight
        guard w > 0, h > 0 else { throw MoteError.invalidArgument("an image of \(w) x \(h) pixels") }
        guard mean.count == 3, std.count == 3, (mean + std).allSatisfy({ $0.isFinite }), !std.contains(0) else {
            throw MoteError.invalidArgument("mean and std need 3 finite values each, std non-zero: \(mean), \(std)")
        }
        if case .yuv420BiPlanar = format, w % 2 != 0 || h % 2 != 0 {
            throw MoteError.invalidArgument("a bi-planar 4:2:0 image of odd size \(w) x \(h)")
        }
        let shape = layout == .nchw ? [1, 3, h, w] : [1, h, w, 3]
        let t = try Tensor.zeros(shape: shape, dtype: .float32)
        // Per tensor channel c: value = v * a[c] + b[c].
        let a = (0..<3).map { 1 / (255 * std[$0]) }, b = (0..<3).map { -mean[$0] / std[$0] }
        let (a0, a1, a2, b0, b1, b2) = (a[0], a[1], a[2], b[0], b[1], b[2])
        let bgr = channels == .bgr, planeSize = h * w
        try source.withPixelPlanes { planes in
            let need = { (i: Int, rowBytes: Int) throws in
                guard planes.count > i, planes[i].bytesPerRow >= rowBytes else {
                    throw MoteError.invalidArgument("plane \(i) of the pixel buffer is missing or its rows are shorter than \(rowBytes) bytes")
                }
            }
            try t.withUnsafeMutableBytes { raw in
                let out = raw.bindMemory(to: Float.self)
                @inline(__always) func put(_ x: Int, _ y: Int, _ r: Float, _ g: Float, _ bl: Float) {
                    let (v0, v2) = bgr ? (bl, r) : (r, bl)
                    if layout == .nchw {
                        let i = y * w + x
                        out[i] = v0 * a0 + b0
                        out[planeSize + i] = g * a1 + b1
                        out[2 * planeSize + i] = v2 * a2 + b2
                    } else {
                        let i = (y * w + x) * 3
                        out[i] = v0 * a0 + b0
                        out[i + 1] = g * a1 + b1
                        out[i + 2] = v2 * a2 + b2
                    }
                }
                switch format {
                case .bgra8, .rgba8, .argb8:
                    try need(0, 4 * w)
                    let (r, g, bl) = format == .bgra8 ? (2, 1, 0) : format == .rgba8 ? (0, 1, 2) : (1, 2, 3)
                    for y in 0..<h {
                        let row = planes[0].base.advanced(by: y * planes[0].bytesPerRow).assumingMemoryBound(to: UInt8.self)
                        for x in 0..<w {
                            let p = row.advanced(by: 4 * x)
                            put(x, y, Float(p[r]), Float(p[g]), Float(p[bl]))
                        }
                    }
                case .yuv420BiPlanar(let full):
                    try need(0, w)
                    try need(1, w)
                    for y in 0..<h {
                        let luma = planes[0].base.advanced(by: y * planes[0].bytesPerRow).assumingMemoryBound(to: UInt8.self)
                        let chroma = planes[1].base.advanced(by: (y / 2) * planes[1].bytesPerRow).assumingMemoryBound(to: UInt8.self)
                        for x in 0..<w {
                            var yv = Float(luma[x])
                            var cb = Float(chroma[2 * (x / 2)]) - 128, cr = Float(chroma[2 * (x / 2) + 1]) - 128
                            if !full {
                                yv = (yv - 16) * (255 / 219)
                                cb *= 255 / 224
                                cr *= 255 / 224
                            }
                            let clamp = { (v: Float) in min(max(v, 0), 255) }
                            put(x, y, clamp(yv + 1.402 * cr),
                                clamp(yv - 0.344136 * cb - 0.714136 * cr),
                                clamp(yv + 1.772 * cb))
                        }
                    }
                }
            }
        }
        return t
    }
}

#if canImport(CoreVideo)
extension CVPixelBuffer: PixelSource {
    public var pixelWidth: Int { CVPixelBufferGetWidth(self) }
    public var pixelHeight: Int { CVPixelBufferGetHeight(self) }

    public var pixelFormat: PixelFormat? {
        switch CVPixelBufferGetPixelFormatType(self) {
        case kCVPixelFormatType_32BGRA: return .bgra8
        case kCVPixelFormatType_32RGBA: return .rgba8
        case kCVPixelFormatType_32ARGB: return .argb8
        case kCVPixelFormatType_420YpCbCr8BiPlanarFullRange: return .yuv420BiPlanar(fullRange: true)
        case kCVPixelFormatType_420YpCbCr8BiPlanarVideoRange: return .yuv420BiPlanar(fullRange: false)
        default: return nil
        }
    }

    public func withPixelPlanes<R>(_ body: ([PixelPlane]) throws -> R) throws -> R {
        guard CVPixelBufferLockBaseAddress(self, .readOnly) == kCVReturnSuccess else {
            throw MoteError.invalidArgument("the pixel buffer could not be locked for reading")
        }
        defer { CVPixelBufferUnlockBaseAddress(self, .readOnly) }
        var planes: [PixelPlane] = []
        if CVPixelBufferIsPlanar(self) {
            for i in 0..<CVPixelBufferGetPlaneCount(self) {
                guard let base = CVPixelBufferGetBaseAddressOfPlane(self, i) else {
                    throw MoteError.invalidArgument("plane \(i) of the pixel buffer has no memory")
                }
                planes.append(PixelPlane(base: UnsafeRawPointer(base), bytesPerRow: CVPixelBufferGetBytesPerRowOfPlane(self, i)))
            }
        } else {
            guard let base = CVPixelBufferGetBaseAddress(self) else {
                throw MoteError.invalidArgument("the pixel buffer has no memory")
            }
            planes.append(PixelPlane(base: UnsafeRawPointer(base), bytesPerRow: CVPixelBufferGetBytesPerRow(self)))
        }
        return try body(planes)
    }
}
#endif
