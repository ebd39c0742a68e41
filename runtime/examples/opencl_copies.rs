//! Host <-> device copy times through Mote (not a test): a `DeviceQueue` writing and reading
//! device buffers of several sizes on OpenCL device 0, median of RUNS blocking copies each,
//! printed as one JSON line per size. `scripts/bench-opencl.sh` sets them beside a plain C
//! program's `clEnqueueWriteBuffer`/`clEnqueueReadBuffer` of the same sizes.
//!
//!   cargo run --release -p mote --example opencl_copies [-- DEVICE RUNS]

use std::time::Instant;

use mote::device::DeviceQueue;

fn main() -> mote::Result<()> {
    let mut args = std::env::args().skip(1);
    let index: usize = args.next().and_then(|a| a.parse().ok()).unwrap_or(0);
    let runs: usize = args
        .next()
        .and_then(|a| a.parse().ok())
        .unwrap_or(200)
        .max(1);
    let mut q = DeviceQueue::open(mote::Device::OpenCl { index }, 1 << 30)?;
    for bytes in [4usize << 10, 64 << 10, 1 << 20, 16 << 20] {
        let storage = q.alloc(bytes)?;
        let mut host = vec![1u8; bytes];
        let (mut w, mut r) = (Vec::with_capacity(runs), Vec::with_capacity(runs));
        for i in 0..runs + 5 {
            let t0 = Instant::now();
            q.write(&storage, 0, &host)?;
            let t1 = Instant::now();
            q.read(&storage, 0, &mut host)?;
            if i >= 5 {
                w.push((t1 - t0).as_secs_f64() * 1e6);
                r.push(t1.elapsed().as_secs_f64() * 1e6);
            }
        }
        w.sort_by(f64::total_cmp);
        r.sort_by(f64::total_cmp);
        println!(
            "{{\"copy_bytes\": {bytes}, \"write_us\": {:.3}, \"read_us\": {:.3}}}",
            w[runs / 2],
            r[runs / 2]
        );
    }
    Ok(())
}
