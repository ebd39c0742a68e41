import Foundation
import XCTest
@testable import Mote

/// `Tensor.image` on a stand-in for `CVPixelBuffer` (Linux has no CoreVideo): the same
/// protocol the `CVPixelBuffer` conformance implements, with padded rows as cameras give.
final class ImageTests: XCTestCase {
    struct Pixels: PixelSource {
        let pixelWidth: Int, pixelHeight: Int
        let pixelFormat: PixelFormat?
        let planes: [[UInt8]], rowBytes: [Int]
        func withPixelPlanes<R>(_ body: ([PixelPlane]) throws -> R) throws -> R {
            // Copies kept alive for the call (the arrays' buffers are only valid in their closures).
            let copies = planes.map { p -> UnsafeMutableRawBufferPointer in
                let b = UnsafeMutableRawBufferPointer.allocate(byteCount: max(p.count, 1), alignment: 16)
                b.copyBytes(from: p)
                return b
            }
            defer { copies.forEach { $0.deallocate() } }
            return try body(zip(copies, rowBytes).map { PixelPlane(base: UnsafeRawPointer($0.0.baseAddress!), bytesPerRow: $0.1) })
        }
    }

    /// A 3 x 2 BGRA image with 4 padding bytes per row; pixel (x, y) has blue 10x+y, green
    /// 100+x, red 200+y, alpha 7 (dropped).
    func bgra() -> Pixels {
        let w = 3, h = 2, stride = 4 * w + 4
        var p = [UInt8](repeating: 0xEE, count: stride * h)
        for y in 0..<h { for x in 0..<w {
            let o = y * stride + 4 * x
            p[o] = UInt8(10 * x + y); p[o + 1] = UInt8(100 + x); p[o + 2] = UInt8(200 + y); p[o + 3] = 7
        } }
        return Pixels(pixelWidth: w, pixelHeight: h, pixelFormat: .bgra8, planes: [p], rowBytes: [stride])
    }

    func testBGRAToNCHWAndNHWCWithMeanAndStd() throws {
        let mean: [Float] = [0.5, 0.25, 0.125], std: [Float] = [0.5, 2, 0.25]
        let nchw = try Tensor.image(bgra(), layout: .nchw, mean: mean, std: std)
        XCTAssertEqual(nchw.shape, [1, 3, 2, 3])
        let nhwc = try Tensor.image(bgra(), layout: .nhwc, mean: mean, std: std)
        XCTAssertEqual(nhwc.shape, [1, 2, 3, 3])
        let bgr = try Tensor.image(bgra(), layout: .nchw, channels: .bgr, mean: mean, std: std)
        let a = try nchw.toArray(of: Float.self), b = try nhwc.toArray(of: Float.self), c = try bgr.toArray(of: Float.self)
        for y in 0..<2 { for x in 0..<3 {
            let rgb: [Double] = [Double(200 + y), Double(100 + x), Double(10 * x + y)]
            for ch in 0..<3 {
                let want = (rgb[ch] / 255 - Double(mean[ch])) / Double(std[ch])
                XCTAssertEqual(Double(a[(ch * 2 + y) * 3 + x]), want, accuracy: 1e-5, "nchw c\(ch) (\(x), \(y))")
                XCTAssertEqual(Double(b[(y * 3 + x) * 3 + ch]), want, accuracy: 1e-5, "nhwc c\(ch) (\(x), \(y))")
                let wantBGR = (rgb[2 - ch] / 255 - Double(mean[ch])) / Double(std[ch])
                XCTAssertEqual(Double(c[(ch * 2 + y) * 3 + x]), wantBGR, accuracy: 1e-5, "bgr c\(ch) (\(x), \(y))")
            }
        } }
    }

    func testRGBAAndARGBReadTheirOwnChannelOrder() throws {
        let px: [UInt8] = [1, 2, 3, 4]
        let rgba = try Tensor.image(Pixels(pixelWidth: 1, pixelHeight: 1, pixelFormat: .rgba8, planes: [px], rowBytes: [4]),
                                    mean: [0, 0, 0], std: [1, 1, 1])
        let argb = try Tensor.image(Pixels(pixelWidth: 1, pixelHeight: 1, pixelFormat: .argb8, planes: [px], rowBytes: [4]),
                                    mean: [0, 0, 0], std: [1, 1, 1])
        XCTAssertEqual(try rgba.toArray(of: Float.self).map { ($0 * 255).rounded() }, [1, 2, 3])
        XCTAssertEqual(try argb.toArray(of: Float.self).map { ($0 * 255).rounded() }, [2, 3, 4])
    }

