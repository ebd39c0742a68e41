//! The session's budgets and interrupt, on hand-written executables (`vm::craft`): each test
//! runs what a hostile file would and asserts the typed error, the bound on what was held, and
//! that the session is usable afterwards.

use std::sync::Arc;
use std::time::Duration;

use super::craft;
use super::SessionOptions;
use crate::error::Error;
use crate::model::{LoadOptions, Model};
use crate::value::{Arg, Value};

fn load(file: &[u8]) -> Model {
    Model::load_from_memory_with(file, LoadOptions::default().code_free(true))
        .expect("a crafted model loads")
}

fn options() -> SessionOptions {
    SessionOptions {
        threads: Some(1),
        ..SessionOptions::default()
    }
}

/// `mote.test.ne(a, b)` and `mote.test.add(a, b)` on ints, for the crafted loops.
fn register_arithmetic() {
    let int = |a: &Arg<'_>| match a {
        Arg::Int(i) => Ok(*i),
        _ => Err(Error::InvalidArgument("not an int".into())),
    };
    crate::registry::register_function(
        "mote.test.ne",
        Arc::new(move |a| Ok(Value::Int((int(&a[0])? != int(&a[1])?) as i64))),
    );
    crate::registry::register_function(
        "mote.test.add",
        Arc::new(move |a| Ok(Value::Int(int(&a[0])? + int(&a[1])?))),
    );
}

fn budget_of(e: &Error) -> Option<&'static str> {
    match e {
        Error::ResourceExhausted { budget, .. } => Some(budget),
        _ => None,
    }
}

#[test]
fn an_endless_loop_ends_at_the_instruction_budget() {
    let model = load(&craft::endless_loop());
    let mut s = model
        .session_with(SessionOptions {
            max_instructions: 100_000,
            ..options()
        })
        .unwrap();
    for _ in 0..2 {
        let e = s.call("main", &[]).expect_err("loops forever");
        assert_eq!(
            budget_of(&e),
            Some("SessionOptions::max_instructions"),
            "{e}"
        );
    }
}

#[test]
fn a_loop_that_ends_runs_within_the_budget_and_not_past_it() {
    register_arithmetic();
    let model = load(&craft::counted_loop());
    // The function has five instructions: charged once as it is entered and once more at
    // each backward jump, one per iteration (a bound on what runs: four per iteration).
    let mut s = model
        .session_with(SessionOptions {
            max_instructions: 5 + 5 * 1000,
            ..options()
        })
        .unwrap();
    let r = s
        .call("main", &[Value::Int(1000)])
        .expect("fits the budget");
    assert!(matches!(r, Value::Int(0)), "{r:?}");
    let e = s.call("main", &[Value::Int(1001)]).expect_err("one more");
    assert_eq!(
        budget_of(&e),
        Some("SessionOptions::max_instructions"),
        "{e}"
    );
}

#[test]
fn an_interrupt_stops_a_running_call_once_and_the_session_goes_on() {
    let model = load(&craft::endless_loop());
    let mut s = model
        .session_with(SessionOptions {
            max_instructions: u64::MAX,
            ..options()
        })
        .unwrap();
    let handle = s.interrupt_handle();
    let stopper = std::thread::spawn(move || {
        std::thread::sleep(Duration::from_millis(50));
        handle.interrupt();
    });
    let e = s.call("main", &[]).expect_err("interrupted");
    assert!(matches!(e, Error::Cancelled), "{e:?}");
    stopper.join().unwrap();
    assert!(!s.interrupt_handle().is_pending(), "the call consumed it");
    // The interrupt was consumed: the next call runs until its own budget.
    let mut s2 = model
        .session_with(SessionOptions {
            max_instructions: 1000,
            ..options()
        })
        .unwrap();
    let e = s2.call("main", &[]).expect_err("budget");
    assert!(budget_of(&e).is_some(), "{e:?}");
}

