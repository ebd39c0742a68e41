//! `mote`: inspect, run and benchmark models compiled by Apache TVM 0.27.

use std::collections::HashMap;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use clap::{Parser, Subcommand};
use mote::{DType, Dim, Model, Session, SessionOptions, Tensor, Value};
use serde_json::json;

#[derive(Parser)]
#[command(
    name = "mote",
    version,
    about = "Run models compiled by Apache TVM 0.27"
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

#[derive(clap::Args)]
struct InputArgs {
    /// Function to call.
    #[arg(long, short = 'f', default_value = "main")]
    function: String,
    /// An input: parameter name (or argN) = .npy file. Repeatable.
    #[arg(long = "input", value_name = "NAME=FILE.npy")]
    inputs: Vec<String>,
    /// Inputs from an .npz whose keys are parameter names or arg0, arg1, ...
    #[arg(long = "inputs", value_name = "FILE.npz")]
    npz: Option<PathBuf>,
    /// Value of a symbolic dimension for generated inputs (default 1). Repeatable.
    #[arg(long = "dim", value_name = "NAME=VALUE")]
    dims: Vec<String>,
    /// Seed for generated inputs.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Threads for parallel kernels (default: MOTE_NUM_THREADS, else the CPU count).
    #[arg(long)]
    threads: Option<usize>,
    #[command(flatten)]
    backend: BackendArgs,
}