    /// NV12, full and video range: white, black and BT.601's pure red, green and blue (their
    /// published Y'CbCr values) come back within 2/255 of the RGB they encode.
    func testYUV420BiPlanarIsBT601() throws {
        // 2 x 2 blocks share one chroma sample: a 10 x 2 image of five colour blocks.
        let full: [(y: UInt8, cb: UInt8, cr: UInt8, rgb: [Float])] = [
            (255, 128, 128, [255, 255, 255]), (0, 128, 128, [0, 0, 0]),
            (76, 85, 255, [255, 0, 0]), (150, 44, 21, [0, 255, 0]), (29, 255, 107, [0, 0, 255]),
        ]
        let video: [(y: UInt8, cb: UInt8, cr: UInt8, rgb: [Float])] = [
            (235, 128, 128, [255, 255, 255]), (16, 128, 128, [0, 0, 0]),
            (81, 90, 240, [255, 0, 0]), (145, 54, 34, [0, 255, 0]), (41, 240, 110, [0, 0, 255]),
        ]
        for (range, colours) in [(true, full), (false, video)] {
            let w = 2 * colours.count, h = 2, lumaStride = w + 6, chromaStride = w + 2
            var luma = [UInt8](repeating: 0, count: lumaStride * h), chroma = [UInt8](repeating: 0, count: chromaStride)
            for (i, c) in colours.enumerated() {
                for y in 0..<2 { luma[y * lumaStride + 2 * i] = c.y; luma[y * lumaStride + 2 * i + 1] = c.y }
                chroma[2 * i] = c.cb; chroma[2 * i + 1] = c.cr
            }
            let src = Pixels(pixelWidth: w, pixelHeight: h, pixelFormat: .yuv420BiPlanar(fullRange: range),
                             planes: [luma, chroma], rowBytes: [lumaStride, chromaStride])
            let t = try Tensor.image(src, layout: .nhwc, mean: [0, 0, 0], std: [1, 1, 1])
            let v = try t.toArray(of: Float.self)
            for (i, c) in colours.enumerated() { for y in 0..<2 { for x in [2 * i, 2 * i + 1] { for ch in 0..<3 {
                XCTAssertEqual(v[(y * w + x) * 3 + ch] * 255, c.rgb[ch], accuracy: 2.5,
                               "range \(range) colour \(i) channel \(ch)")
            } } } }
        }
    }

    func testBadInputsThrow() throws {
        let bad: [(String, () throws -> Tensor)] = [
            ("unknown format", { try Tensor.image(Pixels(pixelWidth: 1, pixelHeight: 1, pixelFormat: nil, planes: [[0, 0, 0, 0]], rowBytes: [4])) }),
            ("empty", { try Tensor.image(Pixels(pixelWidth: 0, pixelHeight: 1, pixelFormat: .bgra8, planes: [[]], rowBytes: [0])) }),
            ("short rows", { try Tensor.image(Pixels(pixelWidth: 2, pixelHeight: 1, pixelFormat: .bgra8, planes: [[0, 0, 0, 0]], rowBytes: [4])) }),
            ("odd NV12", { try Tensor.image(Pixels(pixelWidth: 3, pixelHeight: 2, pixelFormat: .yuv420BiPlanar(fullRange: true), planes: [[UInt8](repeating: 0, count: 6), [0, 0, 0, 0]], rowBytes: [3, 4])) }),
            ("NV12 without chroma", { try Tensor.image(Pixels(pixelWidth: 2, pixelHeight: 2, pixelFormat: .yuv420BiPlanar(fullRange: true), planes: [[0, 0, 0, 0]], rowBytes: [2])) }),
            ("zero std", { try Tensor.image(self.bgra(), std: [1, 0, 1]) }),
            ("two means", { try Tensor.image(self.bgra(), mean: [0, 0]) }),
            ("NaN mean", { try Tensor.image(self.bgra(), mean: [.nan, 0, 0]) }),
        ]
        for (what, body) in bad {
            XCTAssertThrowsError(try body(), what) { XCTAssertEqual(($0 as? MoteError)?.code, 11, "\(what): \($0)") }
        }
    }
}
