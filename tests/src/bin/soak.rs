//! `soak`: Mote under sustained load for a set time. A script, not a test: `scripts/soak.sh`
//! builds and runs it, and docs/soak.md says what it checks and why the bounds are what they
//! are.
//!
//! Worker threads load and unload the models of the zoo (`MOTE_ZOO_DIR`) and of the offload zoo
//! (`MOTE_OFFLOAD_ZOO_DIR`: mapped, from memory, code-free from the `.so`, the `.tar` and
//! memory; subgraphs on the `cpu` backend), run them on sessions shared across iterations and
//! on fresh ones, at 1 and 2 intra-op threads, on models shared between threads and on models
//! each thread loads for itself; the `packed` model calls a function registered here. Between
//! good runs they inject errors: bad arguments, unknown names, kernels that raise, a callback
//! that fails or panics, corrupted and truncated libraries loaded from memory. Every output is
//! compared with TVM's in the zoos' `*.expected.npz`, at the manifests' tolerances; every
//! injected error must be the expected typed error, and the session it hit must give TVM's
//! answer afterwards. A failure is counted and printed with its model, case, thread and
//! iteration; the run goes on and ends `soak: FAILED`.
//!
//! The main thread samples resident memory, open descriptors, mapped regions and threads at
//! quiescent points (every worker parked between two iterations, each holding only its
//! long-lived sessions), so that work in flight does not blur them, and fails the run if they
//! grow past the bounds below.
//!
//! Exit status: 0 passed, 1 failed, 2 bad usage.

use std::collections::{BTreeMap, BTreeSet};
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::time::{Duration, Instant};

use mote::{Arg, DType, Error, LoadOptions, Model, Session, SessionOptions, Tensor, Value};
use mote_tests::{check_close, load_indexed_in, manifest_in, offload_zoo, to_f64, zoo_dir};
use serde_json::Value as Json;

const USAGE: &str = "usage: soak [--minutes M] [--threads T] [--interval S] [--seed N]

  --minutes M   how long to run (default 10; fractions allowed, e.g. 0.5)
  --threads T   worker threads (default 8)
  --interval S  seconds between samples (default: 10, less for runs too short for 16
                samples after the warm-up)
  --seed N      seed of the workers' choices (default: from the clock; printed)

Needs MOTE_ZOO_DIR and MOTE_OFFLOAD_ZOO_DIR (scripts/soak.sh sets both).";

/// Resident memory may grow by this much from the baseline to the end (docs/soak.md).
const RSS_BOUND_MIB: f64 = 32.0;
/// The largest sample of the last quarter after the baseline may exceed the largest of the
/// first quarter by this much.
const RSS_TREND_BOUND_MIB: f64 = 8.0;
/// Open descriptors at a quiescent point may differ from the baseline by this much.
const FD_SLACK: i64 = 0;
/// Mapped regions at a quiescent point may differ from the baseline by this much.
const MAPS_SLACK: i64 = 16;
/// How long a sample may wait for every worker to park before the run is declared stuck.
const QUIESCE_TIMEOUT: Duration = Duration::from_secs(120);
/// Failures printed in full; the rest are counted.
const PRINTED_FAILURES: u64 = 50;

/// What the registered `mote.zoo.scale_shift` does when its first input element is one of
/// these: return an error, or panic.
const CALLBACK_ERROR_SENTINEL: f32 = -1234.5;
const CALLBACK_PANIC_SENTINEL: f32 = -5432.25;
const INJECTED_CALLBACK_ERROR: &str = "soak: injected callback error";
const INJECTED_CALLBACK_PANIC: &str = "soak: injected callback panic";

/// The VM executable's magic, little-endian, as it appears in a library's blob.
const EXECUTABLE_MAGIC: u64 = 0xD225_DE2F_4214_151E;

fn main() {
    let config = match parse_args() {
        Ok(Some(c)) => c,
        Ok(None) => {
            println!("{USAGE}");
            return;
        }
        Err(e) => {
            eprintln!("soak: {e}\n\n{USAGE}");
            std::process::exit(2);
        }
    };
    quiet_injected_panics();
    register_scale_shift();
    match run(&config) {
        Ok(true) => {}
        Ok(false) => std::process::exit(1),
        Err(e) => {
            println!("soak: FAILED: {e}");
            std::process::exit(1);
        }
    }
}

// ---------------------------------------------------------------- configuration

struct Config {
    duration: Duration,
    warmup: Duration,
    interval: Duration,
    threads: usize,
    seed: u64,
}

fn parse_args() -> Result<Option<Config>, String> {
    let (mut minutes, mut threads, mut interval, mut seed) = (10.0f64, 8usize, None, None);
    let mut args = std::env::args().skip(1);
    while let Some(flag) = args.next() {
        if flag == "-h" || flag == "--help" {
            return Ok(None);
        }
        let value = args.next().ok_or_else(|| format!("{flag} needs a value"))?;
        let bad = |e: &dyn std::fmt::Display| format!("{flag} {value}: {e}");
        match flag.as_str() {
            "--minutes" => minutes = value.parse::<f64>().map_err(|e| bad(&e))?,
            "--threads" => threads = value.parse::<usize>().map_err(|e| bad(&e))?,
            "--interval" => interval = Some(value.parse::<f64>().map_err(|e| bad(&e))?),
            "--seed" => seed = Some(value.parse::<u64>().map_err(|e| bad(&e))?),
            _ => return Err(format!("unknown flag {flag}")),
        }
    }
    if !(minutes.is_finite() && minutes > 0.0 && minutes <= 7.0 * 24.0 * 60.0) {
        return Err(format!(
            "--minutes {minutes}: must be more than 0, at most a week"
        ));
    }
    if !(1..=256).contains(&threads) {
        return Err(format!("--threads {threads}: must be 1 to 256"));
    }
    let duration = Duration::from_secs_f64(minutes * 60.0);
    // Warm-up: a tenth of the run, at least 30 s, at most 5 min, and never more than half.
    let warmup = duration
        .mul_f64(0.1)
        .max(Duration::from_secs(30))
        .min(Duration::from_secs(300))
        .min(duration / 2);
    let measured = duration - warmup;
    let interval = match interval {
        Some(s) if !(s.is_finite() && s > 0.0) => {
            return Err(format!("--interval {s}: must be more than 0"))
        }
        Some(s) => Duration::from_secs_f64(s),
        None => Duration::from_secs(10)
            .min(measured / 16)
            .max(Duration::from_millis(100)),
    };
    // The trend compares quarters of the samples after the baseline: at least 4 of them.
    if measured < interval * 4 {
        return Err(format!(
            "--interval {:.1}: a {:.1}-minute run measures for {:.0} s after its warm-up, \
             which needs at least 4 samples",
            interval.as_secs_f64(),
            minutes,
            measured.as_secs_f64()
        ));
    }
    let seed = seed.unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(1, |d| d.as_nanos() as u64)
    });
    Ok(Some(Config {
        duration,
        warmup,
        interval,
        threads,
        seed,
    }))
}

// ---------------------------------------------------------------- the callback and panics

/// `mote.zoo.scale_shift`, the function the `packed` model's kernel calls by name: dst[i] =
/// 2 * src[i] + 1 on raw float32 pointers, as in tests/tests/zoo.rs; unless src[0] is a
/// sentinel, when it fails or panics (injected errors).
fn register_scale_shift() {
    mote::register_function(
        "mote.zoo.scale_shift",
        Arc::new(|args: &[Arg<'_>]| {
            let [Arg::OpaquePtr(src), Arg::OpaquePtr(dst), Arg::Int(n)] = *args else {
                return Err(Error::InvalidArgument(format!(
                    "unexpected arguments {args:?}"
                )));
            };
            let n = usize::try_from(n)
                .map_err(|_| Error::InvalidArgument(format!("negative length {n}")))?;
            let (src, dst) = (src as *const f32, dst as *mut f32);
            if n > 0 {
                // SAFETY: the kernel passes the data pointers of its two float32[8] buffers
                // and 8.
                let first = unsafe { *src };
                if first == CALLBACK_ERROR_SENTINEL {
                    return Err(Error::InvalidArgument(INJECTED_CALLBACK_ERROR.into()));
                }
                if first == CALLBACK_PANIC_SENTINEL {
                    std::panic::panic_any(INJECTED_CALLBACK_PANIC);
                }
            }
            for i in 0..n {
                // SAFETY: as above; `i < n`.
                unsafe { *dst.add(i) = 2.0 * *src.add(i) + 1.0 };
            }
            Ok(Value::None)
        }),
    );
}

/// The callback's injected panic is expected (Mote catches it and reports a kernel error):
/// keep the default hook's message for every other panic only.
fn quiet_injected_panics() {
    let default = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        let payload = info.payload();
        let injected = payload.downcast_ref::<&str>() == Some(&INJECTED_CALLBACK_PANIC)
            || payload
                .downcast_ref::<String>()
                .is_some_and(|m| m == INJECTED_CALLBACK_PANIC);
        if !injected {
            default(info);
        }
    }));
}

// ---------------------------------------------------------------- the catalog

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Zoo {
    Main,
    Offload,
}

enum Mode {
    Call,
    Stateful,
    /// A kernel of a kernel-only library: `scalars` are 0-d arrays passed as scalars,
    /// `outputs` the buffers the kernel writes.
    Kernel {
        scalars: Vec<usize>,
        outputs: Vec<usize>,
    },
}

