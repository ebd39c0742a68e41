//! The OpenCL layer on the machine's OpenCL device (POCL in CI, docs/opencl.md §6). These
//! tests need an OpenCL library with at least one device and fail without one; the steps of
//! scripts/test.sh that run where there is none leave them out by name (`device::opencl`).

use super::*;

fn device() -> DeviceInfo {
    let list = system_devices().expect("OpenCL devices (scripts/test.sh installs POCL)");
    let i = default_device(list).expect("at least one OpenCL device");
    list[i].clone()
}

const VADD: &str = r#"
__kernel void vadd(__global float* restrict c, __global const float* restrict a,
                   __global const float* restrict b, float alpha, int n) {
    int i = get_global_id(0);
    if (i < n) c[i] = a[i] + alpha * b[i];
}
"#;

fn floats(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_ne_bytes()).collect()
}

fn from_bytes(b: &[u8]) -> Vec<f32> {
    b.chunks_exact(4)
        .map(|c| f32::from_ne_bytes(c.try_into().unwrap()))
        .collect()
}

/// Sets `VADD`'s arguments for `c = a + alpha * a` over `n` elements.
fn doubled_plus(k: &mut Kernel, c: &Buffer, a: &Buffer, alpha: f32, n: i32) {
    for (i, arg) in [
        KernelArg::Buffer(c),
        KernelArg::Buffer(a),
        KernelArg::Buffer(a),
        KernelArg::Bytes(&alpha.to_ne_bytes()),
        KernelArg::Bytes(&n.to_ne_bytes()),
    ]
    .into_iter()
    .enumerate()
    {
        k.set_arg(i as u32, arg).unwrap();
    }
}

#[test]
fn lists_devices_with_their_limits() {
    let d = device();
    assert!(!d.name.is_empty());
    assert!(d.version.starts_with("OpenCL "), "{}", d.version);
    assert!(d.compute_units >= 1 && d.max_work_group_size >= 1);
    assert!(!d.max_work_item_sizes.is_empty());
    assert!(d.global_mem_bytes > 0 && d.max_alloc_bytes > 0);
}

#[test]
fn runs_a_kernel_with_buffers_and_scalars_and_times_it() {
    let d = device();
    let ctx = shared_context(&d).unwrap();
    assert!(
        Arc::ptr_eq(&ctx, &shared_context(&d).unwrap()),
        "one context per device"
    );
    let program = ctx.build(VADD, "").unwrap();
    let mut k = program.kernel("vadd").unwrap();
    let mut q = ctx.queue(true).unwrap();
    let n = 1000usize;
    let a: Vec<f32> = (0..n).map(|i| i as f32).collect();
    let b: Vec<f32> = (0..n).map(|i| (n - i) as f32 * 0.5).collect();
    let (ba, bb, bc) = (
        ctx.buffer(4 * n, false).unwrap(),
        ctx.buffer(4 * n, true).unwrap(),
        ctx.buffer(4 * n, false).unwrap(),
    );
    q.write(&ba, 0, &floats(&a)).unwrap();
    q.write(&bb, 0, &floats(&b)).unwrap();
    // Poison the output: a kernel that wrote nothing must not pass.
    q.write(&bc, 0, &floats(&vec![f32::NAN; n])).unwrap();
    k.set_arg(0, KernelArg::Buffer(&bc)).unwrap();
    k.set_arg(1, KernelArg::Buffer(&ba)).unwrap();
    k.set_arg(2, KernelArg::Buffer(&bb)).unwrap();
    k.set_arg(3, KernelArg::Bytes(&2.0f32.to_ne_bytes()))
        .unwrap();
    k.set_arg(4, KernelArg::Bytes(&(n as i32).to_ne_bytes()))
        .unwrap();
    let t = q.launch(&mut k, &[1024], Some(&[64])).unwrap();
    assert!(t.is_some(), "a profiling queue times its launches");
    let mut out = vec![0u8; 4 * n];
    q.read(&bc, 0, &mut out).unwrap();
    let c = from_bytes(&out);
    for i in 0..n {
        assert_eq!(c[i], a[i] + 2.0 * b[i], "element {i}");
    }
    // A second launch on the same kernel object, other scalar: its arguments are state.
    k.set_arg(3, KernelArg::Bytes(&0.0f32.to_ne_bytes()))
        .unwrap();
    q.launch(&mut k, &[n], None).unwrap();
    q.read(&bc, 0, &mut out).unwrap();
    assert_eq!(from_bytes(&out), a);
}

