//! Libraries compiled by TVM for OpenCL, run by Mote on the machine's OpenCL device (POCL in
//! CI), against the same module compiled for the CPU and run by TVM (the OpenCL zoo,
//! `scripts/opencl-zoo.sh`, folder in `MOTE_OPENCL_ZOO_DIR`; docs/opencl.md §6).

// One module, so that runs without an OpenCL device (the trixie chroot) can leave these tests
// out by name: `--skip opencl_zoo::`.
mod opencl_zoo {
    use std::path::PathBuf;

    use mote::{DType, Error, LoadOptions, Model, SessionOptions, Tensor, Value};
    use mote_tests::{kernel_args, load_indexed_in, manifest_in, run_kernel_cases};

    /// The OpenCL zoo. Tests never skip: without `MOTE_OPENCL_ZOO_DIR` they fail.
    fn dir() -> PathBuf {
        match std::env::var_os("MOTE_OPENCL_ZOO_DIR") {
            Some(d) => PathBuf::from(d),
            None => panic!(
                "MOTE_OPENCL_ZOO_DIR is not set: run `scripts/opencl-zoo.sh` and export \
                 MOTE_OPENCL_ZOO_DIR=<its output> (scripts/test.sh does this)"
            ),
        }
    }

    fn entry(name: &str) -> serde_json::Value {
        manifest_in(&dir())["models"]
            .as_array()
            .expect("models")
            .iter()
            .find(|m| m["name"] == name)
            .unwrap_or_else(|| panic!("`{name}` is not in the OpenCL zoo"))
            .clone()
    }

    fn path(name: &str) -> PathBuf {
        dir().join(entry(name)["file"].as_str().expect("file"))
    }

    fn kernel_library(name: &str) {
        let e = entry(name);
        assert_eq!(e["device"], "opencl", "{name}");
        run_kernel_cases(&dir(), name, &e);
    }