enum Expect {
    Outputs {
        want: Vec<Tensor>,
        rtol: f64,
        atol: f64,
    },
    /// TVM raises here: Mote must give `Error::Kernel` with this in its message.
    KernelError(String),
}

struct Case {
    /// `model.case`.
    label: String,
    function: String,
    mode: Mode,
    inputs: Vec<Tensor>,
    expect: Expect,
}

impl Case {
    fn is_good_call(&self) -> bool {
        matches!(
            (&self.mode, &self.expect),
            (Mode::Call, Expect::Outputs { .. })
        )
    }
}

struct Entry {
    name: String,
    zoo: Zoo,
    kernel_library: bool,
    so: PathBuf,
    so_bytes: Vec<u8>,
    /// The `.tar` `export_library` wrote (code-free models of the offload zoo).
    tar: Option<(PathBuf, Vec<u8>)>,
    code_free: bool,
    cases: Vec<Case>,
}

impl Entry {
    fn good_cases(&self) -> Vec<&Case> {
        self.cases
            .iter()
            .filter(|c| matches!(c.expect, Expect::Outputs { .. }))
            .collect()
    }

    fn good_calls(&self) -> Vec<&Case> {
        self.cases.iter().filter(|c| c.is_good_call()).collect()
    }

    /// Functions no case runs through the stateful API.
    fn never_stateful(&self) -> Vec<&str> {
        let stateful: BTreeSet<&str> = self
            .cases
            .iter()
            .filter(|c| matches!(c.mode, Mode::Stateful))
            .map(|c| c.function.as_str())
            .collect();
        self.good_calls()
            .into_iter()
            .map(|c| c.function.as_str())
            .filter(|f| !stateful.contains(f))
            .collect()
    }

    /// How this entry may be loaded.
    fn load_methods(&self) -> Vec<Load> {
        let mut m = vec![Load::File, Load::Memory];
        if self.code_free {
            m.extend([Load::CodeFreeFile, Load::CodeFreeMemory]);
            if self.tar.is_some() {
                m.push(Load::CodeFreeTar);
            }
        }
        m
    }

    fn backends(&self) -> Vec<String> {
        match self.zoo {
            Zoo::Main => Vec::new(),
            Zoo::Offload => vec!["cpu".to_string()],
        }
    }
}

struct Catalog {
    entries: Vec<Entry>,
}

impl Catalog {
    fn index(&self, name: &str) -> Result<usize, String> {
        self.entries
            .iter()
            .position(|e| e.name == name)
            .ok_or_else(|| format!("model `{name}` is in neither zoo"))
    }

    fn matching(&self, f: impl Fn(&Entry) -> bool) -> Vec<usize> {
        (0..self.entries.len())
            .filter(|&i| f(&self.entries[i]))
            .collect()
    }
}

fn text<'a>(j: &'a Json, key: &str, what: &str) -> Result<&'a str, String> {
    j[key]
        .as_str()
        .ok_or_else(|| format!("{what}: no `{key}` in the manifest"))
}

fn indices(j: &Json, key: &str, what: &str) -> Result<Vec<usize>, String> {
    j[key]
        .as_array()
        .ok_or_else(|| format!("{what}: no `{key}` in the manifest"))?
        .iter()
        .map(|v| {
            v.as_u64()
                .map(|i| i as usize)
                .ok_or_else(|| format!("{what}: `{key}` holds a non-index"))
        })
        .collect()
}

fn read(path: &Path) -> Result<Vec<u8>, String> {
    std::fs::read(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Every model and case of both zoos, with their inputs and TVM's outputs in memory.
fn load_catalog() -> Result<Catalog, String> {
    let mut entries = Vec::new();
    for (zoo, dir) in [(Zoo::Main, zoo_dir()), (Zoo::Offload, offload_zoo::dir())] {
        let manifest = manifest_in(&dir);
        let models = manifest["models"]
            .as_array()
            .ok_or_else(|| format!("{}: manifest without `models`", dir.display()))?;
        for m in models {
            entries.push(load_entry(&dir, zoo, m)?);
        }
    }
    Ok(Catalog { entries })
}

fn load_entry(dir: &Path, zoo: Zoo, m: &Json) -> Result<Entry, String> {
    let name = text(m, "name", "a model")?.to_string();
    let so = dir.join(text(m, "file", &name)?);
    let tar = match m["archive"].as_str() {
        Some(a) => {
            let p = dir.join(a);
            let bytes = read(&p)?;
            Some((p, bytes))
        }
        None => None,
    };
    let mut cases = Vec::new();
    for c in m["cases"]
        .as_array()
        .ok_or_else(|| format!("{name}: no cases"))?
    {
        let label = format!("{name}.{}", text(c, "case", &name)?);
        let mode = match text(c, "mode", &label)? {
            "call" => Mode::Call,
            "stateful" => Mode::Stateful,
            "kernel" => Mode::Kernel {
                scalars: indices(c, "scalars", &label)?,
                outputs: indices(c, "outputs", &label)?,
            },
            other => return Err(format!("{label}: unknown mode `{other}`")),
        };
        let expect = match c["expect_error"].as_str() {
            Some(needle) => Expect::KernelError(needle.to_string()),
            None => {
                let tol = &c["tolerance"];
                let (Some(rtol), Some(atol)) = (tol["rtol"].as_f64(), tol["atol"].as_f64()) else {
                    return Err(format!("{label}: no tolerance"));
                };
                Expect::Outputs {
                    want: load_indexed_in(dir, text(c, "expected", &label)?, "out"),
                    rtol,
                    atol,
                }
            }
        };
        cases.push(Case {
            function: text(c, "function", &label)?.to_string(),
            inputs: load_indexed_in(dir, text(c, "inputs", &label)?, "arg"),
            label,
            mode,
            expect,
        });
    }
    if cases.is_empty() {
        return Err(format!("{name}: no cases"));
    }
    Ok(Entry {
        kernel_library: m["kind"] == "kernels",
        so_bytes: read(&so)?,
        so,
        tar,
        code_free: m["code_free"].as_bool().unwrap_or(false),
        cases,
        zoo,
        name,
    })
}

// ---------------------------------------------------------------- loading and running

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Load {
    File,
    Memory,
    CodeFreeFile,
    CodeFreeTar,
    CodeFreeMemory,
}

const LOADS: [(Load, &str); 5] = [
    (Load::File, "file"),
    (Load::Memory, "memory"),
    (Load::CodeFreeFile, "code-free .so"),
    (Load::CodeFreeTar, "code-free .tar"),
    (Load::CodeFreeMemory, "code-free memory"),
];

fn load_index(how: Load) -> usize {
    LOADS.iter().position(|(l, _)| *l == how).unwrap_or(0)
}

fn load_name(how: Load) -> &'static str {
    LOADS[load_index(how)].1
}

fn code_free() -> LoadOptions {
    LoadOptions::default().code_free(true)
}

fn load(entry: &Entry, how: Load) -> mote::Result<Model> {
    match how {
        Load::File => Model::load(&entry.so),
        Load::Memory => Model::load_from_memory(&entry.so_bytes),
        Load::CodeFreeFile => Model::load_with(&entry.so, code_free()),
        Load::CodeFreeTar => match &entry.tar {
            Some((path, _)) => Model::load_with(path, code_free()),
            None => Err(Error::InvalidArgument(format!(
                "{}: no .tar in the manifest",
                entry.name
            ))),
        },
        Load::CodeFreeMemory => Model::load_from_memory_with(&entry.so_bytes, code_free()),
    }
}

fn new_session(model: &Model, entry: &Entry, threads: usize) -> mote::Result<Session> {
    model.session_with(SessionOptions {
        threads: Some(threads),
        backends: entry.backends(),
        // Every buffer starts as NaN (or 0xA5): an element no kernel wrote cannot match TVM.
        poison_memory: true,
        ..Default::default()
    })
}

enum Outcome {
    /// Outputs compared with TVM's and found within tolerance.
    Checked,
    /// TVM raises here, and Mote gave the same kernel error.
    ExpectedError,
}

fn tensor_args(inputs: &[Tensor]) -> Vec<Value> {
    inputs.iter().cloned().map(Value::Tensor).collect()
}

fn compare(
    what: &str,
    got: &[Tensor],
    want: &[Tensor],
    rtol: f64,
    atol: f64,
) -> Result<(), String> {
    if got.len() != want.len() {
        return Err(format!(
            "{what}: {} outputs, TVM gives {}",
            got.len(),
            want.len()
        ));
    }
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        check_close(&format!("{what} out{i}"), g, w, rtol, atol)?;
    }
    Ok(())
}

/// Call a Relax case's function the way its mode says.
fn call(session: &mut Session, case: &Case, args: Vec<Value>) -> mote::Result<Value> {
    match case.mode {
        Mode::Stateful => {
            session.set_input(&case.function, args)?;
            session.invoke_stateful(&case.function)?;
            session.get_output(&case.function)
        }
        _ => session.call(&case.function, &args),
    }
}