#[test]
fn an_interrupt_while_idle_cancels_the_next_call_only() {
    register_arithmetic();
    let model = load(&craft::counted_loop());
    let mut s = model.session_with(options()).unwrap();
    s.interrupt_handle().interrupt();
    assert!(s.interrupt_handle().is_pending());
    let e = s.call("main", &[Value::Int(3)]).expect_err("cancelled");
    assert!(matches!(e, Error::Cancelled), "{e:?}");
    let r = s.call("main", &[Value::Int(3)]).expect("runs");
    assert!(matches!(r, Value::Int(0)), "{r:?}");
    // A discarded interrupt cancels nothing.
    s.interrupt_handle().interrupt();
    s.interrupt_handle().clear();
    assert!(!s.interrupt_handle().is_pending());
    let r = s.call("main", &[Value::Int(3)]).expect("runs");
    assert!(matches!(r, Value::Int(0)), "{r:?}");
}

/// Issue 27: a 10 KiB file whose `main` has 2^20 registers and calls itself reached 10 GiB.
/// Now the second frame is refused, having held one frame's registers.
#[test]
fn a_huge_register_file_is_refused_by_the_register_budget() {
    let model = load(&craft::self_recursion(1 << 20));
    let mut s = model.session_with(options()).unwrap();
    crate::test_alloc::peak_since_reset();
    let e = s.call("main", &[Value::Int(1)]).expect_err("over budget");
    let peak = crate::test_alloc::peak_since_reset();
    assert_eq!(budget_of(&e), Some("SessionOptions::max_registers"), "{e}");
    let frame = (1usize << 20) * std::mem::size_of::<Value>();
    assert!(
        peak <= 2 * frame as isize + (1 << 20),
        "held {peak} bytes for a {frame}-byte frame"
    );
}

/// Unbounded recursion stops at the stack budget on a 512 KiB thread (iOS's secondary
/// threads), in this build (debug for `cargo test`, release under `--release`; CI runs both,
/// on x86_64 and on aarch64 under qemu). The depth reached is printed: the stack one level
/// of Relax call takes here is 256 KiB over it.
#[test]
fn recursion_stops_at_the_stack_budget_on_a_512_kib_thread() {
    register_arithmetic();
    let deep = load(&craft::self_recursion(4));
    let counted = load(&craft::countdown());
    let t = std::thread::Builder::new()
        .stack_size(512 << 10)
        .spawn(move || {
            let mut s = deep.session_with(options()).unwrap();
            let e = s.call("main", &[Value::Int(1)]).expect_err("endless");
            assert_eq!(
                budget_of(&e),
                Some("SessionOptions::stack_budget_bytes"),
                "{e}"
            );
            let depth: usize = e
                .to_string()
                .split("at depth ")
                .nth(1)
                .and_then(|r| r.split(' ').next())
                .and_then(|d| d.parse().ok())
                .expect("the message names the depth");
            // A chain that calls a function at every level (the registered ones) to just
            // under that depth completes: the budget leaves room for what a level calls.
            let mut s = counted.session_with(options()).unwrap();
            let n = depth as i64 - 2;
            let r = s.call("main", &[Value::Int(n)]);
            assert!(matches!(r, Ok(Value::Int(0))), "depth {n}: {r:?}");
            depth
        })
        .unwrap();
    let depth = t.join().expect("no stack overflow");
    eprintln!(
        "stack budget {} bytes: recursion stopped at depth {depth} (about {} bytes a level, {})",
        super::DEFAULT_STACK_BUDGET,
        super::DEFAULT_STACK_BUDGET / depth.max(1),
        if cfg!(debug_assertions) {
            "debug"
        } else {
            "release"
        }
    );
    assert!(depth >= 16, "only {depth} levels fit the budget");
}

