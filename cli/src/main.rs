//! `mote`: inspect, run and benchmark models compiled by Apache TVM 0.27.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use mote::{DType, Dim, LoadOptions, Model, Session, SessionOptions, Tensor, Value};
use serde_json::json;

mod rpc;

#[derive(Parser)]
#[command(
    name = "mote",
    version,
    about = "Run models compiled by Apache TVM 0.27",
    after_help = "Exit status: 0 on success, 2 for a malformed or out-of-range argument, 3 when \
                  a budget ran out (--load-budget, --memory-budget, --max-registers, \
                  --stack-budget, --max-instructions or their defaults: the runtime's \
                  ResourceExhausted), 130 when the call was cancelled (Ctrl-C during `mote \
                  run`), 1 for any other error."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(clap::Args)]
struct BackendArgs {
    /// Backends for offloaded subgraphs, in order of preference (default: every available
    /// one, plug-ins first, `cpu` last).
    #[arg(long, value_delimiter = ',', value_name = "NAME,...")]
    backends: Vec<String>,
    /// Load a backend plug-in (e.g. libmote_acl.so) first. Repeatable.
    #[arg(long = "plugin", value_name = "LIB.so")]
    plugins: Vec<PathBuf>,
}

impl BackendArgs {
    fn load_plugins(&self) -> Res<()> {
        for p in &self.plugins {
            mote::backend::load_plugin(p)?;
        }
        Ok(())
    }
}

/// Most threads `--threads` accepts (the runtime's own limit).
const MAX_THREADS: u64 = 1024;
/// Most timed runs `--runs` accepts.
const MAX_RUNS: u64 = 10_000_000;
/// Most warm-up runs `--warmup` accepts.
const MAX_WARMUP: u64 = 10_000_000;
/// Most bytes of inputs generated for one call (4 GiB); also the largest `--dim` value, since
/// every element takes at least a byte. Larger inputs must be given as files.
const MAX_GENERATED_BYTES: u64 = 4 << 30;
/// Timings reserved up front by `bench`; the vector grows past this only as runs complete.
const TIMES_RESERVED: usize = 4096;

/// A whole number in `lo..=hi`. One message for every failure (negative, too large, not a
/// number), which clap prefixes with the flag and the value.
fn parse_count(s: &str, lo: u64, hi: u64) -> Result<u64, String> {
    s.parse::<u64>()
        .ok()
        .filter(|n| (lo..=hi).contains(n))
        .ok_or_else(|| format!("expected a whole number from {lo} to {hi}"))
}

fn parse_threads(s: &str) -> Result<usize, String> {
    let n = parse_count(s, 1, MAX_THREADS)?;
    usize::try_from(n).map_err(|_| format!("{n} does not fit this platform"))
}

fn parse_runs(s: &str) -> Result<usize, String> {
    let n = parse_count(s, 1, MAX_RUNS)?;
    usize::try_from(n).map_err(|_| format!("{n} does not fit this platform"))
}

fn parse_warmup(s: &str) -> Result<usize, String> {
    let n = parse_count(s, 0, MAX_WARMUP)?;
    usize::try_from(n).map_err(|_| format!("{n} does not fit this platform"))
}

fn parse_seed(s: &str) -> Result<u64, String> {
    parse_count(s, 0, u64::MAX)
}

/// A budget in bytes or a count, at least 1 (a budget of 0 would refuse every call).
fn parse_budget(s: &str) -> Result<u64, String> {
    parse_count(s, 1, u64::MAX)
}

fn parse_budget_usize(s: &str) -> Result<usize, String> {
    let n = parse_budget(s)?;
    usize::try_from(n).map_err(|_| format!("{n} does not fit this platform"))
}

/// `NAME=N`, with N in `1..=MAX_GENERATED_BYTES`.
fn parse_dim(s: &str) -> Result<(String, i64), String> {
    let Some((name, value)) = s.split_once('=') else {
        return Err("expected NAME=N (e.g. n=4)".into());
    };
    if name.is_empty() {
        return Err("expected NAME=N (e.g. n=4): the name is empty".into());
    }
    let n = parse_count(value, 1, MAX_GENERATED_BYTES).map_err(|e| format!("N: {e}"))?;
    let n = i64::try_from(n).map_err(|_| format!("N: {n} does not fit a dimension"))?;
    Ok((name.to_string(), n))
}

#[derive(clap::Args)]
struct InputArgs {
    /// Read the model as data instead of mapping it as code (docs/code-free.md); refused if
    /// its program calls compiled kernels.
    #[arg(long)]
    code_free: bool,
    /// Function to call.
    #[arg(long, short = 'f', default_value = "main")]
    function: String,
    /// An input: parameter name (or argN) = .npy file. Repeatable.
    #[arg(long = "input", value_name = "NAME=FILE.npy")]
    inputs: Vec<String>,
    /// Inputs from an .npz whose keys are parameter names or arg0, arg1, ...
    #[arg(long = "inputs", value_name = "FILE.npz")]
    npz: Option<PathBuf>,
    #[arg(
        long = "dim",
        value_name = "NAME=N",
        value_parser = parse_dim,
        allow_negative_numbers = true,
        help = format!(
            "Value of a symbolic dimension for generated inputs, N from 1 to \
             {MAX_GENERATED_BYTES} (default 1). Repeatable"
        ),
        long_help = format!(
            "Value of a symbolic dimension of the function's parameters, for generated inputs \
             (default 1). Repeatable, once per NAME.\n\
             N is a whole number from 1 to {MAX_GENERATED_BYTES}; zero-size dimensions are \
             refused (pass such an input with --input). The inputs generated for one call may \
             total at most {MAX_GENERATED_BYTES} bytes (4 GiB); larger ones must be given with \
             --input or --inputs."
        )
    )]
    dims: Vec<(String, i64)>,
    /// Seed for generated inputs (0 to 2^64-1).
    #[arg(long, default_value_t = 0, value_parser = parse_seed, allow_negative_numbers = true)]
    seed: u64,
    #[arg(
        long,
        value_name = "N",
        value_parser = parse_threads,
        allow_negative_numbers = true,
        help = format!(
            "Threads for parallel kernels, 1 to {MAX_THREADS} \
             (default: MOTE_NUM_THREADS, else the CPU count)"
        )
    )]
    threads: Option<usize>,
    /// For a model compiled for OpenCL: the device, an index into the devices OpenCL lists, in
    /// platform order (default: the first GPU, else the first device; docs/opencl.md §2).
    #[arg(long, value_name = "N")]
    opencl_device: Option<usize>,
    #[command(flatten)]
    backend: BackendArgs,
    #[command(flatten)]
    budgets: BudgetArgs,
}

/// The budgets of docs/untrusted-models.md: what a load and a session may use before the
/// runtime stops them with a `ResourceExhausted` error (exit status 3). Plain whole numbers;
/// unset, the runtime's defaults apply.
#[derive(clap::Args)]
struct BudgetArgs {
    /// Most bytes a code-free load may allocate to decode the file (inflating a gzip-compressed
    /// `.tar`). Default: 16 times the file's size plus 64 MiB, at most 4 GiB.
    #[arg(long, value_name = "BYTES", value_parser = parse_budget, allow_negative_numbers = true)]
    load_budget: Option<u64>,
    /// Most bytes of storage a call may hold at once. Default: half the physical memory.
    #[arg(long, value_name = "BYTES", value_parser = parse_budget_usize, allow_negative_numbers = true)]
    memory_budget: Option<usize>,
    /// Most VM registers all frames of a call may hold together. Default: 2^20.
    #[arg(long, value_name = "N", value_parser = parse_budget_usize, allow_negative_numbers = true)]
    max_registers: Option<usize>,
    /// Bytes of stack nested Relax calls may use. Default: 256 KiB.
    #[arg(long, value_name = "BYTES", value_parser = parse_budget_usize, allow_negative_numbers = true)]
    stack_budget: Option<usize>,
    /// Most VM instructions one call may execute. Default: 2^28.
    #[arg(long, value_name = "N", value_parser = parse_budget, allow_negative_numbers = true)]
    max_instructions: Option<u64>,
}