/// Run one case and check it against TVM; `Err` describes the failure.
fn run_case(session: &mut Session, case: &Case, what: &str) -> Result<Outcome, String> {
    let label = format!("{} ({what})", case.label);
    if let Mode::Kernel { scalars, outputs } = &case.mode {
        return run_kernel_case(session, case, scalars, outputs, &label);
    }
    let result = call(session, case, tensor_args(&case.inputs));
    match &case.expect {
        Expect::Outputs { want, rtol, atol } => {
            let out = result.map_err(|e| format!("{label}: {e}"))?;
            compare(&label, &out.flatten_tensors(), want, *rtol, *atol)?;
            Ok(Outcome::Checked)
        }
        Expect::KernelError(needle) => match result {
            Err(e @ Error::Kernel { .. }) if e.to_string().contains(needle.as_str()) => {
                Ok(Outcome::ExpectedError)
            }
            Err(e) => Err(format!(
                "{label}: expected a kernel error mentioning `{needle}`, got {e:?}"
            )),
            Ok(_) => Err(format!(
                "{label}: TVM raises `{needle}` here, but Mote returned outputs"
            )),
        },
    }
}

/// A kernel case's arguments: deep copies (a kernel needs them exclusive), 0-d `scalars`
/// as scalars by dtype, `outputs` poisoned with 0xFF bytes (NaN, or -1).
fn kernel_args(case: &Case, scalars: &[usize], outputs: &[usize]) -> Result<Vec<Value>, String> {
    let mut args = Vec::with_capacity(case.inputs.len());
    for (i, t) in case.inputs.iter().enumerate() {
        if scalars.contains(&i) {
            let v = *to_f64(t)
                .first()
                .ok_or_else(|| format!("{}: scalar {i} is empty", case.label))?;
            args.push(match t.dtype() {
                DType::F32 | DType::F64 => Value::Float(v),
                _ => Value::Int(v as i64),
            });
            continue;
        }
        let mut copy = t
            .deep_copy()
            .map_err(|e| format!("{}: copy: {e}", case.label))?;
        if outputs.contains(&i) {
            copy.data_mut()
                .map_err(|e| format!("{}: poison: {e}", case.label))?
                .fill(0xFF);
        }
        args.push(Value::Tensor(copy));
    }
    Ok(args)
}

fn run_kernel_case(
    session: &mut Session,
    case: &Case,
    scalars: &[usize],
    outputs: &[usize],
    label: &str,
) -> Result<Outcome, String> {
    let mut args = kernel_args(case, scalars, outputs)?;
    let result = session.call_kernel(&case.function, &mut args);
    match &case.expect {
        Expect::KernelError(needle) => match result {
            Err(e)
                if matches!(&e, Error::Kernel { kernel, .. } if *kernel == case.function)
                    && e.to_string().contains(needle.as_str()) =>
            {
                Ok(Outcome::ExpectedError)
            }
            Err(e) => Err(format!(
                "{label}: expected a kernel error of `{}` mentioning `{needle}`, got {e:?}",
                case.function
            )),
            Ok(v) => Err(format!(
                "{label}: TVM raises `{needle}` here, but Mote returned {v:?}"
            )),
        },
        Expect::Outputs { want, rtol, atol } => {
            match result.map_err(|e| format!("{label}: {e}"))? {
                Value::None => {}
                v => return Err(format!("{label}: the kernel returned {v:?}, not None")),
            }
            if outputs.len() != want.len() {
                return Err(format!(
                    "{label}: {} output buffers, TVM gives {}",
                    outputs.len(),
                    want.len()
                ));
            }
            for (k, (&i, w)) in outputs.iter().zip(want).enumerate() {
                let got = args
                    .get(i)
                    .and_then(Value::as_tensor)
                    .ok_or_else(|| format!("{label}: output buffer {i} is not a tensor"))?;
                check_close(&format!("{label} out{k}"), got, w, *rtol, *atol)?;
            }
            // The kernel must leave its inputs alone.
            for (i, a) in args.iter().enumerate() {
                if let (Some(t), false) = (a.as_tensor(), outputs.contains(&i)) {
                    check_close(&format!("{label} input {i}"), t, &case.inputs[i], 0.0, 0.0)?;
                }
            }
            Ok(Outcome::Checked)
        }
    }
}

// ---------------------------------------------------------------- injected errors

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Inject {
    WrongRank,
    WrongDtype,
    TooFewArgs,
    TooManyArgs,
    UnknownFunction,
    SetInputUnknownFunction,
    InvokeWithoutInputs,
    OutputNeverInvoked,
    WeightShape,
    KernelRaises,
    KernelLibraryBadArgs,
    UnknownKernel,
    SharedKernelTensor,
    CallOnKernelLibrary,
    CallbackError,
    CallbackPanic,
    TruncatedLibrary,
    TruncatedCodeFreeSo,
    TruncatedTar,
    BadExecutableMagic,
    BadExecutableVersion,
    RenamedKernel,
    NotALibrary,
    NotCodeFree,
}

const INJECTIONS: [(Inject, &str); 24] = [
    (Inject::WrongRank, "wrong rank"),
    (Inject::WrongDtype, "wrong dtype"),
    (Inject::TooFewArgs, "too few args"),
    (Inject::TooManyArgs, "too many args"),
    (Inject::UnknownFunction, "unknown function"),
    (
        Inject::SetInputUnknownFunction,
        "set_input unknown function",
    ),
    (Inject::InvokeWithoutInputs, "invoke without inputs"),
    (Inject::OutputNeverInvoked, "output never invoked"),
    (Inject::WeightShape, "weight shape"),
    (Inject::KernelRaises, "kernel raises"),
    (Inject::KernelLibraryBadArgs, "kernel arity/shape"),
    (Inject::UnknownKernel, "unknown kernel"),
    (Inject::SharedKernelTensor, "shared kernel tensor"),
    (Inject::CallOnKernelLibrary, "call on kernel library"),
    (Inject::CallbackError, "callback error"),
    (Inject::CallbackPanic, "callback panic"),
    (Inject::TruncatedLibrary, "truncated .so"),
    (Inject::TruncatedCodeFreeSo, "truncated code-free .so"),
    (Inject::TruncatedTar, "truncated .tar"),
    (Inject::BadExecutableMagic, "bad executable magic"),
    (Inject::BadExecutableVersion, "bad executable version"),
    (Inject::RenamedKernel, "renamed kernel"),
    (Inject::NotALibrary, "not a library"),
    (Inject::NotCodeFree, "not code-free"),
];

fn inject_index(kind: Inject) -> usize {
    INJECTIONS.iter().position(|(k, _)| *k == kind).unwrap_or(0)
}

/// A kind of argument error for a Relax session: the arguments to call with and what must
/// come back.
fn bad_arguments(kind: Inject, case: &Case) -> Result<(Vec<Value>, &'static str), String> {
    let mut args = tensor_args(&case.inputs);
    let first = case
        .inputs
        .first()
        .ok_or_else(|| format!("{}: no inputs", case.label))?;
    let make = |shape: &[i64], dtype| {
        Tensor::zeros(shape, dtype).map_err(|e| format!("{}: {e}", case.label))
    };
    Ok(match kind {
        Inject::WrongRank => {
            let mut shape = first.shape().to_vec();
            shape.push(1);
            args[0] = Value::Tensor(make(&shape, first.dtype())?);
            (args, "mismatch")
        }
        Inject::WrongDtype => {
            let dtype = match first.dtype() {
                DType::F32 => DType::F64,
                DType::U8 => DType::I8,
                _ => DType::F32,
            };
            args[0] = Value::Tensor(make(first.shape(), dtype)?);
            (args, "mismatch")
        }
        Inject::TooFewArgs => {
            args.pop();
            (args, "count")
        }
        Inject::TooManyArgs => {
            args.push(Value::Int(7));
            (args, "count")
        }
        _ => return Err(format!("{kind:?} is not an argument error")),
    })
}

/// Where the VM executable starts in a library's bytes (at its magic).
fn executable_offset(lib: &[u8]) -> Option<usize> {
    let magic = EXECUTABLE_MAGIC.to_le_bytes();
    lib.windows(8).position(|w| w == magic)
}

fn le_u16(b: &[u8], at: usize) -> Option<usize> {
    Some(u16::from_le_bytes(b.get(at..at + 2)?.try_into().ok()?) as usize)
}

fn le_u32(b: &[u8], at: usize) -> Option<u32> {
    Some(u32::from_le_bytes(b.get(at..at + 4)?.try_into().ok()?))
}

fn le_u64(b: &[u8], at: usize) -> Option<usize> {
    usize::try_from(u64::from_le_bytes(b.get(at..at + 8)?.try_into().ok()?)).ok()
}

/// Where the file content of the last loadable segment of a 64-bit little-endian ELF file
/// ends: a copy cut anywhere before it cannot be mapped, and Mote's pre-check must refuse it.
fn load_end(elf: &[u8]) -> Option<usize> {
    if !elf.starts_with(b"\x7fELF\x02\x01") {
        return None;
    }
    let (phoff, phentsize, phnum) = (le_u64(elf, 32)?, le_u16(elf, 54)?, le_u16(elf, 56)?);
    let mut end = None;
    for i in 0..phnum {
        let h = phoff.checked_add(i.checked_mul(phentsize)?)?;
        if le_u32(elf, h)? == 1 {
            let seg_end = le_u64(elf, h + 8)?.checked_add(le_u64(elf, h + 32)?)?;
            end = end.max(Some(seg_end));
        }
    }
    end.filter(|&e| e <= elf.len())
}