#[test]
fn a_rejected_source_gives_the_build_log() {
    let ctx = shared_context(&device()).unwrap();
    let e = ctx
        .build(
            "__kernel void f(__global float* x) { x[0] = undeclared_name; }",
            "",
        )
        .err()
        .expect("the driver must reject an undeclared name");
    assert_eq!(e.code, Some(sys::BUILD_PROGRAM_FAILURE), "{e}");
    assert!(
        e.message.contains("build log") && e.message.contains("undeclared_name"),
        "{e}"
    );
}

#[test]
fn a_program_binary_loads_again_and_runs() {
    let ctx = shared_context(&device()).unwrap();
    let bin = ctx.build(VADD, "").unwrap().binary().unwrap();
    assert!(!bin.is_empty());
    let program = ctx.from_binary(&bin, "").unwrap();
    let mut k = program.kernel("vadd").unwrap();
    let mut q = ctx.queue(false).unwrap();
    let (ba, bc) = (
        ctx.buffer(16, false).unwrap(),
        ctx.buffer(16, false).unwrap(),
    );
    q.write(&ba, 0, &floats(&[1.0, 2.0, 3.0, 4.0])).unwrap();
    q.write(&bc, 0, &floats(&[f32::NAN; 4])).unwrap();
    doubled_plus(&mut k, &bc, &ba, 3.0, 4);
    assert_eq!(
        q.launch(&mut k, &[4], None).unwrap(),
        None,
        "no profiling asked for"
    );
    let mut out = [0u8; 16];
    q.read(&bc, 0, &mut out).unwrap();
    assert_eq!(from_bytes(&out), [4.0, 8.0, 12.0, 16.0]);
    // Garbage is not a binary.
    assert!(ctx.from_binary(b"not a program binary", "").is_err());
}

/// Mapping (docs/opencl.md §8): what the host writes into a mapping is what the device holds
/// once it is unmapped (by drop or by `unmap`), and what the device holds is what a mapping
/// shows; a host-visible buffer on a unified-memory device maps in place, another buffer
/// still maps (the driver copies); ranges past the end and another context's buffer are
/// refused, and an empty mapping has no bytes.
#[test]
fn mapped_buffers_carry_bytes_both_ways() {
    let d = device();
    let ctx = shared_context(&d).unwrap();
    let mut q = ctx.queue(false).unwrap();
    for host_visible in [true, false] {
        let b = ctx.buffer(256, host_visible).unwrap();
        assert_eq!(b.maps_in_place(), host_visible && d.unified_memory);
        {
            let mut m = q.map(&b, 256).unwrap();
            assert_eq!(m.in_place(), b.maps_in_place());
            for (i, x) in m.bytes_mut().iter_mut().enumerate() {
                *x = i as u8;
            }
        }
        let mut back = [0u8; 256];
        q.read(&b, 0, &mut back).unwrap();
        assert!(back.iter().enumerate().all(|(i, &x)| x == i as u8));
        q.write(&b, 0, &[9u8; 256]).unwrap();
        let m = q.map(&b, 100).unwrap();
        assert_eq!(m.bytes(), &[9u8; 100][..]);
        m.unmap().unwrap();
        let e = q.map(&b, 257).err().expect("past the end");
        assert!(e.message.contains("do not fit"), "{e}");
        let m = q.map(&b, 0).unwrap();
        assert!(m.bytes().is_empty());
        m.unmap().unwrap();
    }
    let other = Context::new(&d).unwrap();
    let foreign = other.buffer(16, true).unwrap();
    assert!(q.map(&foreign, 16).is_err(), "a buffer of another context");
}

