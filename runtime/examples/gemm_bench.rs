//! GEMM benchmark (not a test): GFLOP/s of `matrixmultiply::sgemm`, of the cpu backend's
//! general GEMM at every ISA level this CPU has, and of its packed-weight GEMM (weight packed
//! before timing, as in a prepared subgraph) on convolution-shaped products, one thread.
//!
//!   cargo run --release -p mote --example gemm_bench [-- SECONDS_PER_CELL]
//!
//! Rows are `M x K x N` with `C[M, N] = A[M, K] * B[K, N]`: NHWC convolutions have M = output
//! pixels and N = output channels (ResNet-50 and MobileNetV2 layers at 224x224); NCHW ones the
//! transpose (M = channels, N = pixels). Candidates run interleaved, best of several rounds.
//! A second table times whole convolutions (NHWC and NCHW) through the cpu backend's kernels.

use std::time::Instant;

fn values(len: usize, seed: u32) -> Vec<f32> {
    let mut s = seed.wrapping_mul(2_654_435_761) | 1;
    (0..len)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 17;
            s ^= s << 5;
            (s >> 8) as f32 / (1u32 << 24) as f32 - 0.5
        })
        .collect()
}

/// Best seconds per call of `f` over rounds of about `budget` seconds in total.
fn time(budget: f64, mut f: impl FnMut()) -> f64 {
    f();
    let t0 = Instant::now();
    f();
    let once = t0.elapsed().as_secs_f64().max(1e-7);
    let reps = ((budget / 3.0 / once) as usize).clamp(1, 10_000);
    let mut best = f64::MAX;
    for _ in 0..3 {
        let t = Instant::now();
        for _ in 0..reps {
            f();
        }
        best = best.min(t.elapsed().as_secs_f64() / reps as f64);
    }
    best
}