// ---------------------------------------------------------------- shared state

#[derive(Default)]
struct Counters {
    iterations: AtomicU64,
    runs_checked: AtomicU64,
    errors_injected: AtomicU64,
    errors_expected: AtomicU64,
    failures: AtomicU64,
    panics: AtomicU64,
    reloads: AtomicU64,
    loads: [AtomicU64; LOADS.len()],
    injections: [AtomicU64; INJECTIONS.len()],
}

fn add(c: &AtomicU64) {
    c.fetch_add(1, Ordering::Relaxed);
}

fn get(c: &AtomicU64) -> u64 {
    c.load(Ordering::Relaxed)
}

/// A model shared by every worker. A reload swaps in a fresh load of the same file.
struct Slot {
    entry: usize,
    how: Load,
    current: Mutex<(u64, Model)>,
}

impl Slot {
    fn current(&self) -> (u64, Model) {
        let c = lock(&self.current);
        (c.0, c.1.clone())
    }
}

fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Lets the sampler see the process with no work in flight: workers park between iterations
/// while a sample is wanted.
#[derive(Default)]
struct Gate {
    state: Mutex<GateState>,
    changed: Condvar,
}

#[derive(Default)]
struct GateState {
    pause: bool,
    parked: usize,
    running: usize,
}

impl Gate {
    /// Between two iterations: when a sample is wanted, call `before_park` (bring long-lived
    /// state up to date) and wait until it is taken.
    fn checkpoint(&self, before_park: impl FnOnce()) {
        if !lock(&self.state).pause {
            return;
        }
        before_park();
        let mut s = lock(&self.state);
        s.parked += 1;
        self.changed.notify_all();
        while s.pause {
            s = self.changed.wait(s).unwrap_or_else(PoisonError::into_inner);
        }
        s.parked -= 1;
    }

    /// Run `f` unless a sample is wanted: slot swaps go through here, so that once the pause
    /// is asked for, what the parking workers see of the slots stays as it is.
    fn unless_pausing<T>(&self, f: impl FnOnce() -> T) -> Option<T> {
        let s = lock(&self.state);
        (!s.pause).then(f)
    }

    /// Ask for a pause and wait until every running worker is parked.
    fn pause(&self, timeout: Duration) -> Result<(), String> {
        let mut s = lock(&self.state);
        s.pause = true;
        let (s, waited) = self
            .changed
            .wait_timeout_while(s, timeout, |s| s.parked < s.running)
            .unwrap_or_else(PoisonError::into_inner);
        if waited.timed_out() {
            return Err(format!(
                "only {} of {} workers reached a quiescent point within {} s: a worker is stuck",
                s.parked,
                s.running,
                timeout.as_secs()
            ));
        }
        Ok(())
    }

    fn resume(&self) {
        lock(&self.state).pause = false;
        self.changed.notify_all();
    }

    fn enter(&self) {
        lock(&self.state).running += 1;
    }

    fn leave(&self) {
        lock(&self.state).running -= 1;
        self.changed.notify_all();
    }
}

struct Shared {
    catalog: Catalog,
    slots: Vec<Slot>,
    counters: Counters,
    gate: Gate,
    stop: AtomicBool,
    /// Indices of entries by role.
    relax: Vec<usize>,
    main_zoo: Vec<usize>,
    offload: Vec<usize>,
    code_free: Vec<usize>,
    with_tar: Vec<usize>,
    not_code_free: Vec<usize>,
    kernel_libraries: Vec<usize>,
    mlp: usize,
    raise: usize,
    packed: usize,
    gemm: usize,
}

impl Shared {
    fn fail(&self, message: String) {
        let n = self.counters.failures.fetch_add(1, Ordering::Relaxed) + 1;
        if n <= PRINTED_FAILURES {
            eprintln!("soak: FAILURE {n}: {message}");
        }
        if n == PRINTED_FAILURES {
            eprintln!("soak: further failures are counted, not printed");
        }
    }

    /// Count a case's result.
    fn record(&self, result: Result<Outcome, String>, context: &str) {
        match result {
            Ok(Outcome::Checked) => add(&self.counters.runs_checked),
            Ok(Outcome::ExpectedError) => add(&self.counters.errors_expected),
            Err(e) => self.fail(format!("{context}: {e}")),
        }
    }
}

/// The models every worker shares, and how each is loaded.
const SHARED_MODELS: [(&str, Load); 8] = [
    ("mlp", Load::File),
    ("multi", Load::Memory),
    ("packed", Load::File),
    ("raise", Load::File),
    ("gemm", Load::Memory),
    ("mobilenet_block_acl", Load::File),
    ("cnn_bnns", Load::CodeFreeTar),
    ("onnx_encoder_layer_acl", Load::CodeFreeMemory),
];

/// The zoo models the brief names; the run refuses to start without them.
const REQUIRED: [&str; 11] = [
    "mlp",
    "cnn",
    "mobilenet_block",
    "multi",
    "ctrl",
    "mlp_dyn",
    "half",
    "packed",
    "raise",
    "gemm",
    "kernels",
];

fn build_shared(catalog: Catalog) -> Result<Shared, String> {
    for name in REQUIRED {
        catalog.index(name)?;
    }
    let mut slots = Vec::new();
    for (name, how) in SHARED_MODELS {
        let entry = catalog.index(name)?;
        let e = &catalog.entries[entry];
        if !e.load_methods().contains(&how) {
            return Err(format!("{name} cannot be loaded {}", load_name(how)));
        }
        let model = load(e, how).map_err(|e| format!("{name} ({}): {e}", load_name(how)))?;
        slots.push(Slot {
            entry,
            how,
            current: Mutex::new((0, model)),
        });
    }
    let relax = catalog.matching(|e| !e.kernel_library && !e.good_calls().is_empty());
    let main_zoo = catalog.matching(|e| e.zoo == Zoo::Main);
    let offload = catalog.matching(|e| e.zoo == Zoo::Offload);
    let code_free = catalog.matching(|e| e.code_free);
    let with_tar = catalog.matching(|e| e.code_free && e.tar.is_some());
    let not_code_free = catalog.matching(|e| e.zoo == Zoo::Offload && !e.code_free);
    let kernel_libraries = catalog.matching(|e| e.kernel_library);
    for (what, v) in [
        ("Relax models", &relax),
        ("offload models", &offload),
        ("code-free models", &code_free),
        ("code-free models with a .tar", &with_tar),
        ("models that are not code-free", &not_code_free),
        ("kernel libraries", &kernel_libraries),
    ] {
        if v.is_empty() {
            return Err(format!("the zoos have no {what}"));
        }
    }
    Ok(Shared {
        mlp: catalog.index("mlp")?,
        raise: catalog.index("raise")?,
        packed: catalog.index("packed")?,
        gemm: catalog.index("gemm")?,
        catalog,
        slots,
        counters: Counters::default(),
        gate: Gate::default(),
        stop: AtomicBool::new(false),
        relax,
        main_zoo,
        offload,
        code_free,
        with_tar,
        not_code_free,
        kernel_libraries,
    })
}

// ---------------------------------------------------------------- workers

/// xorshift64*: the workers' choices, reproducible from `--seed`.
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1)
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x >> 12;
        x ^= x << 25;
        x ^= x >> 27;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    /// In `0..n` (`n > 0`).
    fn below(&mut self, n: usize) -> usize {
        (self.next() % n.max(1) as u64) as usize
    }

    fn pick<T: Copy>(&mut self, v: &[T]) -> Option<T> {
        (!v.is_empty()).then(|| v[self.below(v.len())])
    }

    fn threads(&mut self) -> usize {
        1 + self.below(2)
    }
}

/// A worker's session on a shared model, kept across iterations.
struct LongSession {
    generation: u64,
    threads: usize,
    session: Session,
}

struct Worker {
    id: usize,
    shared: Arc<Shared>,
    rng: Rng,
    iteration: u64,
    /// One per slot; `None` until made (or after a failure).
    long: Vec<Option<LongSession>>,
}

impl Worker {
    /// Where a failure happened: the thread and its iteration.
    fn context(&self) -> String {
        format!("thread {}, iteration {}", self.id, self.iteration)
    }

    fn fail(&self, what: String) {
        self.shared.fail(format!("{}: {what}", self.context()));
    }

    fn run(&mut self) {
        let shared = self.shared.clone();
        self.long = (0..shared.slots.len()).map(|_| None).collect();
        while !shared.stop.load(Ordering::Relaxed) {
            shared.gate.checkpoint(|| self.refresh());
            if shared.stop.load(Ordering::Relaxed) {
                break;
            }
            self.iteration += 1;
            add(&shared.counters.iterations);
            let step = catch_unwind(AssertUnwindSafe(|| self.step()));
            if let Err(payload) = step {
                let message = payload
                    .downcast_ref::<&str>()
                    .map(|s| s.to_string())
                    .or_else(|| payload.downcast_ref::<String>().cloned())
                    .unwrap_or_else(|| "(no message)".into());
                add(&shared.counters.panics);
                self.fail(format!("panicked: {message}"));
                // Start again from nothing: what a panic interrupted is not to be trusted.
                self.long = (0..shared.slots.len()).map(|_| None).collect();
            }
        }
    }