/// A file-chosen shape heap larger than the session's memory budget is refused before
/// anything is allocated.
#[test]
fn a_shape_heap_over_the_memory_budget_is_refused() {
    let file = craft::model(&[
        craft::Entry::Vm {
            name: "main".into(),
            params: vec![],
            registers: 1,
            code: vec![
                craft::Instr::Call {
                    dst: 0,
                    func: 1,
                    args: vec![craft::Arg::Reg(craft::VOID + 1), craft::Arg::Imm(1 << 40)],
                },
                craft::Instr::Ret { reg: 0 },
            ],
        },
        craft::Entry::Packed("vm.builtin.alloc_shape_heap".into()),
    ]);
    let model = load(&file);
    let mut s = model
        .session_with(SessionOptions {
            memory_budget_bytes: 1 << 30,
            ..options()
        })
        .unwrap();
    crate::test_alloc::largest_since_reset();
    let e = s.call("main", &[]).expect_err("over budget");
    assert_eq!(
        budget_of(&e),
        Some("SessionOptions::memory_budget_bytes"),
        "{e}"
    );
    assert!(crate::test_alloc::largest_since_reset() < 1 << 20);
}

/// Interrupts from another thread at random moments against four sessions on four threads,
/// each calling an endless loop under a small budget over and over: every call ends with
/// `Cancelled` or at its budget (never a hang or another error), no session is cancelled more
/// often than it was interrupted, interrupts do reach running calls, and once the interrupter
/// stops, at most one interrupt per session is left, which cancels exactly its next call.
#[test]
fn stress_interrupts_from_another_thread_cancel_one_call_each() {
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    let model = load(&craft::endless_loop());
    let sessions: Vec<_> = (0..4)
        .map(|_| {
            model
                .session_with(SessionOptions {
                    max_instructions: 20_000,
                    ..options()
                })
                .unwrap()
        })
        .collect();
    let handles: Vec<_> = sessions.iter().map(|s| s.interrupt_handle()).collect();
    let sent: Arc<Vec<AtomicU64>> = Arc::new((0..4).map(|_| AtomicU64::new(0)).collect());
    let stop = Arc::new(AtomicBool::new(false));
    let interrupter = {
        let (sent, stop) = (sent.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut x = 0x2545_f491_4f6c_dd1du64;
            while !stop.load(Ordering::Relaxed) {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let k = (x % 4) as usize;
                handles[k].interrupt();
                sent[k].fetch_add(1, Ordering::Relaxed);
                std::thread::sleep(Duration::from_micros(50 + x % 400));
            }
        })
    };
    let workers: Vec<_> = sessions
        .into_iter()
        .map(|mut s| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let (mut cancelled, mut exhausted) = (0u64, 0u64);
                while !stop.load(Ordering::Relaxed) {
                    match s.call("main", &[]) {
                        Err(Error::Cancelled) => cancelled += 1,
                        Err(Error::ResourceExhausted { .. }) => exhausted += 1,
                        r => panic!("neither cancelled nor at the budget: {r:?}"),
                    }
                }
                (s, cancelled, exhausted)
            })
        })
        .collect();
    std::thread::sleep(Duration::from_millis(400));
    stop.store(true, Ordering::Relaxed);
    interrupter.join().unwrap();
    let mut total = 0;
    for (k, w) in workers.into_iter().enumerate() {
        let (mut s, cancelled, exhausted) = w.join().expect("no worker panicked");
        let sent = sent[k].load(Ordering::Relaxed);
        assert!(
            cancelled <= sent,
            "session {k}: {cancelled} cancelled, {sent} sent"
        );
        assert!(exhausted > 0, "session {k} never ran to its budget");
        total += cancelled;
        // At most one interrupt left: it cancels the next call only.
        if s.interrupt_handle().is_pending() {
            assert!(matches!(s.call("main", &[]), Err(Error::Cancelled)));
        }
        let e = s.call("main", &[]).expect_err("budget");
        assert!(budget_of(&e).is_some(), "session {k}: {e:?}");
    }
    assert!(total > 0, "no interrupt reached a running call");
}