    macro_rules! kernel_libraries {
        ($($name:ident),* $(,)?) => {
            $( #[test] fn $name() { kernel_library(stringify!($name)); } )*

            /// Every model of the OpenCL zoo has a test here (the Relax ones below).
            #[test]
            fn every_opencl_zoo_model_has_a_test() {
                let tested = [$(stringify!($name),)* "mlp_cl", "cnn_cl", "mlp_dyn_cl"];
                for m in manifest_in(&dir())["models"].as_array().unwrap() {
                    let n = m["name"].as_str().unwrap();
                    assert!(tested.contains(&n), "OpenCL zoo model `{n}` has no test");
                }
            }
        };
    }

    kernel_libraries!(gemm_cl, vadd_cl, scale2d_cl, rowsum_cl, twostage_cl);

    /// The first case of `name` that has expected outputs: (function, case record).
    fn first_case(name: &str) -> (String, serde_json::Value) {
        let e = entry(name);
        let c = e["cases"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["expected"].is_string())
            .expect("a case with outputs")
            .clone();
        (c["function"].as_str().unwrap().to_string(), c)
    }

    /// What the `opencl` module says of each kernel, as TVM wrote it (docs/tvm-format.md §10.3,
    /// §10.5): buffers first, then scalars by name; launch tags in order of first use.
    #[test]
    fn device_kernels_describe_the_opencl_module() {
        let k = Model::load(path("scale2d_cl")).unwrap().device_kernels();
        assert_eq!(k.len(), 1);
        assert_eq!(
            (k[0].device, k[0].name.as_str()),
            ("opencl", "scale2d_kernel")
        );
        assert_eq!(k[0].params, ["buffer", "buffer", "int32", "int64", "int64"]);
        assert_eq!(
            k[0].launch,
            ["blockIdx.y", "blockIdx.x", "threadIdx.y", "threadIdx.x"]
        );
        let k = Model::load(path("gemm_cl")).unwrap().device_kernels();
        assert_eq!(
            k[0].params,
            ["buffer", "buffer", "buffer", "int32", "int32"]
        );
        let names: Vec<String> = Model::load(path("twostage_cl"))
            .unwrap()
            .device_kernels()
            .into_iter()
            .map(|k| k.name)
            .collect();
        assert_eq!(names, ["twostage_kernel", "twostage_kernel_1"]);
    }

    /// A session with a program cache writes one file per kernel it builds; a new load of the
    /// model with the same cache reuses them (the files are not written again) and computes
    /// the same answers (docs/opencl.md §7). Each load is of its own copy of the file: loads of
    /// one file share one mapping, and with it the programs already built in this process.
    #[test]
    fn a_second_load_takes_its_programs_from_the_cache() {
        use std::os::unix::fs::MetadataExt;
        let cache = std::env::temp_dir().join(format!("mote-opencl-cache-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&cache);
        let (function, case) = first_case("twostage_cl");
        let want = load_indexed_in(&dir(), case["expected"].as_str().unwrap(), "out");
        let out = case["outputs"][0].as_u64().unwrap() as usize;
        let mut inodes = Vec::new();
        std::fs::create_dir_all(&cache).unwrap();
        for load in 0..2 {
            let copy = cache.with_extension(format!("{load}.so"));
            std::fs::copy(path("twostage_cl"), &copy).unwrap();
            let model = Model::load(&copy).unwrap();
            let mut s = model
                .session_with(SessionOptions {
                    opencl_program_cache: Some(cache.clone()),
                    ..Default::default()
                })
                .unwrap();
            let mut args = kernel_args(&dir(), &case);
            s.call_kernel(&function, &mut args).unwrap();
            mote_tests::assert_close(
                &format!("load {load}"),
                args[out].as_tensor().unwrap(),
                &want[0],
                1e-6,
                1e-6,
            );
            let mut files: Vec<(String, u64)> = std::fs::read_dir(&cache)
                .unwrap()
                .map(|e| {
                    let e = e.unwrap();
                    (
                        e.file_name().to_string_lossy().into_owned(),
                        e.metadata().unwrap().ino(),
                    )
                })
                .collect();
            files.sort();
            assert_eq!(
                files.len(),
                2,
                "one program per kernel of the module: {files:?}"
            );
            inodes.push(files);
            drop(s);
            drop(model);
            std::fs::remove_file(&copy).unwrap();
        }
        assert_eq!(
            inodes[0], inodes[1],
            "the second load wrote its programs again"
        );
        std::fs::remove_dir_all(&cache).unwrap();
    }

    #[test]
    fn profiling_times_every_launch_of_the_call() {
        let model = Model::load(path("gemm_cl")).unwrap();
        let (function, case) = first_case("gemm_cl");
        let mut s = model
            .session_with(SessionOptions {
                opencl_profiling: true,
                ..Default::default()
            })
            .unwrap();
        for _ in 0..2 {
            s.call_kernel(&function, &mut kernel_args(&dir(), &case))
                .unwrap();
            // The host code launches the kernel once per pair of outer tiles: 4 x 4.
            let t = s.device_times();
            assert_eq!(t.len(), 16, "{t:?}");
            assert!(
                t.iter().all(|(k, ns)| k == "gemm_gpu_kernel" && *ns > 0),
                "{t:?}"
            );
        }
        let mut plain = model.session().unwrap();
        plain
            .call_kernel(&function, &mut kernel_args(&dir(), &case))
            .unwrap();
        assert!(plain.device_times().is_empty(), "no profiling asked for");
    }

    #[test]
    fn device_choice_and_code_free_loads_are_checked() {
        let e = Model::load(path("vadd_cl"))
            .unwrap()
            .session_with(SessionOptions {
                opencl_device: Some(99),
                ..Default::default()
            })
            .err()
            .expect("there is no OpenCL device 99");
        assert!(
            matches!(&e, Error::InvalidArgument(m) if m.contains("opencl_device 99")),
            "{e}"
        );
        let e = Model::load_with(path("vadd_cl"), LoadOptions::default().code_free(true))
            .err()
            .expect("a code-free load runs no host code");
        assert!(
            matches!(&e, Error::Unsupported(m) if m.contains("vadd_kernel")),
            "{e}"
        );
        let e = Model::load_with(path("mlp_cl"), LoadOptions::default().code_free(true))
            .err()
            .expect("a Relax model's host code launches its kernels");
        assert!(
            matches!(&e, Error::Unsupported(m) if m.contains("cannot be loaded code-free") && m.contains("_kernel")),
            "{e}"
        );
    }

    /// OpenCL C the driver rejects (the vector add's source with `__kernel` misspelled in the
    /// file, the same length, so the module still decodes): the model loads, and its call is
    /// `Error::Device` carrying the driver's build log, on every call (a failed build is kept
    /// as a failure, not retried as if it had worked).
    #[test]
    fn a_source_the_driver_rejects_is_a_device_error_with_the_build_log() {
        let bytes = std::fs::read(path("vadd_cl")).unwrap();
        let mut bad = bytes.clone();
        let at = bad
            .windows(9)
            .position(|w| w == b"__kernel ")
            .expect("the source is in the file");
        bad[at..at + 9].copy_from_slice(b"__kernxl ");
        let file = std::env::temp_dir().join(format!("mote-bad-source-{}.so", std::process::id()));
        std::fs::write(&file, &bad).unwrap();
        let model = Model::load(&file).unwrap();
        let (function, case) = first_case("vadd_cl");
        let mut s = model.session().unwrap();
        for _ in 0..2 {
            let mut args = kernel_args(&dir(), &case);
            let e = s.call_kernel(&function, &mut args).unwrap_err();
            assert_eq!(e.code(), mote::ErrorCode::Device, "{e}");
            assert!(
                matches!(&e, Error::Device { message, .. } if message.contains("__kernxl")),
                "the build log names the bad token: {e}"
            );
        }
        std::fs::remove_file(&file).unwrap();
    }

    /// A Relax model on the device: a wrong input is the VM's typed error and the session goes
    /// on; its weights' device copies count in the memory budget (a budget smaller than them
    /// refuses the session), and so does the storage a call allocates.
    #[test]
    fn relax_on_the_device_checks_inputs_and_budgets() {
        let model = Model::load(path("mlp_cl")).unwrap();
        let (function, case) = first_case("mlp_cl");
        let inputs = load_indexed_in(&dir(), case["inputs"].as_str().unwrap(), "arg");
        let want = load_indexed_in(&dir(), case["expected"].as_str().unwrap(), "out");
        let mut s = model.session().unwrap();
        let weights = 4 * (16 * 32 + 32 + 32 * 8 + 8);
        let held = s.memory_in_use();
        assert!(held >= weights, "weights on the device: {held} bytes held");
        let e = s
            .run(&function, &[Tensor::zeros(&[1, 15], DType::F32).unwrap()])
            .unwrap_err();
        assert!(matches!(e, Error::Mismatch(_)), "{e}");
        let got = s.run(&function, &inputs).unwrap();
        mote_tests::assert_close("after an error", &got[0], &want[0], 1e-5, 1e-5);
        assert_eq!(s.memory_in_use(), held, "the call's storage was given back");

        let e = model
            .session_with(SessionOptions {
                memory_budget_bytes: weights / 2,
                ..Default::default()
            })
            .err()
            .expect("the weights do not fit");
        assert!(matches!(e, Error::ResourceExhausted { .. }), "{e}");
        // Room for the weights and the input, not for the first intermediate (1 x 32 f32).
        let mut tight = model
            .session_with(SessionOptions {
                memory_budget_bytes: held + 4 * 16 + 64,
                ..Default::default()
            })
            .unwrap();
        let e = tight.run(&function, &inputs).unwrap_err();
        assert!(matches!(e, Error::ResourceExhausted { .. }), "{e}");
    }

    /// The zero-copy path (docs/opencl.md §8): an input written straight into a mapped device
    /// tensor and the output read where the kernels left it give TVM's results; on POCL, which
    /// shares memory with the host, the mapping is the device's own bytes. Shared tensors and
    /// wrong element types are refused, and what a mapping writes reaches the device (a second
    /// input, written over the first through a new mapping, gives the second result).
    #[test]
    fn mapped_device_tensors_carry_inputs_and_outputs_in_place() {
        let model = Model::load(path("mlp_cl")).unwrap();
        let (function, case) = first_case("mlp_cl");
        let inputs = load_indexed_in(&dir(), case["inputs"].as_str().unwrap(), "arg");
        let want = load_indexed_in(&dir(), case["expected"].as_str().unwrap(), "out");
        let mut s = mote_tests::poisoned_session(&model, 1);
        let zeros_want = s
            .run(
                &function,
                &[Tensor::zeros(inputs[0].shape(), DType::F32).unwrap()],
            )
            .unwrap();
        let mut x = s.alloc_device(inputs[0].shape(), DType::F32).unwrap();
        for (round, (input, expect)) in [(&inputs[0], &want[0]), (&inputs[0], &want[0])]
            .into_iter()
            .chain([(
                &Tensor::zeros(inputs[0].shape(), DType::F32).unwrap(),
                &zeros_want[0],
            )])
            .enumerate()
        {
            let shared = x.clone();
            let e = s.map(&mut x).unwrap_err();
            assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
            drop(shared);
            let mut m = s.map(&mut x).unwrap();
            assert!(m.in_place(), "POCL shares memory with the host: {m:?}");
            let e = m.as_mut_slice::<i32>().unwrap_err();
            assert!(matches!(e, Error::Mismatch(_)), "{e}");
            m.as_mut_slice::<f32>()
                .unwrap()
                .copy_from_slice(input.as_slice::<f32>().unwrap());
            m.unmap().unwrap();
            let out = s
                .call_device(&function, &[Value::DeviceTensor(x.clone())])
                .unwrap();
            let mut y = match out {
                Value::DeviceTensor(t) => t,
                Value::Tuple(v) => match &v[0] {
                    Value::DeviceTensor(t) => t.clone(),
                    v => panic!("output {v:?}"),
                },
                v => panic!("output {v:?}"),
            };
            let m = s.map(&mut y).unwrap();
            let got = Tensor::from_slice(expect.shape(), m.as_slice::<f32>().unwrap()).unwrap();
            drop(m);
            mote_tests::assert_close(&format!("mapped round {round}"), &got, expect, 1e-5, 1e-5);
        }
    }

    /// A `DeviceQueue`'s storage maps too: bytes written through the mapping are what a read
    /// copies back; a shared storage is refused.
    #[test]
    fn device_queue_storage_maps_in_place() {
        let mut q =
            mote::device::DeviceQueue::open(mote::Device::OpenCl { index: 0 }, 1 << 20).unwrap();
        let mut st = q.alloc(4096).unwrap();
        let other = st.clone();
        let e = q.map(&mut st).unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        drop(other);
        let mut m = q.map(&mut st).unwrap();
        assert!(m.in_place(), "{m:?}");
        assert!(m.iter().all(|&b| b == 0), "alloc zeroes");
        let e = m.as_slice::<f32>().unwrap_err();
        assert!(matches!(e, Error::InvalidArgument(_)), "{e}");
        for (i, b) in m.iter_mut().enumerate() {
            *b = (i * 7 % 251) as u8;
        }
        m.unmap().unwrap();
        let mut back = vec![0u8; 4096];
        q.read(&st, 0, &mut back).unwrap();
        assert!(back
            .iter()
            .enumerate()
            .all(|(i, &b)| b == (i * 7 % 251) as u8));
    }

    #[test]
    fn kernel_errors_leave_the_session_usable() {
        let model = Model::load(path("twostage_cl")).unwrap();
        let (function, case) = first_case("twostage_cl");
        let mut s = model.session().unwrap();
        // A wrong shape: the host code's own check, before any launch.
        let mut bad = kernel_args(&dir(), &case);
        let n = bad[0].as_tensor().unwrap().shape()[0];
        bad[0] = Value::Tensor(Tensor::zeros(&[n - 1], DType::F32).unwrap());
        let e = s.call_kernel(&function, &mut bad).unwrap_err();
        assert!(
            matches!(&e, Error::Kernel { kind, .. } if kind == "ValueError"),
            "{e}"
        );
        // A scalar where a tensor goes.
        let mut bad = kernel_args(&dir(), &case);
        bad[0] = Value::Int(3);
        assert!(s.call_kernel(&function, &mut bad).is_err());
        // Then the right call gives the right answer.
        let mut args = kernel_args(&dir(), &case);
        s.call_kernel(&function, &mut args).unwrap();
        let want = load_indexed_in(&dir(), case["expected"].as_str().unwrap(), "out");
        let out = case["outputs"][0].as_u64().unwrap() as usize;
        mote_tests::assert_close(
            "twostage after errors",
            args[out].as_tensor().unwrap(),
            &want[0],
            1e-6,
            1e-6,
        );
    }

    /// Device memory counts against the session's memory budget: arguments that do not fit are
    /// refused before anything is allocated, and so is a device workspace beyond what is left
    /// (the two-kernel function's 4 KiB intermediate), each `ResourceExhausted`.
    #[test]
    fn device_memory_is_under_the_session_memory_budget() {
        let model = Model::load(path("twostage_cl")).unwrap();
        let (function, case) = first_case("twostage_cl");
        let args_bytes: usize = kernel_args(&dir(), &case)
            .iter()
            .filter_map(|a| a.as_tensor().map(|t| t.byte_len()))
            .sum();
        for (budget, want) in [
            (args_bytes - 1, "for its arguments"),
            (args_bytes + 100, "device workspace of 4096 bytes"),
        ] {
            let mut s = model
                .session_with(SessionOptions {
                    memory_budget_bytes: budget,
                    ..Default::default()
                })
                .unwrap();
            let e = s
                .call_kernel(&function, &mut kernel_args(&dir(), &case))
                .unwrap_err();
            assert!(
                matches!(&e, Error::ResourceExhausted { budget, message } if *budget == "SessionOptions::memory_budget_bytes" && message.contains(want)),
                "{e:?}"
            );
        }
        let mut s = model
            .session_with(SessionOptions {
                memory_budget_bytes: args_bytes + 4096,
                ..Default::default()
            })
            .unwrap();
        s.call_kernel(&function, &mut kernel_args(&dir(), &case))
            .unwrap();
    }

    /// Four threads, each with its own session of one model (sessions share the device's context
    /// and the model's programs; each has its own queue and kernel objects), 20 checked calls each.
    #[test]
    fn stress_sessions_on_four_threads_share_the_device() {
        let model = Model::load(path("vadd_cl")).unwrap();
        let cases: Vec<serde_json::Value> = entry("vadd_cl")["cases"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|c| c["expected"].is_string())
            .cloned()
            .collect();
        std::thread::scope(|scope| {
            for t in 0..4 {
                let (model, cases) = (model.clone(), cases.clone());
                scope.spawn(move || {
                    let mut s = model.session().unwrap();
                    for round in 0..20 {
                        let c = &cases[(t + round) % cases.len()];
                        let mut args = kernel_args(&dir(), c);
                        s.call_kernel(c["function"].as_str().unwrap(), &mut args)
                            .unwrap();
                        let want = load_indexed_in(&dir(), c["expected"].as_str().unwrap(), "out");
                        let out = c["outputs"][0].as_u64().unwrap() as usize;
                        mote_tests::assert_close(
                            &format!("thread {t} round {round}"),
                            args[out].as_tensor().unwrap(),
                            &want[0],
                            1e-5,
                            1e-5,
                        );
                    }
                });
            }
        });
    }

    /// Relax models compiled for OpenCL (the zero pipeline and dlight's GPU schedules) run on
    /// the device: weights copied there once per session, inputs copied in and outputs back
    /// by `Session::run`, against TVM's run of the same module built for the CPU. Device and
    /// host storage are poisoned, and each case runs three times in one session (storage
    /// reused), every output checked.
    #[test]
    fn mlp_cl() {
        relax_model("mlp_cl");
    }

    #[test]
    fn cnn_cl() {
        relax_model("cnn_cl");
    }

    /// A symbolic batch: the shape heap and the shape function on the host, n = 1 and n = 5 in
    /// one session (the device storage of one size, then the other).
    #[test]
    fn mlp_dyn_cl() {
        relax_model("mlp_dyn_cl");
    }

    fn relax_model(name: &str) {
        let e = entry(name);
        assert_eq!(e["kind"], "relax", "{name}");
        let model = Model::load(path(name)).unwrap();
        let mut s = mote_tests::poisoned_session(&model, 2);
        assert!(
            matches!(s.device(), mote::Device::OpenCl { .. }),
            "{name}: session on {}",
            s.device()
        );
        let mut ran = 0;
        for c in e["cases"].as_array().unwrap() {
            let Some(expected) = c["expected"].as_str() else {
                continue;
            };
            let inputs = load_indexed_in(&dir(), c["inputs"].as_str().unwrap(), "arg");
            let want = load_indexed_in(&dir(), expected, "out");
            let (rtol, atol) = (
                c["tolerance"]["rtol"].as_f64().unwrap(),
                c["tolerance"]["atol"].as_f64().unwrap(),
            );
            for round in 0..3 {
                let got = s.run(c["function"].as_str().unwrap(), &inputs).unwrap();
                assert_eq!(got.len(), want.len(), "{name}: outputs");
                for (i, (g, w)) in got.iter().zip(&want).enumerate() {
                    mote_tests::assert_close(
                        &format!("{name} round {round} output {i}"),
                        g,
                        w,
                        rtol,
                        atol,
                    );
                }
                ran += 1;
            }
        }
        assert!(ran > 0, "{name}: no case with outputs");
    }
}