    /// Make every long-lived session current: one per slot, on the slot's current model.
    fn refresh(&mut self) {
        let shared = self.shared.clone();
        for (i, slot) in shared.slots.iter().enumerate() {
            let (generation, model) = slot.current();
            if self.long[i]
                .as_ref()
                .is_some_and(|l| l.generation == generation)
            {
                continue;
            }
            // Sessions on the shared models alternate between 1 and 2 threads.
            let threads = 1 + (self.id + i) % 2;
            let entry = &shared.catalog.entries[slot.entry];
            self.long[i] = None;
            match new_session(&model, entry, threads) {
                Ok(session) => {
                    self.long[i] = Some(LongSession {
                        generation,
                        threads,
                        session,
                    })
                }
                Err(e) => self.fail(format!("{}: session on the shared model: {e}", entry.name)),
            }
        }
    }

    fn step(&mut self) {
        self.refresh();
        match self.rng.below(100) {
            0..30 => self.long_run(),
            30..40 => self.fresh_shared(),
            40..55 => self.own_load(Zoo::Main),
            55..67 => self.own_load(Zoo::Offload),
            67..97 => self.inject(),
            _ => self.reload(),
        }
    }

    /// A few cases on this worker's long-lived session of a shared model.
    fn long_run(&mut self) {
        let shared = self.shared.clone();
        let i = self.rng.below(shared.slots.len());
        let entry = &shared.catalog.entries[shared.slots[i].entry];
        for _ in 0..1 + self.rng.below(3) {
            let case = &entry.cases[self.rng.below(entry.cases.len())];
            let context = self.context();
            let Some(long) = self.long[i].as_mut() else {
                return;
            };
            let what = format!("shared model, long session, {} threads", long.threads);
            count_case(&shared, case);
            shared.record(run_case(&mut long.session, case, &what), &context);
        }
    }

    /// Every case on a new session of a shared model.
    fn fresh_shared(&mut self) {
        let shared = self.shared.clone();
        let slot = &shared.slots[self.rng.below(shared.slots.len())];
        let entry = &shared.catalog.entries[slot.entry];
        let (_, model) = slot.current();
        let threads = self.rng.threads();
        let what = format!("shared model, new session, {threads} threads");
        match new_session(&model, entry, threads) {
            Ok(mut s) => self.all_cases(&mut s, entry, &what),
            Err(e) => self.fail(format!("{} ({what}): session: {e}", entry.name)),
        }
    }

    fn all_cases(&mut self, session: &mut Session, entry: &Entry, what: &str) {
        let shared = self.shared.clone();
        let context = self.context();
        for case in &entry.cases {
            count_case(&shared, case);
            shared.record(run_case(session, case, what), &context);
        }
    }

    /// Load a model for this thread alone, run every case, drop it.
    fn own_load(&mut self, zoo: Zoo) {
        let shared = self.shared.clone();
        let pool = match zoo {
            Zoo::Main => &shared.main_zoo,
            Zoo::Offload => &shared.offload,
        };
        let Some(e) = self.rng.pick(pool) else { return };
        let entry = &shared.catalog.entries[e];
        let methods = entry.load_methods();
        let how = methods[self.rng.below(methods.len())];
        self.load_and_run(entry, how);
    }

    /// Load `entry` as `how` (counted), run every case on a new session, drop both.
    fn load_and_run(&mut self, entry: &Entry, how: Load) {
        let shared = self.shared.clone();
        let threads = self.rng.threads();
        let what = format!("own load ({}), {threads} threads", load_name(how));
        let model = match load(entry, how) {
            Ok(m) => m,
            Err(e) => return self.fail(format!("{} ({what}): load: {e}", entry.name)),
        };
        add(&shared.counters.loads[load_index(how)]);
        match new_session(&model, entry, threads) {
            Ok(mut s) => self.all_cases(&mut s, entry, &what),
            Err(e) => self.fail(format!("{} ({what}): session: {e}", entry.name)),
        }
    }

    /// Replace a shared model with a fresh load of the same file; the old one goes when the
    /// last session on it does.
    fn reload(&mut self) {
        let shared = self.shared.clone();
        let slot = &shared.slots[self.rng.below(shared.slots.len())];
        let entry = &shared.catalog.entries[slot.entry];
        let model = match load(entry, slot.how) {
            Ok(m) => m,
            Err(e) => {
                return self.fail(format!(
                    "{} (reload, {}): {e}",
                    entry.name,
                    load_name(slot.how)
                ))
            }
        };
        add(&shared.counters.loads[load_index(slot.how)]);
        let old = shared.gate.unless_pausing(|| {
            let mut c = lock(&slot.current);
            let generation = c.0 + 1;
            std::mem::replace(&mut *c, (generation, model))
        });
        if old.is_some() {
            add(&shared.counters.reloads);
        }
        // The replaced model (or the unused new one) is dropped here, before this worker parks.
    }

    /// Inject one error, check it is the expected one, then check the session (or loader)
    /// still gives TVM's answers.
    fn inject(&mut self) {
        let shared = self.shared.clone();
        let (kind, name) = INJECTIONS[self.rng.below(INJECTIONS.len())];
        add(&shared.counters.errors_injected);
        add(&shared.counters.injections[inject_index(kind)]);
        let result = match kind {
            Inject::WrongRank
            | Inject::WrongDtype
            | Inject::TooFewArgs
            | Inject::TooManyArgs
            | Inject::UnknownFunction
            | Inject::SetInputUnknownFunction
            | Inject::InvokeWithoutInputs
            | Inject::OutputNeverInvoked => {
                let Some(e) = self.rng.pick(&shared.relax) else {
                    return;
                };
                self.on_session(e, |s, entry, rng| relax_error(kind, s, entry, rng))
            }
            Inject::WeightShape => self.on_session(shared.mlp, |s, entry, _| {
                let case = entry.good_calls()[0];
                let mut args = tensor_args(&case.inputs);
                args[1] =
                    Value::Tensor(Tensor::zeros(&[16, 32], DType::F32).map_err(|e| e.to_string())?);
                match s.call(&case.function, &args) {
                    Err(e @ Error::Kernel { .. }) if e.to_string().contains("shape") => Ok(()),
                    r => Err(format!("mlp weight of the wrong shape: {}", describe(&r))),
                }
            }),
            Inject::KernelRaises => self.on_session(shared.raise, |s, entry, _| {
                expected_error_cases(s, entry, "raise")
            }),
            Inject::KernelLibraryBadArgs => self.on_session(shared.gemm, |s, entry, _| {
                expected_error_cases(s, entry, "gemm")
            }),
            Inject::UnknownKernel | Inject::SharedKernelTensor | Inject::CallOnKernelLibrary => {
                let Some(e) = self.rng.pick(&shared.kernel_libraries) else {
                    return;
                };
                self.on_session(e, |s, entry, _| kernel_library_error(kind, s, entry))
            }
            Inject::CallbackError | Inject::CallbackPanic => {
                self.on_session(shared.packed, |s, entry, _| callback_error(kind, s, entry))
            }
            _ => self.bad_load(kind),
        };
        match result {
            Ok(()) => add(&shared.counters.errors_expected),
            Err(e) => self.fail(format!("injected `{name}`: {e}")),
        }
    }

    /// Run `hurt` on a session of entry `e` (the long-lived one when `e` is shared and the
    /// dice say so, else a new session on a fresh load), then a good case on that session.
    fn on_session(
        &mut self,
        e: usize,
        hurt: impl FnOnce(&mut Session, &Entry, &mut Rng) -> Result<(), String>,
    ) -> Result<(), String> {
        let shared = self.shared.clone();
        let entry = &shared.catalog.entries[e];
        let slot = shared.slots.iter().position(|s| s.entry == e);
        let mut own = None;
        let (session, what) = match slot.filter(|_| self.rng.below(2) == 0) {
            Some(i) => {
                let long = self.long[i]
                    .as_mut()
                    .ok_or_else(|| format!("{}: no long-lived session", entry.name))?;
                let what = format!("shared model, long session, {} threads", long.threads);
                (&mut long.session, what)
            }
            None => {
                let methods = entry.load_methods();
                let how = methods[self.rng.below(methods.len())];
                let threads = self.rng.threads();
                let model =
                    load(entry, how).map_err(|err| format!("{}: load: {err}", entry.name))?;
                add(&shared.counters.loads[load_index(how)]);
                let s = new_session(&model, entry, threads)
                    .map_err(|err| format!("{}: session: {err}", entry.name))?;
                let what = format!("own load ({}), {threads} threads", load_name(how));
                (own.insert(s), what)
            }
        };
        hurt(session, entry, &mut self.rng).map_err(|err| format!("{err} ({what})"))?;
        // The session goes on: every good case still gives TVM's answer.
        let context = format!(
            "thread {}, iteration {}, after an injected error",
            self.id, self.iteration
        );
        for case in entry.good_cases() {
            shared.record(run_case(session, case, &what), &context);
        }
        Ok(())
    }