#[test]
fn bad_requests_are_errors() {
    let ctx = shared_context(&device()).unwrap();
    let mut q = ctx.queue(false).unwrap();
    let b = ctx.buffer(8, false).unwrap();
    let e = q.write(&b, 4, &[0u8; 8]).unwrap_err();
    assert!(e.message.contains("do not fit"), "{e}");
    let mut out = [0u8; 4];
    assert!(q.read(&b, usize::MAX, &mut out).is_err());
    assert!(q.copy(&b, 0, &b, 4, 8).is_err());
    let program = ctx.build(VADD, "").unwrap();
    let e = program.kernel("no_such_kernel").err().unwrap();
    assert_eq!(e.code, Some(-46), "{e}");
    let mut k = program.kernel("vadd").unwrap();
    assert!(k.set_arg(9, KernelArg::Buffer(&b)).is_err());
    assert!(q.launch(&mut k, &[1, 1, 1, 1], None).is_err());
    assert!(q.launch(&mut k, &[4], Some(&[2, 2])).is_err());
    // Zero work items: nothing to run, not an error.
    assert_eq!(q.launch(&mut k, &[0], None).unwrap(), None);
    // A buffer of another context is refused before OpenCL sees it.
    let other = Context::new(ctx.device()).unwrap();
    let foreign = other.buffer(8, false).unwrap();
    assert!(q.write(&foreign, 0, &[0u8; 8]).is_err());
    assert!(k.set_arg(0, KernelArg::Buffer(&foreign)).is_err());
}

#[test]
fn a_missing_library_names_what_was_looked_for() {
    let e = sys::open(&[
        "/nonexistent/libOpenCL.so".into(),
        "libNoSuchOpenCL.so".into(),
    ])
    .err()
    .unwrap();
    assert!(
        e.contains("/nonexistent/libOpenCL.so") && e.contains("libNoSuchOpenCL.so"),
        "{e}"
    );
    // A library that loads but is not OpenCL: the missing entry point is named.
    let e = sys::open(&["libc.so.6".into()]).err().unwrap();
    assert!(e.contains("no clGetPlatformIDs"), "{e}");
}

#[test]
fn build_logs_are_capped() {
    let long = "x".repeat(100);
    assert_eq!(cap(&long, 200), long);
    let c = cap(&long, 10);
    assert!(
        c.starts_with("xxxxxxxxxx\n...") && c.contains("90 more bytes"),
        "{c}"
    );
    assert!(cap("ééé", 3).starts_with('é'));
}

/// Four threads share one context and one program, each with its own queue, kernel and
/// buffers, launching and reading back at once; every result is checked.
#[test]
fn stress_threads_share_a_context_and_a_program() {
    let ctx = shared_context(&device()).unwrap();
    let program = Arc::new(ctx.build(VADD, "").unwrap());
    std::thread::scope(|s| {
        for t in 0..4u32 {
            let (ctx, program) = (ctx.clone(), program.clone());
            s.spawn(move || {
                let mut q = ctx.queue(t % 2 == 0).unwrap();
                let mut k = program.kernel("vadd").unwrap();
                let n = 257usize;
                let a: Vec<f32> = (0..n).map(|i| (i as u32 * 7 + t) as f32).collect();
                let (ba, bc) = (
                    ctx.buffer(4 * n, t % 2 == 1).unwrap(),
                    ctx.buffer(4 * n, false).unwrap(),
                );
                q.write(&ba, 0, &floats(&a)).unwrap();
                for round in 0..50 {
                    let alpha = (round + t) as f32;
                    q.write(&bc, 0, &floats(&vec![f32::NAN; n])).unwrap();
                    k.set_arg(0, KernelArg::Buffer(&bc)).unwrap();
                    k.set_arg(1, KernelArg::Buffer(&ba)).unwrap();
                    k.set_arg(2, KernelArg::Buffer(&ba)).unwrap();
                    k.set_arg(3, KernelArg::Bytes(&alpha.to_ne_bytes()))
                        .unwrap();
                    k.set_arg(4, KernelArg::Bytes(&(n as i32).to_ne_bytes()))
                        .unwrap();
                    q.launch(&mut k, &[n], None).unwrap();
                    let mut out = vec![0u8; 4 * n];
                    q.read(&bc, 0, &mut out).unwrap();
                    let c = from_bytes(&out);
                    for i in 0..n {
                        assert_eq!(
                            c[i],
                            a[i] + alpha * a[i],
                            "thread {t} round {round} element {i}"
                        );
                    }
                }
            });
        }
    });
}

