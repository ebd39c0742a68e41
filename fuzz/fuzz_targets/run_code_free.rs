//! A code-free model file loaded and run: each Relax function is called with small arguments
//! built from what the model says of its parameters (`Model::function_info`), in a session of
//! 2 threads under the targets' budgets (`mote_fuzz::session_options`: memory, registers,
//! instructions, the default stack budget). Any `mote::Error` is an answer; a panic, an abort,
//! an input that takes 10 s or live heap beyond what the budgets allow
//! (`mote_fuzz::run_limit`) is a crash (docs/fuzzing.md).
#![no_main]

use std::collections::HashMap;
use std::sync::{Arc, Once};

use mote::{Dim, Error, Model, Tensor, Value};

#[global_allocator]
static ALLOC: mote_fuzz::Budget = mote_fuzz::Budget;

/// The most bytes of arguments one call gets; a function that needs more is not called.
const ARGS_LIMIT: usize = 1 << 20;

/// `mote.test.ne(a, b)` and `mote.test.add(a, b)` on ints, which the crafted loops of
/// `mote::fuzzing::craft` call; registered before any load, since a model resolves its names
/// when it loads. Anything but two ints is an error, never a panic.
fn register_arithmetic() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        fn ints(a: &[mote::Arg<'_>]) -> mote::Result<(i64, i64)> {
            match a {
                [mote::Arg::Int(x), mote::Arg::Int(y)] => Ok((*x, *y)),
                _ => Err(Error::InvalidArgument("two ints expected".into())),
            }
        }
        mote::register_function(
            "mote.test.ne",
            Arc::new(|a| ints(a).map(|(x, y)| Value::Int(i64::from(x != y)))),
        );
        mote::register_function(
            "mote.test.add",
            Arc::new(|a| ints(a).map(|(x, y)| Value::Int(x.wrapping_add(y)))),
        );
    });
}

/// A small size for the symbolic dimension `name`: 1 to 4, the same for every parameter of
/// one input, varying from input to input.
fn small_dim(name: &str, input_len: usize) -> i64 {
    let h = name.bytes().fold(input_len as u64, |h, b| {
        h.wrapping_mul(31).wrapping_add(u64::from(b))
    });
    1 + (h % 4) as i64
}

/// The arguments of `f`, or `None` when something about a parameter is unknown (a dtype
/// without a shape or the reverse, a negative fixed dimension) or they would exceed
/// [`ARGS_LIMIT`]. A parameter the model says nothing about gets an int (the crafted models'
/// counters), small or not by the input's length; tensors are filled with the input's bytes.
fn arguments(model: &Model, f: &str, data: &[u8]) -> Option<Vec<Value>> {
    let info = model.function_info(f).ok()?;
    let mut dims: HashMap<&str, i64> = HashMap::new();
    let mut bytes = 0usize;
    let mut args = Vec::with_capacity(info.params.len());
    for p in &info.params {
        let (dtype, shape) = match (p.dtype, &p.shape) {
            (None, None) => {
                let ints = [0, 1, 3, 1000, 1 << 40, -1];
                args.push(Value::Int(ints[data.len() % ints.len()]));
                continue;
            }
            (Some(d), Some(s)) => (d, s),
            _ => return None,
        };
        let mut shape_now = Vec::with_capacity(shape.len());
        for d in shape {
            shape_now.push(match d {
                Dim::Fixed(n) if (0..=1 << 20).contains(n) => *n,
                Dim::Fixed(_) => return None,
                Dim::Var(v) => *dims
                    .entry(v.as_str())
                    .or_insert_with(|| small_dim(v, data.len())),
            });
        }
        let n = shape_now
            .iter()
            .try_fold(dtype.size_bytes(), |n, &d| n.checked_mul(d as usize))?;
        bytes = bytes.checked_add(n).filter(|&b| b <= ARGS_LIMIT)?;
        let fill: Vec<u8> = data.iter().copied().cycle().take(n).collect();
        args.push(Value::Tensor(
            Tensor::from_bytes(&shape_now, dtype, &fill).ok()?,
        ));
    }
    Some(args)
}

libfuzzer_sys::fuzz_target!(|data: &[u8]| {
    register_arithmetic();
    mote_fuzz::with_budget(data, |d| {
        let Ok(model) = Model::load_from_memory_with(d, mote_fuzz::load_options()) else {
            return;
        };
        let mut session = match model.session_with(mote_fuzz::session_options()) {
            Ok(s) => s,
            Err(e) => panic!("a model that loads gets no session: {e}"),
        };
        let calls: Vec<(String, Vec<Value>)> = model
            .function_names()
            .into_iter()
            .filter_map(|f| arguments(&model, &f, d).map(|a| (f, a)))
            .collect();
        // One input in four interrupts the session before its first call: that call must be
        // cancelled as it starts, and the next ones run as if nothing happened. Not the seeds:
        // a `.tar` is a multiple of 512 bytes long.
        let interrupted = d.len() % 4 == 3;
        if interrupted {
            session.interrupt_handle().interrupt();
        }
        let limit = mote_fuzz::run_limit(d.len(), model.constant_bytes().1);
        for (i, (f, args)) in calls.iter().enumerate() {
            let r = mote_fuzz::with_limit(limit, || session.call(f, args));
            if interrupted && i == 0 {
                assert!(matches!(r, Err(Error::Cancelled)), "{f}: {r:?}");
            }
        }
        if interrupted && calls.is_empty() {
            // No call took the interrupt: it is still pending, for the next call.
            assert!(session.interrupt_handle().is_pending());
        }
    });
});