    /// Load a damaged copy of a library from memory; it must be refused with the expected
    /// error, and the intact bytes must then load and run.
    fn bad_load(&mut self, kind: Inject) -> Result<(), String> {
        let shared = self.shared.clone();
        let pick = |rng: &mut Rng, v: &[usize]| {
            rng.pick(v)
                .ok_or_else(|| "no model for this injection".to_string())
        };
        let (e, after) = match kind {
            Inject::TruncatedLibrary => {
                let all: Vec<usize> = (0..shared.catalog.entries.len()).collect();
                let e = pick(&mut self.rng, &all)?;
                let bytes = &shared.catalog.entries[e].so_bytes;
                let end = load_end(bytes).ok_or_else(|| {
                    format!("{}: no loadable segment", shared.catalog.entries[e].name)
                })?;
                let cut = self.rng.below(end);
                let r = Model::load_from_memory(&bytes[..cut]);
                expect_refusal(&r, &format!("cut at {cut} of {}", bytes.len()), |e| {
                    matches!(e, Error::Load { .. } | Error::Format(_))
                })?;
                (e, Load::Memory)
            }
            Inject::TruncatedCodeFreeSo => {
                let e = pick(&mut self.rng, &shared.code_free)?;
                let bytes = &shared.catalog.entries[e].so_bytes;
                let cut = self.rng.below(bytes.len());
                let r = Model::load_from_memory_with(&bytes[..cut], code_free());
                expect_refusal(
                    &r,
                    &format!("code-free, cut at {cut} of {}", bytes.len()),
                    |e| matches!(e, Error::Format(_) | Error::Unsupported(_)),
                )?;
                (e, Load::CodeFreeMemory)
            }
            Inject::TruncatedTar => {
                let e = pick(&mut self.rng, &shared.with_tar)?;
                let Some((_, bytes)) = &shared.catalog.entries[e].tar else {
                    return Err("no .tar".into());
                };
                let cut = self.rng.below(bytes.len());
                let r = Model::load_from_memory_with(&bytes[..cut], code_free());
                expect_refusal(&r, &format!(".tar cut at {cut} of {}", bytes.len()), |e| {
                    matches!(e, Error::Format(_) | Error::Unsupported(_))
                })?;
                (e, Load::CodeFreeTar)
            }
            Inject::BadExecutableMagic | Inject::BadExecutableVersion => {
                let relax: Vec<usize> = shared
                    .relax
                    .iter()
                    .copied()
                    .filter(|&i| shared.catalog.entries[i].zoo == Zoo::Main)
                    .collect();
                let e = pick(&mut self.rng, &relax)?;
                let mut bytes = shared.catalog.entries[e].so_bytes.clone();
                let at = executable_offset(&bytes).ok_or("no executable magic")?;
                if kind == Inject::BadExecutableMagic {
                    bytes[at + self.rng.below(8)] ^= 0xff;
                    let r = Model::load_from_memory(&bytes);
                    expect_refusal(
                        &r,
                        "executable magic flipped",
                        |e| matches!(e, Error::Format(m) if m.contains("bad magic")),
                    )?;
                } else {
                    // After the magic and the version string's length: TVM's "0.14".
                    let v = bytes
                        .get_mut(at + 16..at + 20)
                        .filter(|v| *v == b"0.14")
                        .ok_or("no executable version 0.14")?;
                    v.copy_from_slice(b"9.99");
                    let r = Model::load_from_memory(&bytes);
                    expect_refusal(&r, "executable version 9.99", |e| {
                        matches!(e, Error::Unsupported(_))
                    })?;
                }
                (e, Load::Memory)
            }
            Inject::RenamedKernel => {
                // mlp's function table names kernel `relu` (u64 length 4, then the name).
                let e = shared.mlp;
                let mut bytes = shared.catalog.entries[e].so_bytes.clone();
                let start = executable_offset(&bytes).ok_or("no executable magic")?;
                let needle = [&4u64.to_le_bytes()[..], b"relu"].concat();
                let at = bytes[start..]
                    .windows(needle.len())
                    .position(|w| w == needle)
                    .ok_or("no `relu` in mlp's function table")?
                    + start;
                bytes[at + 8..at + 12].copy_from_slice(b"relv");
                let r = Model::load_from_memory(&bytes);
                expect_refusal(
                    &r,
                    "kernel relu renamed relv",
                    |e| matches!(e, Error::MissingFunctions { names } if names == &["relv"]),
                )?;
                (e, Load::Memory)
            }
            Inject::NotALibrary => {
                let len = self.rng.below(4096);
                let mut bytes: Vec<u8> = (0..len).map(|_| self.rng.next() as u8).collect();
                if let Some(b) = bytes.first_mut() {
                    *b = b'X'; // neither ELF nor Mach-O
                }
                let r = Model::load_from_memory(&bytes);
                expect_refusal(
                    &r,
                    &format!("{len} random bytes"),
                    |e| matches!(e, Error::Load { message, .. } if message.contains("bad magic")),
                )?;
                let e = self.rng.below(shared.catalog.entries.len());
                (e, Load::Memory)
            }
            Inject::NotCodeFree => {
                let mut candidates = shared.not_code_free.clone();
                candidates.extend(shared.main_zoo.iter().copied());
                let e = pick(&mut self.rng, &candidates)?;
                let entry = &shared.catalog.entries[e];
                // A Relax program that calls kernels is refused naming them; a kernel-only
                // library (no program at all) for what it is.
                let needle = if entry.kernel_library {
                    "kernel-only library"
                } else {
                    "is not code-free"
                };
                let r = Model::load_from_memory_with(&entry.so_bytes, code_free());
                expect_refusal(
                    &r,
                    "code-free load of a library with kernels",
                    |e| matches!(e, Error::Unsupported(m) if m.contains(needle)),
                )?;
                (e, Load::Memory)
            }
            other => return Err(format!("{other:?} is not a load error")),
        };
        let entry = &shared.catalog.entries[e];
        let methods = entry.load_methods();
        let how = if methods.contains(&after) {
            after
        } else {
            Load::Memory
        };
        self.load_and_run(entry, how);
        Ok(())
    }
}

/// Count an expected-error case as an injected error before it runs.
fn count_case(shared: &Shared, case: &Case) {
    if matches!(case.expect, Expect::KernelError(_)) {
        add(&shared.counters.errors_injected);
    }
}

fn describe<T>(r: &mote::Result<T>) -> String {
    match r {
        Ok(_) => "it succeeded".into(),
        Err(e) => format!("got {e:?}"),
    }
}

fn expect_refusal(
    r: &mote::Result<Model>,
    what: &str,
    expected: impl Fn(&Error) -> bool,
) -> Result<(), String> {
    match r {
        Err(e) if expected(e) => Ok(()),
        Err(e) => Err(format!("{what}: unexpected error {e:?}")),
        Ok(_) => Err(format!("{what}: the damaged library loaded")),
    }
}

/// The manifest's cases where TVM raises, on this session.
fn expected_error_cases(s: &mut Session, entry: &Entry, name: &str) -> Result<(), String> {
    let mut seen = 0;
    for case in entry
        .cases
        .iter()
        .filter(|c| matches!(c.expect, Expect::KernelError(_)))
    {
        match run_case(s, case, "injected")? {
            Outcome::ExpectedError => seen += 1,
            Outcome::Checked => return Err(format!("{}: no error", case.label)),
        }
    }
    if seen == 0 {
        return Err(format!("{name} has no case where TVM raises"));
    }
    Ok(())
}

fn relax_error(kind: Inject, s: &mut Session, entry: &Entry, rng: &mut Rng) -> Result<(), String> {
    let calls = entry.good_calls();
    let case = calls[rng.below(calls.len())];
    const NO_SUCH: &str = "soak_no_such_function";
    match kind {
        Inject::UnknownFunction => match s.call(NO_SUCH, &tensor_args(&case.inputs)) {
            Err(Error::UnknownFunction { name, available })
                if name == NO_SUCH && !available.is_empty() =>
            {
                Ok(())
            }
            r => Err(format!(
                "{}: call `{NO_SUCH}`: {}",
                case.label,
                describe(&r)
            )),
        },
        Inject::SetInputUnknownFunction => match s.set_input(NO_SUCH, tensor_args(&case.inputs)) {
            Err(Error::UnknownFunction { name, .. }) if name == NO_SUCH => Ok(()),
            r => Err(format!(
                "{}: set_input `{NO_SUCH}`: {}",
                case.label,
                describe(&r)
            )),
        },
        Inject::InvokeWithoutInputs | Inject::OutputNeverInvoked => {
            let functions = entry.never_stateful();
            let Some(&f) = functions.get(rng.below(functions.len().max(1))) else {
                return Ok(()); // every function of this model runs statefully somewhere
            };
            if kind == Inject::InvokeWithoutInputs {
                match s.invoke_stateful(f) {
                    Err(Error::InvalidArgument(m)) if m.contains("no inputs were set") => Ok(()),
                    r => Err(format!(
                        "{}: invoke_stateful `{f}`: {}",
                        entry.name,
                        describe(&r)
                    )),
                }
            } else {
                match s.get_output(f) {
                    Err(Error::InvalidArgument(m)) if m.contains("has not been invoked") => Ok(()),
                    r => Err(format!(
                        "{}: get_output `{f}`: {}",
                        entry.name,
                        describe(&r)
                    )),
                }
            }
        }
        _ => {
            let (args, expected) = bad_arguments(kind, case)?;
            let n = case.inputs.len();
            let r = s.call(&case.function, &args);
            let ok = match (&r, expected) {
                (Err(Error::Mismatch(_)), "mismatch") => true,
                (
                    Err(Error::ArgumentCount {
                        expected, given, ..
                    }),
                    "count",
                ) => *expected == n && *given == args.len(),
                _ => false,
            };
            if ok {
                Ok(())
            } else {
                Err(format!("{}: {kind:?}: {}", case.label, describe(&r)))
            }
        }
    }
}