/// The program cache (docs/opencl.md §7): built once, then loaded from the directory; a
/// damaged file is built again and replaced. Prints the build and load times.
#[test]
fn the_program_cache_skips_the_compiler_the_second_time() {
    use super::cache::{build, CacheOutcome};
    let ctx = shared_context(&device()).unwrap();
    let dir = std::env::temp_dir().join(format!("mote-clcache-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let t = std::time::Instant::now();
    let (_, how) = build(&ctx, VADD, "", &dir).unwrap();
    let first = t.elapsed();
    assert_eq!(how, CacheOutcome::Built);
    let files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    assert_eq!(files.len(), 1, "{files:?}");
    let t = std::time::Instant::now();
    let (p, how) = build(&ctx, VADD, "", &dir).unwrap();
    let second = t.elapsed();
    assert_eq!(how, CacheOutcome::Hit);
    eprintln!("OpenCL program: built in {first:?}, loaded from the cache in {second:?}");
    // The cached program computes.
    let mut k = p.kernel("vadd").unwrap();
    let mut q = ctx.queue(false).unwrap();
    let (ba, bc) = (ctx.buffer(8, false).unwrap(), ctx.buffer(8, false).unwrap());
    q.write(&ba, 0, &floats(&[1.5, -2.0])).unwrap();
    q.write(&bc, 0, &floats(&[f32::NAN; 2])).unwrap();
    doubled_plus(&mut k, &bc, &ba, 1.0, 2);
    q.launch(&mut k, &[2], None).unwrap();
    let mut out = [0u8; 8];
    q.read(&bc, 0, &mut out).unwrap();
    assert_eq!(from_bytes(&out), [3.0, -4.0]);
    // Another source: another file. A damaged file: built again, and replaced.
    let other = VADD.replace("alpha * b[i]", "alpha * b[i] + 1.0f");
    assert_eq!(
        build(&ctx, &other, "", &dir).unwrap().1,
        CacheOutcome::Built
    );
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 2);
    let bytes = std::fs::read(&files[0]).unwrap();
    std::fs::write(&files[0], &bytes[..bytes.len() / 2]).unwrap();
    assert_eq!(build(&ctx, VADD, "", &dir).unwrap().1, CacheOutcome::Built);
    assert_eq!(build(&ctx, VADD, "", &dir).unwrap().1, CacheOutcome::Hit);
    // A directory that cannot be written: built, not cached, no error.
    let blocked = dir.join("a-file");
    std::fs::write(&blocked, b"x").unwrap();
    assert_eq!(
        build(&ctx, VADD, "", &blocked.join("sub")).unwrap().1,
        CacheOutcome::Built
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// What host code calls back into (`exec.rs`, docs/opencl.md §5), called directly with the
/// arguments a broken or hostile library could pass: each is an error, never a launch with
/// them, and the right call still computes.
#[test]
fn host_callbacks_check_what_they_are_given() {
    use super::exec::{self, CallState, ClBuf, DeviceSession, ModelPrograms};
    use crate::host::abi::{type_index as ti, FfiAny};
    use crate::loader::opencl_module::{parse, tests::Payload};

    // vadd(c, a, b, alpha, n) as TVM would describe it: three buffers, a float, an int, then
    // the group count and group size.
    let src = format!("// Function: vadd\n{VADD}");
    let mut p = Payload::new("cl", 1);
    p.kernel(
        "vadd",
        &[
            [3, 64, 1, 0],
            [3, 64, 1, 0],
            [3, 64, 1, 0],
            [2, 32, 1, 0],
            [0, 32, 1, 0],
        ],
        &["blockIdx.x", "threadIdx.x"],
    )
    .str(&src);
    let module = Arc::new(parse(&p.bytes()).unwrap());
    let ctx = shared_context(&device()).unwrap();
    let programs = Arc::new(ModelPrograms::new(module.clone(), ctx.clone()));
    let mut dev = DeviceSession::new(0, programs, false, None).unwrap();
    let n = 100usize;
    let bufs: Vec<Box<ClBuf>> = (0..3)
        .map(|_| ClBuf::new(ctx.buffer(4 * n, false).unwrap()))
        .collect();
    dev.queue()
        .write(bufs[1].buffer(), 0, &floats(&vec![2.0; n]))
        .unwrap();
    dev.queue()
        .write(bufs[2].buffer(), 0, &floats(&vec![3.0; n]))
        .unwrap();
    dev.queue()
        .write(bufs[0].buffer(), 0, &floats(&vec![f32::NAN; n]))
        .unwrap();
    let buf = |i: usize| FfiAny::ptr(ti::OPAQUE_PTR, bufs[i].handle());
    let good = [
        buf(0),
        buf(1),
        buf(2),
        FfiAny::float(0.5),
        FfiAny::int(n as i64),
        FfiAny::int(2),
        FfiAny::int(64),
    ];

    // Outside a call: nothing to launch on.
    let e = exec::launch(&module, 0, &good).unwrap_err();
    assert!(e.contains("no Mote session call in progress"), "{e}");
    assert!(exec::alloc_workspace(64).is_err());

    let mut state = CallState::new(&mut dev, bufs.iter().map(|b| &**b).collect(), 1 << 20);
    state.run(|| {
        let stranger = ClBuf::new(ctx.buffer(4 * n, false).unwrap());
        let local = 0u64;
        for (args, want) in [
            (&good[..6], "takes 7 arguments"),
            (
                &[
                    buf(0),
                    buf(1),
                    FfiAny::int(5),
                    good[3],
                    good[4],
                    good[5],
                    good[6],
                ][..],
                "argument 2: expected a device buffer",
            ),
            (
                &[
                    buf(0),
                    buf(1),
                    FfiAny::ptr(ti::OPAQUE_PTR, stranger.handle()),
                    good[3],
                    good[4],
                    good[5],
                    good[6],
                ][..],
                "not a device buffer of this call",
            ),
            (
                &[
                    buf(0),
                    buf(1),
                    FfiAny::ptr(ti::OPAQUE_PTR, (&local as *const u64).cast()),
                    good[3],
                    good[4],
                    good[5],
                    good[6],
                ][..],
                "not a device buffer of this call",
            ),
            (
                &[
                    buf(0),
                    buf(1),
                    buf(2),
                    FfiAny::int(1),
                    good[4],
                    good[5],
                    good[6],
                ][..],
                "argument 3: expected a float",
            ),
            (
                &[
                    buf(0),
                    buf(1),
                    buf(2),
                    good[3],
                    FfiAny::float(1.0),
                    good[5],
                    good[6],
                ][..],
                "argument 4: expected an int",
            ),
            (
                &[
                    buf(0),
                    buf(1),
                    buf(2),
                    good[3],
                    good[4],
                    FfiAny::float(2.0),
                    good[6],
                ][..],
                "launch size",
            ),
        ] {
            let e = exec::launch(&module, 0, args).unwrap_err();
            assert!(e.contains(want), "{e:?} should contain {want:?}");
        }
        assert!(exec::launch(&module, 7, &good).is_err(), "no kernel 7");
        // __tvm_set_device: only this session's OpenCL device.
        exec::set_device(&[FfiAny::int(4), FfiAny::int(0)]).unwrap();
        for bad in [
            [FfiAny::int(1), FfiAny::int(0)],
            [FfiAny::int(4), FfiAny::int(3)],
        ] {
            assert!(exec::set_device(&bad).is_err());
        }
        assert!(exec::set_device(&[FfiAny::int(4)]).is_err());
        // Workspaces: made and freed within the call; a pointer it did not make is refused.
        let w = exec::alloc_workspace(256).unwrap();
        let e = exec::alloc_workspace(1 << 20).unwrap_err();
        assert!(e.contains("memory budget"), "over the budget left: {e}");
        assert!(exec::free_workspace((&local as *const u64).cast_mut().cast()).is_err());
        exec::free_workspace(w).unwrap();
        assert!(exec::free_workspace(w).is_err(), "freed twice");
        // Groups or sizes of 0 or less count as 1; a launch of 2 x 64 covers n = 100.
        exec::launch(&module, 0, &good).unwrap();
    });
    drop(state);
    let mut out = vec![0u8; 4 * n];
    dev.queue().read(bufs[0].buffer(), 0, &mut out).unwrap();
    assert_eq!(from_bytes(&out), vec![3.5f32; n]);
}

/// A session's dropped device storage gives its buffer back for the next allocation of the same
/// size (the same `cl_mem`), and its bytes back to the budget; a cache at its limit lets the
/// buffer go instead.
#[test]
fn dropped_device_storage_returns_its_buffer_for_reuse() {
    use crate::device::memory::BufferCache;
    use crate::device::{Device, DeviceStorage};
    let ctx = shared_context(&device()).unwrap();
    let pool = crate::tensor::Pool::with_budget(0, false, 1 << 20);
    let cache = BufferCache::new(1 << 20);
    let storage = |cache: &std::sync::Arc<BufferCache>| {
        pool.reserve(4096).unwrap();
        let b = cache
            .take(4096)
            .unwrap_or_else(|| exec::ClBuf::new(ctx.buffer(4096, false).unwrap()));
        DeviceStorage::new(
            b,
            Device::OpenCl { index: 0 },
            pool.clone(),
            Some(cache.clone()),
        )
    };
    let first = storage(&cache);
    let raw = first.buffer().raw();
    assert_eq!(pool.live_bytes(), 4096);
    drop(first);
    assert_eq!(pool.live_bytes(), 0);
    let second = storage(&cache);
    assert_eq!(second.buffer().raw(), raw, "the kept buffer is used again");
    assert!(cache.take(4096).is_none(), "and is no longer kept");
    drop(second);
    let tiny = BufferCache::new(100);
    drop(storage(&tiny));
    assert!(
        tiny.take(4096).is_none(),
        "over the cache's limit, not kept"
    );
    assert_eq!(pool.live_bytes(), 0);
}

/// `Kernel::set_arg` skips a value the kernel already holds, and only that: each launch of one
/// kernel object, whose arguments change, keep, and come back between launches, writes where
/// its last arguments say; a buffer made after another was released (whose `cl_mem` value the
/// driver may give again) is set as the new buffer it is.
#[test]
fn remembered_kernel_arguments_follow_every_change() {
    let ctx = shared_context(&device()).unwrap();
    let program = ctx.build(VADD, "").unwrap();
    let mut k = program.kernel("vadd").unwrap();
    let mut q = ctx.queue(false).unwrap();
    let n = 64usize;
    let input = |q: &mut Queue, v: f32| {
        let b = ctx.buffer(4 * n, false).unwrap();
        q.write(&b, 0, &floats(&vec![v; n])).unwrap();
        b
    };
    let (one, two) = (input(&mut q, 1.0), input(&mut q, 2.0));
    let run = |q: &mut Queue, k: &mut Kernel, c: &Buffer, a: &Buffer, alpha: f32, n: i32| {
        q.write(c, 0, &floats(&vec![f32::NAN; c.len() / 4]))
            .unwrap();
        doubled_plus(k, c, a, alpha, n);
        q.launch(k, &[64], Some(&[64])).unwrap();
        let mut out = vec![0u8; c.len()];
        q.read(c, 0, &mut out).unwrap();
        from_bytes(&out)
    };
    let out = ctx.buffer(4 * n, false).unwrap();
    assert_eq!(run(&mut q, &mut k, &out, &one, 1.0, 64), vec![2.0; n]);
    // The same arguments again (every set skipped), then each one changed in turn.
    assert_eq!(run(&mut q, &mut k, &out, &one, 1.0, 64), vec![2.0; n]);
    assert_eq!(run(&mut q, &mut k, &out, &two, 1.0, 64), vec![4.0; n]);
    assert_eq!(run(&mut q, &mut k, &out, &two, 3.0, 64), vec![8.0; n]);
    let half = run(&mut q, &mut k, &out, &two, 3.0, 32);
    assert_eq!(&half[..32], &[8.0; 32][..]);
    assert!(half[32..].iter().all(|x| x.is_nan()), "n = 32 is set");
    assert_eq!(run(&mut q, &mut k, &out, &one, 1.0, 64), vec![2.0; n]);
    // Output and input buffers replaced by new ones each round, the last round's released
    // first (at the end of its iteration).
    for round in 0..8 {
        let fresh_out = ctx.buffer(4 * n, false).unwrap();
        let v = round as f32;
        let fresh_in = input(&mut q, v);
        assert_eq!(
            run(&mut q, &mut k, &fresh_out, &fresh_in, 1.0, 64),
            vec![2.0 * v; n],
            "round {round}"
        );
    }
    // A rejected value is forgotten: the next launch sets the argument again.
    let other = Context::new(&device()).unwrap();
    let foreign = other.buffer(4 * n, false).unwrap();
    assert!(k.set_arg(0, KernelArg::Buffer(&foreign)).is_err());
    assert_eq!(run(&mut q, &mut k, &out, &two, 1.0, 64), vec![4.0; n]);
}