fn main() {
    let budget: f64 = std::env::args()
        .nth(1)
        .and_then(|s| s.parse().ok())
        .unwrap_or(0.3);
    let isas = mote::backend::cpu::supported_isas();
    println!(
        "# cpu isa: {} (supported: {})",
        mote::backend::cpu::isa(),
        isas.join(", ")
    );
    // (name, M, K, N) in the NHWC orientation.
    let nhwc: &[(&str, usize, usize, usize)] = &[
        ("mbv2 stem 3x3 3->32 /2", 12544, 27, 32),
        ("mbv2 1x1 16->96 @112", 12544, 16, 96),
        ("mbv2 1x1 144->24 @56", 3136, 144, 24),
        ("mbv2 1x1 24->144 @56", 3136, 24, 144),
        ("mbv2 1x1 192->32 @28", 784, 192, 32),
        ("mbv2 1x1 384->64 @14", 196, 384, 64),
        ("mbv2 1x1 960->160 @7", 49, 960, 160),
        ("mbv2 1x1 320->1280 @7", 49, 320, 1280),
        ("r50 1x1 64->64 @56", 3136, 64, 64),
        ("r50 3x3 64->64 @56", 3136, 576, 64),
        ("r50 1x1 64->256 @56", 3136, 64, 256),
        ("r50 3x3 128 @28", 784, 1152, 128),
        ("r50 1x1 128->512 @28", 784, 128, 512),
        ("r50 3x3 256 @14", 196, 2304, 256),
        ("r50 1x1 1024->256 @14", 196, 1024, 256),
        ("r50 3x3 512 @7", 49, 4608, 512),
        ("r50 1x1 512->2048 @7", 49, 512, 2048),
        ("small cnn 3x3 3->8 @16", 256, 27, 8),
    ];
    let mut header = String::from("| shape | M x K x N | matrixmultiply |");
    for i in &isas {
        header += &format!(" mote {i} |");
    }
    let packed: Vec<&str> = isas
        .iter()
        .copied()
        .filter(|i| mote::backend::cpu::BenchPacked::new(i, &[0.0], 1, 1).is_some())
        .collect();
    for i in &packed {
        header += &format!(" packed {i} |");
    }
    println!("{header}");
    println!("|{}", "---|".repeat(3 + isas.len() + packed.len()));
    for nchw in [false, true] {
        for &(name, pm, k, pn) in nhwc {
            if std::env::var("CONV_ONLY").is_ok() {
                continue;
            }
            let (m, n) = if nchw { (pn, pm) } else { (pm, pn) };
            let a = values(m * k, 1);
            let b = values(k * n, 2);
            let mut c = vec![0.0f32; m * n];
            let flop = 2.0 * (m * n * k) as f64;
            let mm = time(budget, || {
                // SAFETY: dense row-major operands of exactly m*k, k*n and m*n floats.
                unsafe {
                    matrixmultiply::sgemm(
                        m,
                        k,
                        n,
                        1.0,
                        a.as_ptr(),
                        k as isize,
                        1,
                        b.as_ptr(),
                        n as isize,
                        1,
                        0.0,
                        c.as_mut_ptr(),
                        n as isize,
                        1,
                    )
                }
            });
            let mut row = format!(
                "| {name}{} | {m}x{k}x{n} | {:.1} |",
                if nchw { " (NCHW)" } else { "" },
                flop / mm / 1e9
            );
            for isa in &isas {
                let t = time(budget, || {
                    mote::backend::cpu::bench_sgemm(isa, m, k, n, &a, &b, &mut c)
                        .expect("own sgemm");
                });
                row += &format!(" {:.1} |", flop / t / 1e9);
            }
            for isa in &packed {
                // The packed kernels serve NHWC convolutions (B = the weight, packed once);
                // NCHW ones keep the crate (docs/cpu-kernels.md).
                if nchw {
                    row += " - |";
                    continue;
                }
                let pb = mote::backend::cpu::BenchPacked::new(isa, &b, k, n).expect("packed");
                let t = time(budget, || pb.run(m, &a, &mut c).expect("packed gemm"));
                row += &format!(" {:.1} |", flop / t / 1e9);
            }
            println!("{row}");
        }
    }
    // Whole convolutions through the cpu backend (im2col/direct/depthwise + GEMM), 1 thread.
    let convs: &[(&str, [usize; 9])] = &[
        ("small cnn 3x3 3->8 @16", [1, 3, 16, 16, 8, 3, 1, 1, 1]),
        (
            "mbv2 stem 3x3 3->32 /2 @224",
            [1, 3, 224, 224, 32, 3, 2, 1, 1],
        ),
        ("mbv2 dw 3x3 32 @112", [1, 32, 112, 112, 32, 3, 1, 1, 32]),
        ("mbv2 dw 3x3 96 /2 @112", [1, 96, 112, 112, 96, 3, 2, 1, 96]),
        ("dw 3x3 32 /2 @112", [1, 32, 112, 112, 32, 3, 2, 1, 32]),
        ("dw 3x3 96 @112", [1, 96, 112, 112, 96, 3, 1, 1, 96]),
        ("dw 3x3 96 /2 @56", [1, 96, 56, 56, 96, 3, 2, 1, 96]),
        ("mbv2 dw 3x3 144 @56", [1, 144, 56, 56, 144, 3, 1, 1, 144]),
        ("mbv2 dw 3x3 576 @14", [1, 576, 14, 14, 576, 3, 1, 1, 576]),
        ("mbv2 1x1 144->24 @56", [1, 144, 56, 56, 24, 1, 1, 0, 1]),
        ("r50 3x3 64 @56", [1, 64, 56, 56, 64, 3, 1, 1, 1]),
        ("r50 3x3 256 @14", [1, 256, 14, 14, 256, 3, 1, 1, 1]),
    ];
    println!();
    let mut header = String::from("| conv (1 thread, us) |");
    for i in &isas {
        header += &format!(" NHWC {i} | NCHW {i} |");
    }
    println!("{header}");
    println!("|{}", "---|".repeat(1 + 2 * isas.len()));
    for &(name, shape) in convs {
        if std::env::var("CONV_ONLY").is_ok_and(|f| !name.contains(&f)) {
            continue;
        }
        let mut row = format!("| {name} |");
        for isa in &isas {
            for nchw in [false, true] {
                let once = mote::backend::cpu::bench_conv(isa, nchw, shape, 1).expect("conv");
                let reps = ((budget / once.max(1e-7)) as usize).clamp(3, 2000);
                let t = mote::backend::cpu::bench_conv(isa, nchw, shape, reps).expect("conv");
                row += &format!(" {:.1} |", t * 1e6);
            }
        }
        println!("{row}");
    }

    // Quantized (uint8) NHWC convolutions on their exact accumulators: the centered-f64 GEMM
    // against each 8-bit GEMM level.
    let qconvs: &[(&str, [usize; 9])] = &[
        ("mbv2 1x1 144->24 @56", [1, 144, 56, 56, 24, 1, 1, 0, 1]),
        ("mbv2 1x1 96->576 @14", [1, 96, 14, 14, 576, 1, 1, 0, 1]),
        ("r50 3x3 64 @56", [1, 64, 56, 56, 64, 3, 1, 1, 1]),
        ("r50 1x1 256->64 @56", [1, 256, 56, 56, 64, 1, 1, 0, 1]),
        ("r50 3x3 256 @14", [1, 256, 14, 14, 256, 3, 1, 1, 1]),
        ("r50 1x1 512->2048 @7", [1, 512, 7, 7, 2048, 1, 1, 0, 1]),
    ];
    let mut kernels = vec!["f64".to_string()];
    kernels.extend(mote::backend::cpu::bench_qlevels());
    println!();
    let mut header = String::from("| uint8 conv (1 thread, us) |");
    for k in &kernels {
        header += &format!(" {k} |");
    }
    println!("{header}");
    println!("|{}", "---|".repeat(1 + kernels.len()));
    for &(name, shape) in qconvs {
        let mut row = format!("| {name} |");
        for k in &kernels {
            let once = mote::backend::cpu::bench_qconv(k, shape, 1).expect("qconv");
            let reps = ((budget / once.max(1e-7)) as usize).clamp(3, 2000);
            let t = mote::backend::cpu::bench_qconv(k, shape, reps).expect("qconv");
            row += &format!(" {:.1} |", t * 1e6);
        }
        println!("{row}");
    }
}