fn kernel_library_error(kind: Inject, s: &mut Session, entry: &Entry) -> Result<(), String> {
    let case = entry
        .good_cases()
        .into_iter()
        .find(|c| matches!(&c.mode, Mode::Kernel { outputs, .. } if !outputs.is_empty()))
        .ok_or_else(|| format!("{}: no kernel case with outputs", entry.name))?;
    let Mode::Kernel { scalars, outputs } = &case.mode else {
        return Err(format!("{}: not a kernel case", case.label));
    };
    let mut args = kernel_args(case, scalars, outputs)?;
    match kind {
        Inject::UnknownKernel => match s.call_kernel("soak_no_such_kernel", &mut args) {
            Err(Error::UnknownFunction { name, .. }) if name == "soak_no_such_kernel" => Ok(()),
            r => Err(format!("{}: unknown kernel: {}", entry.name, describe(&r))),
        },
        Inject::SharedKernelTensor => {
            let out = outputs[0];
            let kept = args[out]
                .as_tensor()
                .cloned()
                .ok_or("output is not a tensor")?;
            let r = s.call_kernel(&case.function, &mut args);
            if !matches!(&r, Err(Error::InvalidArgument(m)) if m.contains("shared")) {
                return Err(format!("{}: shared output: {}", case.label, describe(&r)));
            }
            // Refused before the kernel ran: the buffer is still all 0xFF.
            if kept.data().iter().any(|&b| b != 0xFF) {
                return Err(format!("{}: a refused call wrote its output", case.label));
            }
            Ok(())
        }
        Inject::CallOnKernelLibrary => match s.call(&case.function, &args) {
            Err(Error::InvalidArgument(m)) if m.contains("call_kernel") => Ok(()),
            r => Err(format!("{}: Session::call: {}", case.label, describe(&r))),
        },
        other => Err(format!("{other:?} is not a kernel-library error")),
    }
}

fn callback_error(kind: Inject, s: &mut Session, entry: &Entry) -> Result<(), String> {
    let case = entry.good_calls()[0];
    let x = case.inputs.first().ok_or("packed: no input")?;
    let mut values = x.as_slice::<f32>().map_err(|e| e.to_string())?.to_vec();
    let (sentinel, needle) = if kind == Inject::CallbackError {
        (CALLBACK_ERROR_SENTINEL, INJECTED_CALLBACK_ERROR)
    } else {
        (CALLBACK_PANIC_SENTINEL, "panicked")
    };
    *values.first_mut().ok_or("packed: empty input")? = sentinel;
    let bad = Tensor::from_slice(x.shape(), &values).map_err(|e| e.to_string())?;
    match s.call(&case.function, &[Value::Tensor(bad)]) {
        Err(e @ Error::Kernel { .. })
            if e.to_string().contains(needle) && e.to_string().contains("mote.zoo.scale_shift") =>
        {
            Ok(())
        }
        r => Err(format!(
            "{}: callback {kind:?}: {}",
            case.label,
            describe(&r)
        )),
    }
}

// ---------------------------------------------------------------- sampling

#[derive(Clone, Copy)]
struct Sample {
    elapsed: f64,
    iterations: u64,
    runs_checked: u64,
    injected: u64,
    expected: u64,
    failures: u64,
    rss_kib: u64,
    fds: u64,
    maps: u64,
    threads: u64,
}

impl Sample {
    fn rss_mib(&self) -> f64 {
        self.rss_kib as f64 / 1024.0
    }
}

/// Resident KiB, open descriptors, mapped regions and threads of this process.
fn process_usage() -> Result<(u64, u64, u64, u64), String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|e| format!("/proc/self/status: {e}"))?;
    let field = |name: &str| -> Result<u64, String> {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.split_whitespace().next())
            .and_then(|v| v.parse().ok())
            .ok_or_else(|| format!("/proc/self/status: no {name}"))
    };
    let fds = std::fs::read_dir("/proc/self/fd")
        .map_err(|e| format!("/proc/self/fd: {e}"))?
        .count() as u64;
    let maps = std::fs::read_to_string("/proc/self/maps")
        .map_err(|e| format!("/proc/self/maps: {e}"))?
        .lines()
        .count() as u64;
    Ok((field("VmRSS:")?, fds, maps, field("Threads:")?))
}

/// What the open descriptors point at (`/proc/self/fd` links), with how many point there.
/// Numbers are left out: a reloaded model's memory file comes back under another number.
fn descriptors() -> BTreeMap<String, usize> {
    let mut open = BTreeMap::new();
    let Ok(dir) = std::fs::read_dir("/proc/self/fd") else {
        return open;
    };
    for e in dir.flatten() {
        let target = std::fs::read_link(e.path())
            .map_or_else(|err| format!("({err})"), |t| t.display().to_string());
        // The listing's own handle on the directory.
        if target.starts_with("/proc/") && target.ends_with("/fd") {
            continue;
        }
        *open.entry(target).or_insert(0) += 1;
    }
    open
}

/// What `now` has open more often than `then`, as `target (+n)`.
fn new_descriptors(then: &BTreeMap<String, usize>, now: &BTreeMap<String, usize>) -> Vec<String> {
    now.iter()
        .filter_map(|(t, &n)| {
            let before = then.get(t).copied().unwrap_or(0);
            (n > before).then(|| format!("{t} (+{})", n - before))
        })
        .collect()
}

fn take_sample(shared: &Shared, start: Instant) -> Result<Sample, String> {
    let (rss_kib, fds, maps, threads) = process_usage()?;
    let c = &shared.counters;
    Ok(Sample {
        elapsed: start.elapsed().as_secs_f64(),
        iterations: get(&c.iterations),
        runs_checked: get(&c.runs_checked),
        injected: get(&c.errors_injected),
        expected: get(&c.errors_expected),
        failures: get(&c.failures),
        rss_kib,
        fds,
        maps,
        threads,
    })
}

fn print_header() {
    println!(
        "{:>9} {:>10} {:>12} {:>9} {:>9} {:>8} {:>8} {:>5} {:>6} {:>7}",
        "elapsed",
        "iterations",
        "runs-checked",
        "injected",
        "expected",
        "failures",
        "RSS-MiB",
        "fds",
        "maps",
        "threads"
    );
}

fn print_row(s: &Sample, note: &str) {
    println!(
        "{:>8.1}s {:>10} {:>12} {:>9} {:>9} {:>8} {:>8.1} {:>5} {:>6} {:>7}  {note}",
        s.elapsed,
        s.iterations,
        s.runs_checked,
        s.injected,
        s.expected,
        s.failures,
        s.rss_mib(),
        s.fds,
        s.maps,
        s.threads
    );
}

// ---------------------------------------------------------------- the run