const RUN_ABOUT: &str = "Run a function once and print (or save) its outputs.

Kernel-only libraries (a TIR module exported on its own with tvm.compile(...).export_library; \
`mote inspect` says so and lists the kernels) are called as TVM calls them, \
lib[\"gemm\"](a, b, c): --function names a kernel, and --inputs/--input give every argument, \
outputs included, keyed by parameter name (as `mote inspect` lists them) or arg0, arg1, ... in \
order; a scalar parameter is a 0-d array. Output buffers start with whatever the file holds. \
Nothing is generated: a missing, unknown or mis-shaped argument is refused with exit status 2. \
--output writes every tensor argument after the call, keys arg0, arg1, ..., so the output \
buffers carry the result:

    mote run gemm.so --function gemm --inputs buffers.npz --output out.npz

`mote bench` takes the same arguments.";

#[derive(Subcommand)]
enum Command {
    /// Functions with parameter names, shapes and dtypes; kernels; constants; builtins.
    Inspect {
        model: PathBuf,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        /// Read the model as data instead of mapping it as code (docs/code-free.md).
        #[arg(long)]
        code_free: bool,
        /// Most bytes a code-free load may allocate to decode the file (as for `mote run`).
        #[arg(long, value_name = "BYTES", value_parser = parse_budget, allow_negative_numbers = true)]
        load_budget: Option<u64>,
        #[command(flatten)]
        backend: BackendArgs,
    },
    /// Run a function once and print (or save) its outputs.
    #[command(long_about = RUN_ABOUT)]
    Run {
        model: PathBuf,
        #[command(flatten)]
        io: InputArgs,
        /// Write the outputs to an .npz with keys out0, out1, ... (tuples flattened); for a
        /// kernel-only library, every tensor argument after the call, keys arg0, arg1, ...
        #[arg(long, value_name = "FILE.npz")]
        output: Option<PathBuf>,
    },
    /// Time a function: min/median/p90/max latency, optionally per kernel.
    #[command(
        long_about = "Time a function: min/median/p90/max latency, optionally per kernel.\n\n\
                      A kernel of a kernel-only library takes every argument, outputs included, \
                      from --inputs/--input, as with `mote run` (see `mote run --help`)."
    )]
    Bench {
        model: PathBuf,
        #[command(flatten)]
        io: InputArgs,
        #[arg(
            long,
            value_name = "N",
            default_value_t = 10,
            value_parser = parse_warmup,
            allow_negative_numbers = true,
            help = format!("Untimed runs first, 0 to {MAX_WARMUP} (the first run, timed alone, is \
                           reported as `first run` either way)")
        )]
        warmup: usize,
        #[arg(
            long,
            value_name = "N",
            default_value_t = 100,
            value_parser = parse_runs,
            allow_negative_numbers = true,
            help = format!("Timed runs, 1 to {MAX_RUNS}")
        )]
        runs: usize,
        /// Print time per kernel and builtin.
        #[arg(long)]
        profile: bool,
        /// Write a Chrome/Perfetto trace of a few runs.
        #[arg(long, value_name = "FILE.json")]
        trace: Option<PathBuf>,
        /// For a model on an OpenCL device: copy the tensor arguments to the device once and
        /// time calls that keep their results there (no host copies in the timed runs).
        #[arg(long)]
        device_resident: bool,
        /// For a model on an OpenCL device: write one call's kernel launches (sources, work
        /// sizes, arguments) to FILE, which `scripts/bench/opencl-replay.c` replays without Mote.
        #[arg(long, value_name = "FILE")]
        opencl_trace: Option<PathBuf>,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
    /// TVM RPC: let TVM's Python client (tvm.rpc) run models on this machine through Mote.
    #[command(subcommand)]
    Rpc(rpc::RpcCommand),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.command {
        Command::Inspect {
            model,
            json,
            code_free,
            load_budget,
            backend,
        } => inspect(&model, json, code_free, load_budget, &backend),
        Command::Run { model, io, output } => run(&model, &io, output.as_deref()),
        Command::Bench {
            model,
            io,
            warmup,
            runs,
            profile,
            trace,
            device_resident,
            opencl_trace,
            json,
        } => bench(
            &model,
            &io,
            warmup,
            runs,
            BenchExtras {
                profile,
                trace: trace.as_deref(),
                resident: device_resident,
                opencl_trace: opencl_trace.as_deref(),
            },
            json,
        ),
        Command::Rpc(cmd) => rpc::run(cmd),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            exit_status(e.as_ref())
        }
    }
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

/// Exit status 3: a budget of the load or session ran out (`mote::Error::ResourceExhausted`).
const EXIT_BUDGET: u8 = 3;
/// Exit status 130 (as a shell reports Ctrl-C): the call was cancelled (`mote::Error::Cancelled`).
const EXIT_CANCELLED: u8 = 130;

