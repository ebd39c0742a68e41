//! Host <-> device copy times through Mote (not a test): a `DeviceQueue` writing and reading
//! device buffers of several sizes on OpenCL device 0, and mapping them into host memory and
//! back (the zero-copy path: `DeviceQueue::map`, then `Mapped::unmap`), median of RUNS each,
//! printed as one JSON line per size. `scripts/bench-opencl.sh` sets them beside a plain C
//! program's `clEnqueueWriteBuffer`/`clEnqueueReadBuffer` and `clEnqueueMapBuffer`/
//! `clEnqueueUnmapMemObject` of the same sizes.
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
        let mut storage = q.alloc(bytes)?;
        let mut host = vec![1u8; bytes];
        let (mut w, mut r, mut m) = (Vec::new(), Vec::new(), Vec::new());
        let mut in_place = false;
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
        // As the C program does: the mappings in a loop of their own.
        for i in 0..runs + 5 {
            let t0 = Instant::now();
            let mapped = q.map(&mut storage)?;
            in_place = mapped.in_place();
            mapped.unmap()?;
            if i >= 5 {
                m.push(t0.elapsed().as_secs_f64() * 1e6);
            }
        }
        for v in [&mut w, &mut r, &mut m] {
            v.sort_by(f64::total_cmp);
        }
        println!(
            "{{\"copy_bytes\": {bytes}, \"write_us\": {:.3}, \"read_us\": {:.3}, \"map_us\": {:.3}, \
             \"in_place\": {in_place}}}",
            w[runs / 2],
            r[runs / 2],
            m[runs / 2]
        );
    }
    Ok(())
}