#[derive(Subcommand)]
enum Command {
    /// Functions with parameter names, shapes and dtypes; kernels; constants; builtins.
    Inspect {
        model: PathBuf,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        backend: BackendArgs,
    },
    /// Run a function once and print (or save) its outputs.
    Run {
        model: PathBuf,
        #[command(flatten)]
        io: InputArgs,
        /// Write the outputs to an .npz with keys out0, out1, ... (tuples flattened).
        #[arg(long, value_name = "FILE.npz")]
        output: Option<PathBuf>,
    },
    /// Time a function: min/median/p90/max latency, optionally per kernel.
    Bench {
        model: PathBuf,
        #[command(flatten)]
        io: InputArgs,
        #[arg(long, default_value_t = 10)]
        warmup: usize,
        #[arg(long, default_value_t = 100)]
        runs: usize,
        /// Print time per kernel and builtin.
        #[arg(long)]
        profile: bool,
        /// Write a Chrome/Perfetto trace of a few runs.
        #[arg(long, value_name = "FILE.json")]
        trace: Option<PathBuf>,
        /// Print one JSON object.
        #[arg(long)]
        json: bool,
    },
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    let r = match cli.command {
        Command::Inspect {
            model,
            json,
            backend,
        } => inspect(&model, json, &backend),
        Command::Run { model, io, output } => run(&model, &io, output.as_deref()),
        Command::Bench {
            model,
            io,
            warmup,
            runs,
            profile,
            trace,
            json,
        } => bench(&model, &io, warmup, runs, profile, trace.as_deref(), json),
    };
    match r {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}

type Res<T> = Result<T, Box<dyn std::error::Error>>;

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

fn inspect(path: &std::path::Path, as_json: bool, backend: &BackendArgs) -> Res<()> {
    backend.load_plugins()?;
    let model = Model::load(path)?;
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
            "functions": funcs.iter().map(|f| json!({
                "name": f.name,
                "params": f.params.iter().map(|p| json!({
                    "name": p.name,
                    "dtype": p.dtype.map(|d| d.to_string()),
                    "shape": p.shape.as_ref().map(|s| s.iter().map(|d| match d {
                        Dim::Fixed(v) => json!(v),
                        Dim::Var(n) => json!(n),
                    }).collect::<Vec<_>>()),
                })).collect::<Vec<_>>(),
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
    println!("functions:");
    for f in &funcs {
        let ps: Vec<String> = f
            .params
            .iter()
            .map(|p| {
                format!(
                    "{}: {}{}",
                    p.name,
                    p.dtype.map(|d| d.to_string()).unwrap_or_else(|| "?".into()),
                    shape_text(&p.shape)
                )
            })
            .collect();
        println!("  {}({})", f.name, ps.join(", "));
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

fn random_tensor(shape: &[i64], dtype: DType, rng: &mut Rng) -> Res<Tensor> {
    let n: usize = shape.iter().map(|&d| d as usize).product();
    let mut bytes = Vec::with_capacity(n * dtype.size_bytes());
    for _ in 0..n {
        let u = rng.unit();
        let f = u * 2.0 - 1.0;
        match dtype {
            DType::F32 => bytes.extend_from_slice(&(f as f32).to_le_bytes()),
            DType::F64 => bytes.extend_from_slice(&f.to_le_bytes()),
            DType::F16 => bytes.extend_from_slice(&half::f16::from_f64(f).to_le_bytes()),
            DType::BF16 => bytes.extend_from_slice(&half::bf16::from_f64(f).to_le_bytes()),
            DType::BOOL => bytes.push((u < 0.5) as u8),
            d if d.code == mote_dtype_code::UINT => {
                let v = (u * 16.0) as u64;
                bytes.extend_from_slice(&v.to_le_bytes()[..d.size_bytes()]);
            }
            d if d.code == mote_dtype_code::INT => {
                let v = (f * 8.0).floor() as i64;
                bytes.extend_from_slice(&v.to_le_bytes()[..d.size_bytes()]);
            }
            d => return Err(format!("cannot generate {d} inputs").into()),
        }
    }
    Ok(Tensor::from_bytes(shape, dtype, &bytes)?)
}

mod mote_dtype_code {
    pub const INT: u8 = 0;
    pub const UINT: u8 = 1;
}

fn parse_kv(s: &str, what: &str) -> Res<(String, String)> {
    s.split_once('=')
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .ok_or_else(|| format!("{what} `{s}` is not NAME=VALUE").into())
}

/// Arguments for `function`: given files first, generated data for the rest.
fn gather_inputs(model: &Model, io: &InputArgs) -> Res<Vec<Value>> {
    let info = model.function_info(&io.function)?;
    let mut given: HashMap<String, Tensor> = HashMap::new();
    if let Some(npz) = &io.npz {
        for (k, t) in mote::npy::read_npz(npz)? {
            given.insert(k, t);
        }
    }
    for s in &io.inputs {
        let (k, file) = parse_kv(s, "--input")?;
        given.insert(k, mote::npy::read_npy(&file)?);
    }
    let mut dims: HashMap<String, i64> = HashMap::new();
    for s in &io.dims {
        let (k, v) = parse_kv(s, "--dim")?;
        dims.insert(
            k,
            v.parse()
                .map_err(|_| format!("--dim {s}: not an integer"))?,
        );
    }
    let names: Vec<&str> = info.params.iter().map(|p| p.name.as_str()).collect();
    for k in given.keys() {
        let is_index = k
            .strip_prefix("arg")
            .and_then(|i| i.parse::<usize>().ok())
            .is_some_and(|i| i < names.len());
        if !names.contains(&k.as_str()) && !is_index {
            return Err(format!(
                "`{}` has no parameter `{k}` (parameters: {})",
                io.function,
                names.join(", ")
            )
            .into());
        }
    }
    let mut rng = Rng(io.seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
    let mut args = Vec::with_capacity(info.params.len());
    for (i, p) in info.params.iter().enumerate() {
        if let Some(t) = given
            .remove(&p.name)
            .or_else(|| given.remove(&format!("arg{i}")))
        {
            args.push(Value::Tensor(t));
            continue;
        }
        let (Some(dtype), Some(shape)) = (p.dtype, &p.shape) else {
            return Err(format!(
                "cannot generate `{}`: the model does not record its shape and dtype; pass it with --input {}=FILE.npy",
                p.name, p.name
            )
            .into());
        };
        let shape: Vec<i64> = shape
            .iter()
            .map(|d| match d {
                Dim::Fixed(v) => *v,
                Dim::Var(n) => dims.get(n).copied().unwrap_or(1),
            })
            .collect();
        args.push(Value::Tensor(random_tensor(&shape, dtype, &mut rng)?));
    }
    Ok(args)
}

fn session(model: &Model, io: &InputArgs) -> Res<Session> {
    io.backend.load_plugins()?;
    Ok(model.session_with(SessionOptions {
        threads: io.threads,
        backends: io.backend.backends.clone(),
        ..Default::default()
    })?)
}

fn preview(t: &Tensor) -> String {
    const N: usize = 6;
    let vals: Vec<String> = match t.dtype() {
        DType::F32 => t
            .as_slice::<f32>()
            .map(|s| s.iter().take(N).map(|v| format!("{v:.6}")).collect())
            .unwrap_or_default(),
        DType::F64 => t
            .as_slice::<f64>()
            .map(|s| s.iter().take(N).map(|v| format!("{v:.6}")).collect())
            .unwrap_or_default(),
        DType::F16 => t
            .as_slice::<half::f16>()
            .map(|s| s.iter().take(N).map(|v| format!("{v:.4}")).collect())
            .unwrap_or_default(),
        DType::I8 => t
            .as_slice::<i8>()
            .map(|s| s.iter().take(N).map(|v| v.to_string()).collect())
            .unwrap_or_default(),
        DType::U8 | DType::BOOL => t.data().iter().take(N).map(|v| v.to_string()).collect(),
        DType::I32 => t
            .as_slice::<i32>()
            .map(|s| s.iter().take(N).map(|v| v.to_string()).collect())
            .unwrap_or_default(),
        DType::I64 => t
            .as_slice::<i64>()
            .map(|s| s.iter().take(N).map(|v| v.to_string()).collect())
            .unwrap_or_default(),
        _ => Vec::new(),
    };
    let more = if t.num_elements() > N { ", ..." } else { "" };
    format!("[{}{more}]", vals.join(", "))
}

fn run(path: &std::path::Path, io: &InputArgs, output: Option<&std::path::Path>) -> Res<()> {
    let model = Model::load(path)?;
    let args = gather_inputs(&model, io)?;
    let mut s = session(&model, io)?;
    let start = Instant::now();
    let out = s.call(&io.function, &args)?;
    let elapsed = start.elapsed();
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

struct Stats {
    min: f64,
    median: f64,
    p90: f64,
    max: f64,
    mean: f64,
}

fn stats(mut ms: Vec<f64>) -> Stats {
    ms.sort_by(f64::total_cmp);
    let at = |q: f64| ms[((ms.len() - 1) as f64 * q).round() as usize];
    Stats {
        min: ms[0],
        median: at(0.5),
        p90: at(0.9),
        max: ms[ms.len() - 1],
        mean: ms.iter().sum::<f64>() / ms.len() as f64,
    }
}

fn bench(
    path: &std::path::Path,
    io: &InputArgs,
    warmup: usize,
    runs: usize,
    profile: bool,
    trace: Option<&std::path::Path>,
    as_json: bool,
) -> Res<()> {
    if runs == 0 {
        return Err("--runs must be at least 1".into());
    }
    let model = Model::load(path)?;
    let args = gather_inputs(&model, io)?;
    let mut s = session(&model, io)?;
    let tty = std::io::stderr().is_terminal() && !as_json;
    let progress = |phase: &str, i: usize, n: usize| {
        if tty && (i % 10 == 0 || i + 1 == n) {
            eprint!("\r{phase} {}/{n}   ", i + 1);
        }
    };
    for i in 0..warmup {
        s.call(&io.function, &args)?;
        progress("warmup", i, warmup);
    }
    let mut times = Vec::with_capacity(runs);
    for i in 0..runs {
        let t = Instant::now();
        let out = s.call(&io.function, &args)?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        drop(out);
        progress("timing", i, runs);
    }
    if tty {
        eprint!("\r{:30}\r", "");
    }
    let st = stats(times);
    let mut profile_rows = Vec::new();
    let profiled_runs = runs.min(50);
    if profile {
        s.set_profiling(true);
        for _ in 0..profiled_runs {
            s.call(&io.function, &args)?;
        }
        profile_rows = s.take_profile();
        s.set_profiling(false);
    }
    if let Some(trace_path) = trace {
        s.set_tracing(true);
        for _ in 0..runs.min(5) {
            s.call(&io.function, &args)?;
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
    if as_json {
        let j = json!({
            "model": path.display().to_string(), "function": io.function, "threads": s.threads(),
            "runs": runs, "warmup": warmup,
            "min_ms": st.min, "median_ms": st.median, "p90_ms": st.p90, "max_ms": st.max, "mean_ms": st.mean,
            "profile": profile_rows.iter().map(|r| json!({
                "name": r.name, "kind": format!("{:?}", r.kind).to_lowercase(), "calls": r.calls,
                "total_ms": r.total.as_secs_f64() * 1e3,
                "ms_per_run": r.total.as_secs_f64() * 1e3 / profiled_runs as f64,
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
    if let Some(t) = trace {
        println!("trace: {}", t.display());
    }
    Ok(())
}