/// The exit status of a failed command (the `after_help` of `Cli` lists them).
fn exit_status(e: &(dyn std::error::Error + 'static)) -> ExitCode {
    if e.is::<Usage>() {
        // The same status as clap's own usage errors.
        return ExitCode::from(2);
    }
    match e.downcast_ref::<mote::Error>() {
        Some(mote::Error::ResourceExhausted { .. }) => ExitCode::from(EXIT_BUDGET),
        Some(mote::Error::Cancelled) => ExitCode::from(EXIT_CANCELLED),
        _ => ExitCode::FAILURE,
    }
}

/// An argument found wrong only once the model is known (a `--dim` it does not have, inputs too
/// large to generate): exit status 2, like the errors clap reports while parsing.
#[derive(Debug)]
struct Usage(String);

impl std::fmt::Display for Usage {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

fn usage<T>(msg: String) -> Res<T> {
    Err(Box::new(Usage(msg)))
}

/// A parameter's or output's type as `inspect` prints it: `float32[2, n]`, `?` for what is
/// unknown.
fn type_text(p: &mote::ParamInfo) -> String {
    format!(
        "{}{}",
        p.dtype.map(|d| d.to_string()).unwrap_or_else(|| "?".into()),
        shape_text(&p.shape)
    )
}

fn param_json(p: &mote::ParamInfo) -> serde_json::Value {
    json!({
        "name": p.name,
        "dtype": p.dtype.map(|d| d.to_string()),
        "shape": p.shape.as_ref().map(|s| s.iter().map(|d| match d {
            Dim::Fixed(v) => json!(v),
            Dim::Var(n) => json!(n),
        }).collect::<Vec<_>>()),
    })
}

fn shape_text(shape: &Option<Vec<Dim>>) -> String {
    match shape {
        Some(d) => format!(
            "[{}]",
            d.iter()
                .map(|d| d.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        ),
        None => "[?]".into(),
    }
}

/// `inspect` of a kernel-only library: its kernels and what their probe reports.
fn inspect_kernels(path: &std::path::Path, model: &Model, as_json: bool) -> Res<()> {
    let kernels: Vec<(String, Option<mote::KernelSignature>)> = model
        .function_names()
        .into_iter()
        .map(|k| {
            let sig = model.kernel_signature(&k);
            (k, sig)
        })
        .collect();
    let device = model.device_kernels();
    if as_json {
        let j = json!({
            "path": path.display().to_string(),
            "kind": "kernel_library",
            "device_kernels": device.iter().map(|k| json!({
                "device": k.device,
                "name": k.name,
                "params": k.params,
                "launch": k.launch,
            })).collect::<Vec<_>>(),
            "functions": kernels.iter().map(|(k, sig)| json!({
                "name": k,
                "params": sig.as_ref().map(|s| s.params.iter().map(|(n, d, sh)| json!({
                    "name": n,
                    "kind": if d.is_none() && sh.is_none() { "scalar" } else { "tensor" },
                    "dtype": d.map(|d| d.to_string()),
                    "shape": sh.as_ref().map(|s| s.iter().map(|d| match d {
                        Dim::Fixed(v) => json!(v),
                        Dim::Var(n) => json!(n),
                    }).collect::<Vec<_>>()),
                })).collect::<Vec<_>>()),
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&j)?);
        return Ok(());
    }
    println!("model: {}", path.display());
    println!(
        "kernel-only library (no Relax VM): each function is a kernel, called with every \
         argument, outputs included"
    );
    println!("kernels ({}):", kernels.len());
    for (k, sig) in &kernels {
        match sig {
            Some(sig) => println!("  {k}({})", signature_text(&sig.params)),
            None => println!("  {k}  (parameters unknown: the kernel did not report them)"),
        }
    }
    if !device.is_empty() {
        println!("device kernels the host code launches ({}):", device.len());
        for k in &device {
            println!(
                "  {} {}({}) launched with {}",
                k.device,
                k.name,
                k.params.join(", "),
                k.launch.join(", ")
            );
        }
    }
    Ok(())
}

/// Load `path`, code-free when asked (on iOS-like targets, always: `LoadOptions::default()`).
/// A `kB` field of `/proc/self/status` (`VmRSS`: resident now; `VmHWM`: peak resident), where
/// the system has one (Linux, Android).
fn proc_status_kib(field: &str) -> Option<u64> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    status.lines().find_map(|line| {
        let rest = line.strip_prefix(field)?.strip_prefix(':')?;
        rest.trim().strip_suffix("kB")?.trim().parse().ok()
    })
}

fn load(path: &std::path::Path, code_free: bool, budget: Option<u64>) -> mote::Result<Model> {
    let mut options = LoadOptions::default();
    if code_free {
        options = options.code_free(true);
    }
    if let Some(bytes) = budget {
        options = options.memory_budget(bytes);
    }
    Model::load_with(path, options)
}

/// The `code-free:` line of `inspect`.
fn code_free_text(model: &Model) -> String {
    if model.is_loaded_code_free() {
        "yes (read as data, nothing mapped as code)".into()
    } else if model.is_code_free() {
        "yes (calls no compiled kernel; loadable with --code-free)".into()
    } else if model.is_kernel_library() {
        "no (a kernel-only library)".into()
    } else {
        format!("no (calls compiled kernels {})", model.kernels().join(", "))
    }
}

fn inspect(
    path: &std::path::Path,
    as_json: bool,
    code_free: bool,
    load_budget: Option<u64>,
    backend: &BackendArgs,
) -> Res<()> {
    backend.load_plugins()?;
    let model = load(path, code_free, load_budget)?;
    if model.is_kernel_library() {
        return inspect_kernels(path, &model, as_json);
    }
    let mut funcs = Vec::new();
    for name in model.function_names() {
        funcs.push(model.function_info(&name)?);
    }
    let kernels = model.kernels();
    let (nconst, const_bytes) = model.constant_bytes();
    // The partition plan of offloaded subgraphs, for the requested (or default) backend order.
    let plan = model.partition_plan(&backend.backends);
    if as_json {
        let j = json!({
            "path": path.display().to_string(),
            "kind": "relax",
            "code_free": model.is_code_free(),
            "loaded_code_free": model.is_loaded_code_free(),
            "functions": funcs.iter().map(|f| json!({
                "name": f.name,
                "params": f.params.iter().map(param_json).collect::<Vec<_>>(),
                "outputs": f.outputs.as_ref().map(|o| o.iter().map(param_json).collect::<Vec<_>>()),
            })).collect::<Vec<_>>(),
            "kernels": kernels.iter().map(|k| json!({
                "name": k,
                "params": model.kernel_signature(k).map(|s| s.params.iter().map(|(n, d, sh)| json!({
                    "name": n, "dtype": d.map(|d| d.to_string()), "shape": sh.as_ref().map(|s| shape_text(&Some(s.clone()))),
                })).collect::<Vec<_>>()),
            })).collect::<Vec<_>>(),
            "builtins": model.builtins(),
            "registered_functions": model.registered_functions(),
            "constants": {"tensors": nconst, "bytes": const_bytes},
            "subgraphs": plan.iter().map(|s| json!({
                "function": s.function,
                "name": s.name,
                "target": s.target,
                "backends": s.backends,
                "symbols": s.symbols,
                "unavailable": s.unavailable.iter().map(|(b, why)| json!({
                    "backend": b, "reason": why,
                })).collect::<Vec<_>>(),
                "nodes": s.nodes.iter().map(|n| json!({
                    "name": n.name,
                    "op": n.op,
                    "backend": n.backend,
                    "fallback_reasons": n.fallback_reasons,
                })).collect::<Vec<_>>(),
                "segments": s.segments.iter().map(|(b, start, len)| json!({
                    "backend": b, "first_node": start, "nodes": len,
                })).collect::<Vec<_>>(),
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string_pretty(&j)?);
        return Ok(());
    }
    println!("model: {}", path.display());
    println!("code-free: {}", code_free_text(&model));
    println!("functions:");
    for f in &funcs {
        let ps: Vec<String> = f
            .params
            .iter()
            .map(|p| format!("{}: {}", p.name, type_text(p)))
            .collect();
        // `-> ?` when the bytecode does not say how many outputs there are.
        let outs = match &f.outputs {
            None => "?".to_string(),
            Some(o) if o.len() == 1 => type_text(&o[0]),
            Some(o) => format!(
                "({})",
                o.iter().map(type_text).collect::<Vec<_>>().join(", ")
            ),
        };
        println!("  {}({}) -> {outs}", f.name, ps.join(", "));
    }
    println!("kernels ({}):", kernels.len());
    for k in &kernels {
        match model.kernel_signature(k) {
            Some(sig) => {
                let ps: Vec<String> = sig
                    .params
                    .iter()
                    .map(|(n, d, s)| match d {
                        Some(d) => format!("{n}: {d}{}", shape_text(s)),
                        None => n.clone(),
                    })
                    .collect();
                println!("  {k}({})", ps.join(", "));
            }
            None => println!("  {k}"),
        }
    }
    println!("constants: {nconst} tensors, {const_bytes} bytes");
    let (in_file, in_file_bytes) = model.constants_in_file();
    if in_file > 0 {
        println!(
            "  {in_file} of them ({in_file_bytes} bytes) read only by offloaded subgraphs: left in the file, read when a backend prepares them"
        );
    }
    println!(
        "builtins ({}): {}",
        model.builtins().len(),
        model.builtins().join(", ")
    );
    let reg = model.registered_functions();
    if !reg.is_empty() {
        println!("registered functions: {}", reg.join(", "));
    }
    if !plan.is_empty() {
        println!("offloaded subgraphs ({}):", plan.len());
        for s in &plan {
            println!(
                "  {} in {} (target {}, backends {}):",
                s.name,
                s.function,
                if s.target.is_empty() { "?" } else { &s.target },
                s.backends.join(" > ")
            );
            for (b, why) in &s.unavailable {
                println!("    ({b} is unavailable here: {why})");
            }
            if !s.symbols.is_empty() {
                println!(
                    "    (symbolic dimensions {}: planned here at sample sizes, and at each \
                     call's sizes when first seen)",
                    s.symbols.join(", ")
                );
            }
            for n in &s.nodes {
                println!("    {:<24} {:<18} -> {}", n.name, n.op, n.backend);
                for r in &n.fallback_reasons {
                    println!("      fallback: {r}");
                }
            }
        }
    }
    Ok(())
}

/// A small deterministic generator (xorshift64*), so generated inputs are reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

/// How generated elements of a dtype are written.
#[derive(Clone, Copy)]
enum Fill {
    F32,
    F64,
    F16,
    BF16,
    Bool,
    /// Little-endian integers of this many bytes (1 to 8).
    Uint(usize),
    Int(usize),
}

impl Fill {
    fn of(dtype: DType) -> Option<Fill> {
        let whole_bytes = dtype.lanes == 1 && matches!(dtype.bits, 8 | 16 | 32 | 64);
        Some(match dtype {
            DType::F32 => Fill::F32,
            DType::F64 => Fill::F64,
            DType::F16 => Fill::F16,
            DType::BF16 => Fill::BF16,
            DType::BOOL => Fill::Bool,
            // TVM's older spelling of bool: one byte, 0 or 1.
            d if d.lanes == 1 && d.code == mote_dtype_code::UINT && d.bits == 1 => Fill::Bool,
            d if whole_bytes && d.code == mote_dtype_code::UINT => Fill::Uint(d.size_bytes()),
            d if whole_bytes && d.code == mote_dtype_code::INT => Fill::Int(d.size_bytes()),
            _ => return None,
        })
    }
}

/// Bytes of a tensor of this shape and element size, or `None` if a dimension is negative or
/// the size does not fit 64 bits.
fn tensor_bytes(shape: &[i64], elem_bytes: usize) -> Option<u64> {
    shape
        .iter()
        .try_fold(u64::try_from(elem_bytes).ok()?, |acc, &d| {
            acc.checked_mul(u64::try_from(d).ok()?)
        })
}

/// A tensor of uniform values in [-1, 1) (integers: small values; bool: half true). The caller
/// has checked the shape and the size; this fills a zeroed tensor in place, without a copy.
fn random_tensor(shape: &[i64], dtype: DType, fill: Fill, rng: &mut Rng) -> Res<Tensor> {
    let mut t = Tensor::zeros(shape, dtype)?;
    let elem = dtype.size_bytes().max(1);
    for out in t.data_mut()?.chunks_exact_mut(elem) {
        let u = rng.unit();
        let f = u * 2.0 - 1.0;
        match fill {
            Fill::F32 => out.copy_from_slice(&(f as f32).to_le_bytes()),
            Fill::F64 => out.copy_from_slice(&f.to_le_bytes()),
            Fill::F16 => out.copy_from_slice(&half::f16::from_f64(f).to_le_bytes()),
            Fill::BF16 => out.copy_from_slice(&half::bf16::from_f64(f).to_le_bytes()),
            Fill::Bool => out[0] = (u < 0.5) as u8,
            Fill::Uint(n) => out.copy_from_slice(&((u * 16.0) as u64).to_le_bytes()[..n]),
            Fill::Int(n) => out.copy_from_slice(&((f * 8.0).floor() as i64).to_le_bytes()[..n]),
        }
    }
    Ok(t)
}

mod mote_dtype_code {
    pub const INT: u8 = 0;
    pub const UINT: u8 = 1;
}

fn parse_kv(s: &str, what: &str) -> Res<(String, String)> {
    match s.split_once('=') {
        Some((k, v)) => Ok((k.to_string(), v.to_string())),
        None => usage(format!("{what} `{s}` is not NAME=VALUE")),
    }
}

/// The arrays of `--inputs` and of `--input`, by key, in two maps.
fn read_files(io: &InputArgs) -> Res<[HashMap<String, Tensor>; 2]> {
    let mut npz: HashMap<String, Tensor> = HashMap::new();
    if let Some(path) = &io.npz {
        npz.extend(mote::npy::read_npz(path)?);
    }
    let mut npy: HashMap<String, Tensor> = HashMap::new();
    for s in &io.inputs {
        let (k, file) = parse_kv(s, "--input")?;
        npy.insert(k, mote::npy::read_npy(&file)?);
    }
    Ok([npz, npy])
}

/// The arrays of `--inputs` and `--input`, by key (an `--input` replaces an array of the same
/// key from the .npz).
fn read_given(io: &InputArgs) -> Res<HashMap<String, Tensor>> {
    let [mut given, npy] = read_files(io)?;
    given.extend(npy);
    Ok(given)
}

/// Arguments for a kernel of a kernel-only library: every one, outputs included, from the
/// files, in parameter order. Nothing is generated: the output buffers are arguments too, and
/// a missing file is more likely a mistake than a wish for random data. With the kernel's
/// signature (its zero-argument probe) every array is checked against its parameter, and a
/// 0-d array for a scalar parameter becomes that scalar; without one, the keys must be
/// `arg0, arg1, ...` and the kernel's own checks are all there is.
fn gather_kernel_args(model: &Model, io: &InputArgs) -> Res<Vec<Value>> {
    let f = &io.function;
    if !model.function_names().contains(f) {
        // The runtime's own error, which names the kernels there are.
        return Err(model.function_info(f).err().map_or_else(
            || format!("no kernel named `{f}`").into(),
            |e| Box::new(e) as Box<dyn std::error::Error>,
        ));
    }
    if let Some((k, v)) = io.dims.first() {
        return usage(format!(
            "--dim {k}={v}: {} is a kernel-only library, whose kernels take every argument \
             from --input/--inputs; nothing is generated",
            model.path().display()
        ));
    }
    let Some(sig) = model.kernel_signature(f) else {
        let mut given = read_given(io)?;
        // Unknown parameters: positional keys, contiguous from arg0.
        let n = given.len();
        let mut args = Vec::with_capacity(n);
        for i in 0..n {
            match given.remove(&format!("arg{i}")) {
                Some(t) => args.push(Value::Tensor(t)),
                None => {
                    return usage(format!(
                        "kernel `{f}` does not report its parameters, so its {n} arguments must \
                         be named arg0 to arg{}; arg{i} is missing",
                        n.saturating_sub(1)
                    ))
                }
            }
        }
        return Ok(args);
    };
    // An --input replaces the .npz's array for the same parameter, under either key.
    let [mut npz, mut npy] = read_files(io)?;
    let names: Vec<&str> = sig.params.iter().map(|(n, ..)| n.as_str()).collect();
    let mut unknown: Vec<&String> = npz
        .keys()
        .chain(npy.keys())
        .filter(|k| {
            !names.contains(&k.as_str())
                && !k
                    .strip_prefix("arg")
                    .and_then(|i| i.parse::<usize>().ok())
                    .is_some_and(|i| i < names.len() && k.as_str() == format!("arg{i}"))
        })
        .collect();
    if !unknown.is_empty() {
        unknown.sort();
        return usage(format!(
            "kernel `{f}` has no parameter {} (it takes {} arguments: {})",
            unknown
                .iter()
                .map(|k| format!("`{k}`"))
                .collect::<Vec<_>>()
                .join(", "),
            names.len(),
            signature_text(&sig.params)
        ));
    }
    let mut args = Vec::with_capacity(names.len());
    let mut missing = Vec::new();
    // Values of symbolic dimensions, from the first argument that has them.
    let mut dims: HashMap<&str, (i64, usize)> = HashMap::new();
    for (i, (name, dtype, shape)) in sig.params.iter().enumerate() {
        let what = format!("`{name}` (arg{i})");
        let take = |from: &mut HashMap<String, Tensor>, source: &str| match (
            from.remove(name),
            from.remove(&format!("arg{i}")),
        ) {
            (Some(_), Some(_)) => usage(format!(
                "{what} is given twice in {source}, as `{name}` and as `arg{i}`"
            )),
            (t, None) | (None, t) => Ok(t),
        };
        let (from_npy, from_npz) = (take(&mut npy, "--input")?, take(&mut npz, "--inputs")?);
        let Some(t) = from_npy.or(from_npz) else {
            missing.push(format!(
                "{name} (arg{i}): {}",
                param_type_text(dtype, shape)
            ));
            continue;
        };
        let (Some(dtype), Some(shape)) = (dtype, shape) else {
            args.push(scalar_arg(&what, &t)?);
            continue;
        };
        let wrong = || {
            usage(format!(
                "{what} must be {}, got {}{:?}",
                param_type_text(&Some(*dtype), &Some(shape.clone())),
                t.dtype(),
                t.shape()
            ))
        };
        if t.dtype() != *dtype || t.ndim() != shape.len() {
            return wrong();
        }
        for (d, (want, &got)) in shape.iter().zip(t.shape()).enumerate() {
            match want {
                Dim::Fixed(v) if *v != got => return wrong(),
                Dim::Fixed(_) => {}
                Dim::Var(n) => match dims.get(n.as_str()) {
                    Some(&(v, at)) if v != got => {
                        return usage(format!(
                            "{what}: dimension {d} is `{n}`, which is {got} here but {v} in arg{at}"
                        ))
                    }
                    Some(_) => {}
                    None => {
                        dims.insert(n, (got, i));
                    }
                },
            }
        }
        args.push(Value::Tensor(t));
    }
    if !missing.is_empty() {
        return usage(format!(
            "missing arguments of kernel `{f}`: {}; a kernel takes every argument, outputs \
             included, from --input NAME=FILE.npy or --inputs FILE.npz (keys: parameter names \
             or arg0, arg1, ...)",
            missing.join(", ")
        ));
    }
    Ok(args)
}

/// A 0-d array given for a scalar parameter, as that scalar.
fn scalar_arg(what: &str, t: &Tensor) -> Res<Value> {
    if t.ndim() != 0 {
        return usage(format!(
            "{what} is a scalar: give it as a 0-d array, not {}{:?}",
            t.dtype(),
            t.shape()
        ));
    }
    let b = t.data();
    let le = |n: usize| -> [u8; 8] {
        let mut a = [0u8; 8];
        a[..n].copy_from_slice(&b[..n]);
        a
    };
    Ok(match t.dtype() {
        DType::F64 => Value::Float(f64::from_le_bytes(le(8))),
        DType::F32 => Value::Float(f32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f64),
        DType::F16 => Value::Float(half::f16::from_le_bytes([b[0], b[1]]).to_f64()),
        DType::BOOL => Value::Bool(b[0] != 0),
        d if d.lanes == 1
            && d.code == mote_dtype_code::INT
            && matches!(d.bits, 8 | 16 | 32 | 64) =>
        {
            let n = d.size_bytes();
            // Sign-extend from the element's width.
            let shift = 64 - 8 * n as u32;
            Value::Int((i64::from_le_bytes(le(n)) << shift) >> shift)
        }
        d if d.lanes == 1 && d.code == mote_dtype_code::UINT && matches!(d.bits, 8 | 16 | 32) => {
            Value::Int(u64::from_le_bytes(le(d.size_bytes())) as i64)
        }
        d => {
            return usage(format!(
                "{what} is a scalar, and a {d} array cannot give one (use an integer, float or \
                 bool array)"
            ))
        }
    })
}

/// `float32[64, 32]` for a tensor parameter, `scalar` for a scalar.
fn param_type_text(dtype: &Option<DType>, shape: &Option<Vec<Dim>>) -> String {
    match (dtype, shape) {
        (None, None) => "scalar".into(),
        (d, s) => format!(
            "{}{}",
            d.map(|d| d.to_string()).unwrap_or_else(|| "?".into()),
            shape_text(s)
        ),
    }
}

/// A kernel parameter as `KernelSignature` reports it: name, dtype and shape (`None` and `None`
/// for a scalar).
type KernelParam = (String, Option<DType>, Option<Vec<Dim>>);

/// `A: float32[64, 32], alpha: scalar, ...` for a kernel's parameters.
fn signature_text(params: &[KernelParam]) -> String {
    params
        .iter()
        .map(|(n, d, s)| format!("{n}: {}", param_type_text(d, s)))
        .collect::<Vec<_>>()
        .join(", ")
}

/// One argument of the call: given in a file, or to be generated.
enum Arg<'a> {
    Given(Tensor),
    Generate {
        name: &'a str,
        shape: Vec<i64>,
        dtype: DType,
        fill: Fill,
    },
}

/// Arguments for `function`: given files first, generated data for the rest.
fn gather_inputs(model: &Model, io: &InputArgs) -> Res<Vec<Value>> {
    let info = model.function_info(&io.function)?;
    let mut given = read_given(io)?;
    // Every --dim names a symbolic dimension of the parameters, once.
    let symbolic: Vec<&str> = info
        .params
        .iter()
        .flat_map(|p| p.shape.iter().flatten())
        .filter_map(|d| match d {
            Dim::Var(n) => Some(n.as_str()),
            Dim::Fixed(_) => None,
        })
        .collect();
    let mut dims: HashMap<&str, i64> = HashMap::new();
    for (k, v) in &io.dims {
        if !symbolic.contains(&k.as_str()) {
            let mut known = symbolic.clone();
            known.sort_unstable();
            known.dedup();
            return usage(format!(
                "--dim {k}={v}: the parameters of `{}` have no symbolic dimension `{k}` ({})",
                io.function,
                if known.is_empty() {
                    "they have none".to_string()
                } else {
                    format!("they have {}", known.join(", "))
                }
            ));
        }
        if let Some(old) = dims.insert(k, *v) {
            return usage(format!("--dim {k} is given twice ({k}={old} and {k}={v})"));
        }
    }
    let names: Vec<&str> = info.params.iter().map(|p| p.name.as_str()).collect();
    for k in given.keys() {
        let is_index = k
            .strip_prefix("arg")
            .and_then(|i| i.parse::<usize>().ok())
            .is_some_and(|i| i < names.len());
        if !names.contains(&k.as_str()) && !is_index {
            return usage(format!(
                "`{}` has no parameter `{k}` (parameters: {})",
                io.function,
                names.join(", ")
            ));
        }
    }
    // First the shapes of the inputs to generate and their total size, refused before anything
    // is allocated if it is too large; then the data.
    let mut plan = Vec::new();
    let mut total: Option<u64> = Some(0);
    // The --dim values the generated inputs use, for the error if they are too large.
    let mut dims_used: Vec<(&str, i64)> = Vec::new();
    for (i, p) in info.params.iter().enumerate() {
        if let Some(t) = given
            .remove(&p.name)
            .or_else(|| given.remove(&format!("arg{i}")))
        {
            plan.push(Arg::Given(t));
            continue;
        }
        let (Some(dtype), Some(shape)) = (p.dtype, &p.shape) else {
            return Err(format!(
                "cannot generate `{}`: the model does not record its shape and dtype; pass it with --input {}=FILE.npy",
                p.name, p.name
            )
            .into());
        };
        let Some(fill) = Fill::of(dtype) else {
            return Err(format!(
                "cannot generate {dtype} inputs (`{}`); pass it with --input {}=FILE.npy",
                p.name, p.name
            )
            .into());
        };
        let mut concrete = Vec::with_capacity(shape.len());
        for d in shape {
            concrete.push(match d {
                Dim::Fixed(v) => *v,
                Dim::Var(n) => match dims.get(n.as_str()) {
                    Some(&v) => {
                        if !dims_used.contains(&(n.as_str(), v)) {
                            dims_used.push((n, v));
                        }
                        v
                    }
                    None => 1,
                },
            });
        }
        if concrete.iter().any(|&d| d < 0) {
            return Err(format!(
                "cannot generate `{}`: the model gives it a negative dimension ({dtype}{concrete:?})",
                p.name
            )
            .into());
        }
        total = total
            .zip(tensor_bytes(&concrete, dtype.size_bytes()))
            .and_then(|(t, b)| t.checked_add(b));
        plan.push(Arg::Generate {
            name: &p.name,
            shape: concrete,
            dtype,
            fill,
        });
    }
    if total.is_none_or(|t| t > MAX_GENERATED_BYTES) {
        return usage(too_large(&plan, total, &dims_used));
    }
    let mut rng = Rng(io.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut args = Vec::with_capacity(info.params.len());
    for a in plan {
        args.push(Value::Tensor(match a {
            Arg::Given(t) => t,
            Arg::Generate {
                name,
                shape,
                dtype,
                fill,
            } => random_tensor(&shape, dtype, fill, &mut rng)
                .map_err(|e| format!("cannot generate `{name}`: {e}"))?,
        }));
    }
    Ok(args)
}

/// Why the inputs to generate are refused: how much they would need, the largest of them, and
/// the --dim values that made them so.
fn too_large(args: &[Arg], total: Option<u64>, dims_used: &[(&str, i64)]) -> String {
    let need = total.map_or("more than 2^64 bytes".to_string(), |t| format!("{t} bytes"));
    let largest = args
        .iter()
        .filter_map(|a| match a {
            Arg::Given(_) => None,
            Arg::Generate {
                name, shape, dtype, ..
            } => Some((tensor_bytes(shape, dtype.size_bytes()), name, shape, dtype)),
        })
        // Sizes that do not fit 64 bits (None) count as the largest.
        .max_by_key(|(b, ..)| b.map_or(u128::MAX, u128::from))
        .map(|(b, name, shape, dtype)| match b {
            Some(b) => format!("; the largest, `{name}`, is {dtype}{shape:?}: {b} bytes"),
            None => format!("; `{name}` is {dtype}{shape:?}"),
        })
        .unwrap_or_default();
    let limit = format!("over the limit of {MAX_GENERATED_BYTES} bytes (4 GiB)");
    if dims_used.is_empty() {
        format!(
            "the inputs to generate would need {need}, {limit}{largest}; pass them with --input \
             or --inputs"
        )
    } else {
        let flags: Vec<String> = dims_used
            .iter()
            .map(|(n, v)| format!("--dim {n}={v}"))
            .collect();
        format!(
            "{}: the inputs to generate would need {need}, {limit}{largest}; use a smaller value, \
             or pass the inputs with --input or --inputs",
            flags.join(" ")
        )
    }
}

fn session(model: &Model, io: &InputArgs) -> Res<Session> {
    session_profiling(model, io, false)
}

/// [`session`], with each OpenCL launch timed on the device when `opencl_profiling`.
fn session_profiling(model: &Model, io: &InputArgs, opencl_profiling: bool) -> Res<Session> {
    session_with(model, io, |o| o.opencl_profiling = opencl_profiling)
}

/// A session with the options `io` gives, changed by `adjust`.
fn session_with(
    model: &Model,
    io: &InputArgs,
    adjust: impl FnOnce(&mut SessionOptions),
) -> Res<Session> {
    io.backend.load_plugins()?;
    let b = &io.budgets;
    let d = SessionOptions::default();
    let mut o = SessionOptions {
        threads: io.threads,
        opencl_device: io.opencl_device,
        backends: io.backend.backends.clone(),
        memory_budget_bytes: b.memory_budget.unwrap_or(d.memory_budget_bytes),
        max_registers: b.max_registers.unwrap_or(d.max_registers),
        stack_budget_bytes: b.stack_budget.unwrap_or(d.stack_budget_bytes),
        max_instructions: b.max_instructions.unwrap_or(d.max_instructions),
        ..d
    };
    adjust(&mut o);
    Ok(model.session_with(o)?)
}

/// `mote bench`'s options beyond the timed runs: per-kernel profile, Chrome trace, and for a
/// model on an OpenCL device, device-resident tensors and the launch trace.
struct BenchExtras<'a> {
    profile: bool,
    trace: Option<&'a std::path::Path>,
    resident: bool,
    opencl_trace: Option<&'a std::path::Path>,
}

/// The first elements of `t` and, for numbers, its minimum, maximum and mean, read through an
/// `ndarray` view of the tensor's memory (no copy).
fn preview(t: &Tensor) -> String {
    const N: usize = 6;
    fn show<T: mote::Element + Copy>(
        t: &Tensor,
        text: impl Fn(T) -> String,
        num: impl Fn(T) -> f64,
    ) -> (Vec<String>, Option<(f64, f64, f64)>) {
        let Ok(v) = t.array_view::<T>() else {
            return (Vec::new(), None);
        };
        let first = v.iter().take(N).map(|&x| text(x)).collect();
        let stats = (!v.is_empty()).then(|| {
            let (lo, hi, sum) = v.fold(
                (f64::INFINITY, f64::NEG_INFINITY, 0.0),
                |(lo, hi, s), &x| {
                    let x = num(x);
                    (lo.min(x), hi.max(x), s + x)
                },
            );
            (lo, hi, sum / v.len() as f64)
        });
        (first, stats)
    }
    let (vals, stats) = match t.dtype() {
        DType::F32 => show::<f32>(t, |v| format!("{v:.6}"), f64::from),
        DType::F64 => show::<f64>(t, |v| format!("{v:.6}"), |v| v),
        DType::F16 => show::<half::f16>(t, |v| format!("{v:.4}"), |v| v.to_f64()),
        DType::I8 => show::<i8>(t, |v| v.to_string(), f64::from),
        DType::U8 => show::<u8>(t, |v| v.to_string(), f64::from),
        DType::BOOL => (
            t.data().iter().take(N).map(|v| v.to_string()).collect(),
            None,
        ),
        DType::I32 => show::<i32>(t, |v| v.to_string(), f64::from),
        DType::I64 => show::<i64>(t, |v| v.to_string(), |v| v as f64),
        _ => (Vec::new(), None),
    };
    let more = if t.num_elements() > N { ", ..." } else { "" };
    let stats = stats.map_or(String::new(), |(lo, hi, mean)| {
        format!(" (min {lo:.6}, max {hi:.6}, mean {mean:.6})")
    });
    format!("[{}{more}]{stats}", vals.join(", "))
}

/// Arguments for `io.function`: a Relax function's (given or generated), or a kernel's (all
/// given).
fn call_args(model: &Model, io: &InputArgs) -> Res<Vec<Value>> {
    if model.is_kernel_library() {
        gather_kernel_args(model, io)
    } else {
        gather_inputs(model, io)
    }
}

/// Call `function`: a kernel through `call_kernel`, which needs the arguments exclusively
/// (they come from files and nothing else holds them), a Relax function through `call`.
fn call(s: &mut Session, function: &str, args: &mut [Value]) -> mote::Result<Value> {
    if s.model().is_kernel_library() {
        s.call_kernel(function, args)
    } else {
        s.call(function, args)
    }
}

fn run(path: &std::path::Path, io: &InputArgs, output: Option<&std::path::Path>) -> Res<()> {
    let model = load(path, io.code_free, io.budgets.load_budget)?;
    let mut args = call_args(&model, io)?;
    let mut s = session(&model, io)?;
    interrupt_on_ctrl_c(&s)?;
    let start = Instant::now();
    let out = call(&mut s, &io.function, &mut args)?;
    let elapsed = start.elapsed();
    if model.is_kernel_library() {
        // The kernel wrote into its arguments: they are what there is to show and save.
        println!("result: {out:?}");
        let tensors: Vec<(String, Tensor)> = args
            .iter()
            .enumerate()
            .filter_map(|(i, a)| Some((format!("arg{i}"), a.as_tensor()?.clone())))
            .collect();
        for (k, t) in &tensors {
            println!("{k}: {} {:?} {}", t.dtype(), t.shape(), preview(t));
        }
        println!(
            "time: {:.3} ms (first call, {} threads)",
            elapsed.as_secs_f64() * 1e3,
            s.threads()
        );
        if let Some(p) = output {
            mote::npy::write_npz(p, &tensors)?;
            println!("wrote {}", p.display());
        }
        return Ok(());
    }
    let tensors = out.flatten_tensors();
    for (i, t) in tensors.iter().enumerate() {
        println!("out{i}: {} {:?} {}", t.dtype(), t.shape(), preview(t));
    }
    if tensors.is_empty() {
        println!("result: {out:?}");
    }
    println!(
        "time: {:.3} ms (first call, {} threads)",
        elapsed.as_secs_f64() * 1e3,
        s.threads()
    );
    if let Some(p) = output {
        let named: Vec<(String, Tensor)> = tensors
            .into_iter()
            .enumerate()
            .map(|(i, t)| (format!("out{i}"), t))
            .collect();
        mote::npy::write_npz(p, &named)?;
        println!("wrote {}", p.display());
    }
    Ok(())
}

/// Ctrl-C during `mote run`: the first interrupts the call through the session's
/// `InterruptHandle` (it returns `Cancelled` at its next VM call or backward jump, exit status 130); a
/// second one ends the process at once with status 130, for a kernel that runs on. The
/// signal handler only sets a flag (signal-hook); a thread watching it makes the call.
fn interrupt_on_ctrl_c(s: &Session) -> Res<()> {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;
    let flag = Arc::new(AtomicBool::new(false));
    let sig = signal_hook::consts::SIGINT;
    // Registered first, so it sees the flag before the second handler sets it again.
    signal_hook::flag::register_conditional_shutdown(sig, i32::from(EXIT_CANCELLED), flag.clone())?;
    signal_hook::flag::register(sig, flag.clone())?;
    let handle = s.interrupt_handle();
    std::thread::Builder::new()
        .name("mote-ctrl-c".into())
        .spawn(move || {
            while !flag.load(Ordering::Relaxed) {
                std::thread::sleep(Duration::from_millis(20));
            }
            handle.interrupt();
        })?;
    Ok(())
}

struct Stats {
    min: f64,
    median: f64,
    p90: f64,
    max: f64,
    mean: f64,
}

/// Order statistics of the timings; `None` for no timings.
fn stats(mut ms: Vec<f64>) -> Option<Stats> {
    ms.sort_by(f64::total_cmp);
    let last = ms.len().checked_sub(1)?;
    let at = |q: f64| ms[((last as f64 * q).round() as usize).min(last)];
    Some(Stats {
        min: ms[0],
        median: at(0.5),
        p90: at(0.9),
        max: ms[last],
        mean: ms.iter().sum::<f64>() / ms.len() as f64,
    })
}

fn bench(
    path: &std::path::Path,
    io: &InputArgs,
    warmup: usize,
    runs: usize,
    extras: BenchExtras<'_>,
    as_json: bool,
) -> Res<()> {
    let BenchExtras {
        profile,
        trace,
        resident,
        opencl_trace,
    } = extras;
    // Also checked by the parser; `stats` needs at least one timing.
    if runs == 0 {
        return usage(format!(
            "--runs 0: expected a whole number from 1 to {MAX_RUNS}"
        ));
    }
    let rss_before_load = proc_status_kib("VmRSS");
    let t = Instant::now();
    let model = load(path, io.code_free, io.budgets.load_budget)?;
    let mut load_time = t.elapsed();
    let mut args = call_args(&model, io)?;
    let t = Instant::now();
    let mut s = session(&model, io)?;
    load_time += t.elapsed();
    let load_ms = load_time.as_secs_f64() * 1e3;
    if (resident || opencl_trace.is_some()) && s.device() == mote::Device::Cpu {
        return usage(format!(
            "--device-resident and --opencl-trace are for models compiled for OpenCL; {} runs on \
             the CPU",
            path.display()
        ));
    }
    if let Some(p) = opencl_trace {
        // One call on a session of its own, whose launches are written to the file.
        let mut ts = session_with(&model, io, |o| o.opencl_trace = Some(p.to_path_buf()))?;
        drop(call(&mut ts, &io.function, &mut args)?);
    }
    if resident {
        args = args
            .into_iter()
            .map(|a| match a {
                Value::Tensor(t) => s.upload(&t).map(Value::DeviceTensor),
                other => Ok(other),
            })
            .collect::<mote::Result<_>>()?;
    }
    let call = |s: &mut Session, f: &str, a: &mut [Value]| {
        if resident && !s.model().is_kernel_library() {
            s.call_device(f, a)
        } else {
            call(s, f, a)
        }
    };
    let t = Instant::now();
    drop(call(&mut s, &io.function, &mut args)?);
    let first_run_ms = t.elapsed().as_secs_f64() * 1e3;
    let tty = std::io::stderr().is_terminal() && !as_json;
    let progress = |phase: &str, i: usize, n: usize| {
        if tty && (i % 10 == 0 || i + 1 == n) {
            eprint!("\r{phase} {}/{n}   ", i + 1);
        }
    };
    // Reserve for the common case only: the vector grows as runs complete, so a large --runs
    // costs memory in step with the time spent, not all at once before the first run.
    let mut times = Vec::with_capacity(runs.min(TIMES_RESERVED));
    // The first run above is the first warm-up run, or with `--warmup 0` the first timed one.
    if warmup == 0 {
        times.push(first_run_ms);
    }
    for i in 1..warmup {
        call(&mut s, &io.function, &mut args)?;
        progress("warmup", i, warmup);
    }
    for i in times.len()..runs {
        let t = Instant::now();
        let out = call(&mut s, &io.function, &mut args)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        drop(out);
        progress("timing", i, runs);
    }
    if tty {
        eprint!("\r{:30}\r", "");
    }
    let st = stats(times).ok_or("no timed runs")?;
    let mut profile_rows = Vec::new();
    let profiled_runs = runs.min(50);
    if profile {
        s.set_profiling(true);
        for _ in 0..profiled_runs {
            call(&mut s, &io.function, &mut args)?;
        }
        profile_rows = s.take_profile();
        s.set_profiling(false);
    }
    // Device time per OpenCL kernel, from profiling events, on a session of its own (a
    // profiling queue waits for each launch, which the timed runs above must not).
    let mut device_rows: Vec<(String, u64, u64)> = Vec::new();
    if profile && !model.device_kernels().is_empty() {
        let mut ps = session_profiling(&model, io, true)?;
        for _ in 0..profiled_runs {
            call(&mut ps, &io.function, &mut args)?;
            for (name, ns) in ps.device_times() {
                match device_rows.iter_mut().find(|r| &r.0 == name) {
                    Some(r) => {
                        r.1 += 1;
                        r.2 += ns;
                    }
                    None => device_rows.push((name.clone(), 1, *ns)),
                }
            }
        }
    }
    if let Some(trace_path) = trace {
        s.set_tracing(true);
        for _ in 0..runs.min(5) {
            call(&mut s, &io.function, &mut args)?;
        }
        let events = s.take_trace();
        s.set_tracing(false);
        let evs: Vec<_> = events
            .iter()
            .map(|e| {
                json!({
                    "name": e.name, "cat": format!("{:?}", e.kind).to_lowercase(), "ph": "X",
                    "ts": e.start.as_secs_f64() * 1e6, "dur": e.duration.as_secs_f64() * 1e6,
                    "pid": 1, "tid": 1, "args": {"depth": e.depth},
                })
            })
            .collect();
        std::fs::write(
            trace_path,
            serde_json::to_string(&json!({"traceEvents": evs, "displayTimeUnit": "ms"}))?,
        )?;
    }
    let peak_rss = proc_status_kib("VmHWM");
    if as_json {
        let j = json!({
            "model": path.display().to_string(), "function": io.function, "threads": s.threads(),
            "runs": runs, "warmup": warmup,
            "min_ms": st.min, "median_ms": st.median, "p90_ms": st.p90, "max_ms": st.max, "mean_ms": st.mean,
            "load_ms": load_ms, "first_run_ms": first_run_ms,
            "rss_before_load_kib": rss_before_load, "peak_rss_kib": peak_rss,
            "profile": profile_rows.iter().map(|r| json!({
                "name": r.name, "kind": format!("{:?}", r.kind).to_lowercase(), "calls": r.calls,
                "total_ms": r.total.as_secs_f64() * 1e3,
                "ms_per_run": r.total.as_secs_f64() * 1e3 / profiled_runs as f64,
            })).collect::<Vec<_>>(),
            "device_profile": device_rows.iter().map(|(name, launches, ns)| json!({
                "kernel": name, "launches_per_run": *launches as f64 / profiled_runs as f64,
                "device_ms_per_run": *ns as f64 / 1e6 / profiled_runs as f64,
            })).collect::<Vec<_>>(),
        });
        println!("{}", serde_json::to_string(&j)?);
        return Ok(());
    }
    println!(
        "{} `{}`: {runs} runs after {warmup} warm-up, {} threads",
        path.display(),
        io.function,
        s.threads()
    );
    println!(
        "latency ms: min {:.4}  median {:.4}  p90 {:.4}  max {:.4}  mean {:.4}",
        st.min, st.median, st.p90, st.max, st.mean
    );
    println!("load ms (model and session): {load_ms:.3}  first run ms: {first_run_ms:.3}");
    if let Some(peak) = peak_rss {
        println!("peak resident memory: {:.1} MiB", peak as f64 / 1024.0);
    }
    if profile {
        let total: Duration = profile_rows
            .iter()
            .filter(|r| r.kind != mote::CallKind::Function)
            .map(|r| r.total)
            .sum();
        println!("\nper call site over {profiled_runs} runs:");
        println!(
            "{:<40} {:>9} {:>7} {:>12} {:>7}",
            "name", "kind", "calls", "ms/run", "%"
        );
        for r in &profile_rows {
            let pct = if r.kind == mote::CallKind::Function || total.is_zero() {
                String::new()
            } else {
                format!("{:.1}", 100.0 * r.total.as_secs_f64() / total.as_secs_f64())
            };
            println!(
                "{:<40} {:>9} {:>7} {:>12.4} {:>7}",
                r.name,
                format!("{:?}", r.kind).to_lowercase(),
                r.calls / profiled_runs as u64,
                r.total.as_secs_f64() * 1e3 / profiled_runs as f64,
                pct
            );
        }
    }
    if !device_rows.is_empty() {
        println!("\nOpenCL device time per kernel over {profiled_runs} runs (profiling events):");
        println!("{:<40} {:>9} {:>12}", "kernel", "launches", "device ms/run");
        for (name, launches, ns) in &device_rows {
            println!(
                "{:<40} {:>9} {:>12.4}",
                name,
                launches / profiled_runs as u64,
                *ns as f64 / 1e6 / profiled_runs as f64
            );
        }
    }
    if let Some(t) = trace {
        println!("trace: {}", t.display());
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_whole_numbers_within_their_bounds() {
        assert_eq!(parse_count("1", 1, 3), Ok(1));
        assert_eq!(parse_count("3", 1, 3), Ok(3));
        assert_eq!(parse_count("+2", 1, 3), Ok(2));
        for bad in [
            "0",
            "4",
            "-1",
            "-0",
            "1.0",
            "1e3",
            " 1",
            "",
            "18446744073709551616",
        ] {
            assert_eq!(
                parse_count(bad, 1, 3),
                Err("expected a whole number from 1 to 3".to_string()),
                "{bad:?}"
            );
        }
        assert_eq!(parse_seed("18446744073709551615"), Ok(u64::MAX));
        assert_eq!(parse_threads("1024"), Ok(1024));
        assert!(parse_threads("1025").is_err());
        assert_eq!(parse_runs("10000000"), Ok(10_000_000));
        assert!(parse_runs("0").is_err());
        assert_eq!(parse_warmup("0"), Ok(0));
    }

    #[test]
    fn dims_are_name_equals_positive_count() {
        assert_eq!(parse_dim("n=4"), Ok(("n".to_string(), 4)));
        assert_eq!(
            parse_dim("seq_len=4294967296"),
            Ok(("seq_len".to_string(), 1 << 32))
        );
        // Only the first `=` splits.
        assert!(parse_dim("n==4").is_err());
        for bad in ["n", "=4", "n=0", "n=-1", "n=4294967297", "n=x", ""] {
            assert!(parse_dim(bad).is_err(), "{bad:?}");
        }
    }

    #[test]
    fn tensor_sizes_are_checked_not_wrapped() {
        assert_eq!(tensor_bytes(&[2, 3], 4), Some(24));
        assert_eq!(tensor_bytes(&[], 2), Some(2));
        assert_eq!(tensor_bytes(&[0, 5], 4), Some(0));
        assert_eq!(tensor_bytes(&[-1, 5], 4), None);
        assert_eq!(tensor_bytes(&[1 << 32, 1 << 32], 1), None);
        assert_eq!(tensor_bytes(&[1 << 31, 1 << 31], 4), None);
        assert_eq!(tensor_bytes(&[i64::MAX], 2), Some(u64::MAX - 1));
        assert_eq!(tensor_bytes(&[i64::MAX], 3), None);
    }

    #[test]
    fn only_whole_byte_scalar_dtypes_are_generated() {
        assert!(Fill::of(DType::F32).is_some() && Fill::of(DType::I64).is_some());
        assert!(matches!(Fill::of(DType::U16), Some(Fill::Uint(2))));
        for d in [
            DType::new(mote_dtype_code::INT, 4),
            DType::new(mote_dtype_code::INT, 128),
            DType::new(mote_dtype_code::UINT, 0),
            DType {
                lanes: 4,
                ..DType::I32
            },
        ] {
            assert!(Fill::of(d).is_none(), "{d}");
        }
    }

    #[test]
    fn stats_of_no_timings_is_none_not_a_panic() {
        assert!(stats(Vec::new()).is_none());
        let s = stats(vec![3.0, 1.0, 2.0]).expect("stats");
        assert_eq!((s.min, s.median, s.max, s.mean), (1.0, 2.0, 3.0, 2.0));
        let s = stats(vec![5.0]).expect("stats");
        assert_eq!((s.min, s.median, s.p90, s.max), (5.0, 5.0, 5.0, 5.0));
    }
}