fn run(config: &Config) -> Result<bool, String> {
    let (_, fds_before_loading, maps_before_loading, _) = process_usage()?;
    let open_before_loading = descriptors();
    let catalog = load_catalog()?;
    let n_models = catalog.entries.len();
    let n_cases: usize = catalog.entries.iter().map(|e| e.cases.len()).sum();
    let shared = Arc::new(build_shared(catalog)?);
    println!(
        "soak: {:.2} min, {} worker threads, seed {}, warm-up {:.0} s, a sample every {:.1} s",
        config.duration.as_secs_f64() / 60.0,
        config.threads,
        config.seed,
        config.warmup.as_secs_f64(),
        config.interval.as_secs_f64()
    );
    println!(
        "soak: {n_models} models ({} zoo, {} offload zoo), {n_cases} cases; shared: {}",
        shared.main_zoo.len(),
        shared.offload.len(),
        SHARED_MODELS
            .iter()
            .map(|(n, how)| format!("{n} ({})", load_name(*how)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    println!(
        "soak: bounds: RSS +{RSS_BOUND_MIB} MiB at the end and +{RSS_TREND_BOUND_MIB} MiB \
         from the first to the last quarter; fds ±{FD_SLACK}, maps ±{MAPS_SLACK} at every \
         sample after the baseline; threads unchanged"
    );

    let start = Instant::now();
    let mut handles = Vec::new();
    for id in 0..config.threads {
        let mine = shared.clone();
        let seed = config.seed.wrapping_add(id as u64);
        shared.gate.enter();
        let spawned = std::thread::Builder::new()
            .name(format!("soak-{id}"))
            .spawn(move || {
                let shared = mine;
                // Leave the gate however the worker ends, so that a sample never waits on it.
                struct Leave(Arc<Shared>);
                impl Drop for Leave {
                    fn drop(&mut self) {
                        self.0.gate.leave();
                    }
                }
                let _leave = Leave(shared.clone());
                let mut w = Worker {
                    id,
                    shared,
                    rng: Rng::new(seed),
                    iteration: 0,
                    long: Vec::new(),
                };
                w.run();
            });
        match spawned {
            Ok(h) => handles.push(h),
            Err(e) => {
                shared.gate.leave();
                shared.stop.store(true, Ordering::Relaxed);
                return Err(format!("cannot start worker {id}: {e}"));
            }
        }
    }

    print_header();
    let mut samples: Vec<Sample> = Vec::new();
    let mut baseline: Option<usize> = None;
    let mut problems: Vec<String> = Vec::new();
    // Samples after the baseline whose fds, maps or threads left it: (elapsed, deltas).
    let mut off: Vec<(f64, [i64; 3])> = Vec::new();
    // The descriptors open at the baseline, and the new ones already reported.
    let mut open_at_baseline = BTreeMap::new();
    let mut reported: BTreeSet<String> = BTreeSet::new();
    let end = start + config.duration;
    let mut k = 1u32;
    loop {
        let due = (start + config.interval * k).min(end);
        k += 1;
        let now = Instant::now();
        if due > now {
            std::thread::sleep(due - now);
        }
        let last = Instant::now() >= end;
        if let Err(e) = shared.gate.pause(QUIESCE_TIMEOUT) {
            println!("soak: FAILED: {e}");
            // A stuck worker cannot be joined: stop here.
            std::process::exit(1);
        }
        let sample = take_sample(&shared, start);
        let open = descriptors();
        if last {
            shared.stop.store(true, Ordering::Relaxed);
        }
        shared.gate.resume();
        let sample = sample?;
        samples.push(sample);
        let mut note = String::new();
        if baseline.is_none() && sample.elapsed >= config.warmup.as_secs_f64() {
            baseline = Some(samples.len() - 1);
            note.push_str("baseline");
            open_at_baseline = open.clone();
        }
        if let Some(b) = baseline {
            let base = samples[b];
            let d = [
                sample.fds as i64 - base.fds as i64,
                sample.maps as i64 - base.maps as i64,
                sample.threads as i64 - base.threads as i64,
            ];
            if d[0].abs() > FD_SLACK || d[1].abs() > MAPS_SLACK || d[2] != 0 {
                note.push_str(&format!(
                    " !fds {:+}, maps {:+}, threads {:+}",
                    d[0], d[1], d[2]
                ));
                off.push((sample.elapsed, d));
                let new: Vec<String> = new_descriptors(&open_at_baseline, &open)
                    .into_iter()
                    .filter(|d| reported.insert(d.clone()))
                    .collect();
                if !new.is_empty() {
                    eprintln!(
                        "soak: at {:.1} s, descriptors not open at the baseline: {}",
                        sample.elapsed,
                        new.join(", ")
                    );
                }
            }
        } else {
            note.push_str("warm-up");
        }
        print_row(&sample, note.trim());
        if last {
            break;
        }
    }

    // Join, with a deadline: a worker that never finishes its iteration is a failure too.
    let deadline = Instant::now() + QUIESCE_TIMEOUT;
    while handles.iter().any(|h| !h.is_finished()) {
        if Instant::now() > deadline {
            println!(
                "soak: FAILED: a worker did not stop within {} s",
                QUIESCE_TIMEOUT.as_secs()
            );
            std::process::exit(1);
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut died = 0;
    for h in handles {
        if h.join().is_err() {
            died += 1;
        }
    }
    if died > 0 {
        problems.push(format!("{died} worker threads died"));
    }
    if let Some(&(at, d)) = off.first() {
        let largest = |k: usize| off.iter().map(|(_, d)| d[k]).max_by_key(|v| v.abs());
        problems.push(format!(
            "fds, maps or threads off the baseline at {} of {} samples after it (first at \
             {at:.1} s: fds {:+}, maps {:+}, threads {:+}; largest: fds {:+}, maps {:+}, \
             threads {:+})",
            off.len(),
            baseline.map_or(0, |b| samples.len() - b),
            d[0],
            d[1],
            d[2],
            largest(0).unwrap_or(0),
            largest(1).unwrap_or(0),
            largest(2).unwrap_or(0)
        ));
    }
    let elapsed = start.elapsed();

    // Everything dropped: every descriptor a model held must be closed again.
    let mut shared =
        Arc::try_unwrap(shared).map_err(|_| "the workers still hold the shared state")?;
    let counters = std::mem::take(&mut shared.counters);
    drop(shared);
    let (_, fds_after, maps_after, _) = process_usage()?;
    let still_open = new_descriptors(&open_before_loading, &descriptors());
    if !still_open.is_empty() {
        eprintln!(
            "soak: open after teardown but not before loading: {}",
            still_open.join(", ")
        );
    }

    summarize(
        config,
        elapsed,
        &counters,
        &samples,
        baseline,
        problems,
        (fds_before_loading, maps_before_loading),
        (fds_after, maps_after),
    )
}

#[allow(clippy::too_many_arguments)]
fn summarize(
    config: &Config,
    elapsed: Duration,
    c: &Counters,
    samples: &[Sample],
    baseline: Option<usize>,
    mut problems: Vec<String>,
    before_loading: (u64, u64),
    after_teardown: (u64, u64),
) -> Result<bool, String> {
    let (failures, injected, expected) = (
        get(&c.failures),
        get(&c.errors_injected),
        get(&c.errors_expected),
    );
    println!(
        "soak: {:.1} s, {} worker threads, seed {}",
        elapsed.as_secs_f64(),
        config.threads,
        config.seed
    );
    println!(
        "soak: iterations {}, runs checked against TVM {}, errors injected {injected}, seen as \
         expected {expected}, failures {failures}, worker panics {}",
        get(&c.iterations),
        get(&c.runs_checked),
        get(&c.panics)
    );
    println!(
        "soak: loads: {}; reloads of shared models {}",
        LOADS
            .iter()
            .zip(&c.loads)
            .map(|((_, n), v)| format!("{n} {}", get(v)))
            .collect::<Vec<_>>()
            .join(", "),
        get(&c.reloads)
    );
    println!(
        "soak: injected: {}",
        INJECTIONS
            .iter()
            .zip(&c.injections)
            .map(|((_, n), v)| format!("{n} {}", get(v)))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if failures > 0 {
        problems.push(format!(
            "{failures} failures (printed above, the first {PRINTED_FAILURES})"
        ));
    }
    if injected != expected && failures == 0 {
        // Every injected error not seen as expected is a failure: this guards the counting.
        problems.push(format!(
            "{injected} errors injected but {expected} seen as expected, with no failure counted"
        ));
    }
    if get(&c.runs_checked) == 0 {
        problems.push("no run was checked".into());
    }
    let never: Vec<&str> = INJECTIONS
        .iter()
        .zip(&c.injections)
        .filter(|(_, v)| get(v) == 0)
        .map(|((_, n), _)| *n)
        .collect();
    if !never.is_empty() {
        problems.push(format!("never injected: {}", never.join(", ")));
    }
    let unused: Vec<&str> = LOADS
        .iter()
        .zip(&c.loads)
        .filter(|(_, v)| get(v) == 0)
        .map(|((_, n), _)| *n)
        .collect();
    if !unused.is_empty() {
        problems.push(format!("never loaded {}", unused.join(", ")));
    }

    match baseline {
        None => problems.push("no sample after the warm-up".into()),
        Some(b) => {
            let (base, last) = (samples[b], samples[samples.len() - 1]);
            let after = &samples[b..];
            let growth = last.rss_mib() - base.rss_mib();
            let q = (after.len() / 4).max(1);
            let max_of = |s: &[Sample]| s.iter().map(Sample::rss_mib).fold(0.0, f64::max);
            let (first_q, last_q) = (max_of(&after[..q]), max_of(&after[after.len() - q..]));
            println!(
                "soak: RSS baseline {:.1} MiB at {:.0} s, end {:.1} MiB ({growth:+.1} MiB, bound \
                 +{RSS_BOUND_MIB}); max of the first quarter {first_q:.1}, of the last {last_q:.1} \
                 ({:+.1} MiB, bound +{RSS_TREND_BOUND_MIB}; {} samples after the baseline)",
                base.rss_mib(),
                base.elapsed,
                last.rss_mib(),
                last_q - first_q,
                after.len()
            );
            println!(
                "soak: fds baseline {}, end {}; maps baseline {}, end {}; threads baseline {}, \
                 end {}",
                base.fds, last.fds, base.maps, last.maps, base.threads, last.threads
            );
            if growth > RSS_BOUND_MIB {
                problems.push(format!(
                    "RSS grew {growth:.1} MiB from the baseline (bound {RSS_BOUND_MIB})"
                ));
            }
            if last_q - first_q > RSS_TREND_BOUND_MIB {
                problems.push(format!(
                    "RSS trend: the last quarter's max is {:.1} MiB above the first's (bound \
                     {RSS_TREND_BOUND_MIB})",
                    last_q - first_q
                ));
            }
        }
    }
    println!(
        "soak: after teardown: fds {} (before loading {}), maps {} (before loading {})",
        after_teardown.0, before_loading.0, after_teardown.1, before_loading.1
    );
    if after_teardown.0 != before_loading.0 {
        problems.push(format!(
            "{} descriptors open after every model was dropped, {} before loading",
            after_teardown.0, before_loading.0
        ));
    }
    if problems.is_empty() {
        println!("soak: PASSED");
        Ok(true)
    } else {
        println!("soak: FAILED: {}", problems.join("; "));
        Ok(false)
    }
}
