//! Mote's thread pool for `TVMBackendParallelLaunch` (docs/tvm-format.md §8.3).
//!
//! A kernel hands a parallel loop body to the runtime with a task count. Every launch gets its
//! own [`Launch`] (job, task counter, pending count, barrier, error slot) behind an `Arc`: the
//! launching thread and the pool's workers claim task indices from that launch's counter, all
//! concurrently, so `TVMBackendParallelBarrier` works. A worker that arrives late holds its own
//! reference to the launch it woke for; it can only find that launch's counter exhausted, never
//! run a task of a later launch with an earlier launch's lambda. The lambda and its closure data
//! belong to the kernel's stack frame, so they are only called for a claimed task, and the
//! launching thread returns only once every claimed task has finished.
//!
//! A task that fails (returns non-zero, which is also what a lambda's own panic boundary
//! returns) marks its launch failed before it finishes. The launch's barrier watches that flag:
//! tasks waiting at it, or reaching it later, leave with -1 instead of waiting for a task that
//! will never arrive, and the launch returns the first task's error (issue 27, item 4).
//!
//! Workers spin briefly before sleeping, because inference issues launches back to back and a
//! sleeping worker costs tens of microseconds to wake.
//!
//! Each VM session owns its pool; the pool of the session currently running a kernel on this
//! thread is found through a thread-local set for the duration of [`ThreadPool::install`].
//! Launches from inside a task (nested parallelism) and from threads without a session run
//! serially.

use std::cell::RefCell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::abi::{ParallelGroupEnv, ParallelLambda};
use super::error_slot::{set_error, take_error};

const SPIN: Duration = Duration::from_micros(200);

/// One parallel launch. Shared by the launching thread and every worker that joins it.
struct Launch {
    f: ParallelLambda,
    /// The kernel's closure data, as an address: only passed to `f` for a claimed task.
    cdata: usize,
    num_task: usize,
    next_task: AtomicUsize,
    /// Claimed tasks not finished yet, plus tasks not claimed yet.
    pending: AtomicUsize,
    /// The first error a task raised, re-raised on the launching thread.
    error: Mutex<Option<(String, String)>>,
    /// Also holds the launch's `failed` flag, which the barrier needs to see.
    barrier: Barrier,
}

/// Barrier state for one launch, reached through `ParallelGroupEnv::sync_handle`.
struct Barrier {
    arrived: AtomicUsize,
    generation: AtomicU64,
    total: usize,
    /// How many tasks run at once; a barrier over more tasks than that would deadlock.
    capacity: usize,
    /// Set once a task of this launch has failed, after its error is recorded: from then on
    /// the barrier releases its waiters with -1 (and never completes a generation), since the
    /// failed task will not arrive.
    failed: AtomicBool,
}

impl Barrier {
    fn new(total: usize, capacity: usize) -> Barrier {
        Barrier {
            arrived: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
            total,
            capacity,
            failed: AtomicBool::new(false),
        }
    }
}

impl Launch {
    /// Claim and run tasks until none are left. Returns when this thread can claim no more;
    /// tasks other threads claimed may still be running.
    fn run_tasks(&self) {
        loop {
            let task = self.next_task.fetch_add(1, Ordering::AcqRel);
            if task >= self.num_task {
                return;
            }
            let mut env = ParallelGroupEnv {
                sync_handle: &self.barrier as *const Barrier as *mut c_void,
                num_task: self.num_task as i32,
            };
            // SAFETY: `task` was claimed from this launch's counter, so the launching thread is
            // still inside `ThreadPool::launch` (it waits for `pending` to reach zero, which
            // needs this task to finish): the lambda and its closure data, which belong to the
            // kernel's frame, are alive. `env` outlives the call, and its barrier lives in this
            // launch, which this thread holds.
            let rc = unsafe { (self.f)(task as i32, &mut env, self.cdata as *mut c_void) };
            // Taken even on success, so that an error a task set but did not return (the
            // barrier's, ignored) cannot stay on this thread for a later task to report.
            let error = take_error();
            if rc != 0 {
                if let Some(e) = error {
                    if let Ok(mut slot) = self.error.lock() {
                        slot.get_or_insert(e);
                    }
                }
                // After the error is in the slot: tasks the barrier releases because of this
                // failure fail in turn, and their (secondary) errors must not come first.
                self.barrier.failed.store(true, Ordering::Release);
            }
            // Release: the task's writes are visible to whoever sees `pending` reach zero.
            self.pending.fetch_sub(1, Ordering::AcqRel);
        }
    }
}

struct Shared {
    /// Incremented for every launch (and at shutdown); idle workers wait for it to change.
    generation: AtomicU64,
    /// The launch in progress, if any.
    current: Mutex<Option<Arc<Launch>>>,
    shutdown: AtomicBool,
    sleep_lock: Mutex<()>,
    wake: Condvar,
}

/// A fixed set of worker threads. Dropping the pool stops and joins them.
pub struct ThreadPool {
    inner: Arc<PoolInner>,
}

struct PoolInner {
    shared: Arc<Shared>,
    workers: Mutex<Vec<JoinHandle<()>>>,
    threads: usize,
    /// One launch at a time per pool.
    launching: Mutex<()>,
}

thread_local! {
    /// The pool installed on this thread by `ThreadPool::install`.
    static CURRENT: RefCell<Option<Arc<PoolInner>>> = const { RefCell::new(None) };
    /// Set while this thread runs a task of a launch: launches from inside run serially.
    static IN_TASK: std::cell::Cell<bool> = const { std::cell::Cell::new(false) };
}

impl ThreadPool {
    /// A pool running `threads` tasks at once (the caller counts as one).
    pub fn new(threads: usize) -> ThreadPool {
        let threads = threads.max(1);
        let shared = Arc::new(Shared {
            generation: AtomicU64::new(0),
            current: Mutex::new(None),
            shutdown: AtomicBool::new(false),
            sleep_lock: Mutex::new(()),
            wake: Condvar::new(),
        });
        let workers = (1..threads)
            .filter_map(|i| {
                let s = shared.clone();
                std::thread::Builder::new()
                    .name(format!("mote-worker-{i}"))
                    .spawn(move || worker(s))
                    .ok()
            })
            .collect::<Vec<_>>();
        let threads = workers.len() + 1;
        ThreadPool {
            inner: Arc::new(PoolInner {
                shared,
                workers: Mutex::new(workers),
                threads,
                launching: Mutex::new(()),
            }),
        }
    }

    pub fn threads(&self) -> usize {
        self.inner.threads
    }

    /// Run `f` with this pool installed as the current thread's pool.
    pub fn install<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Restore(Option<Arc<PoolInner>>);
        impl Drop for Restore {
            fn drop(&mut self) {
                let prev = self.0.take();
                CURRENT.with(|c| *c.borrow_mut() = prev);
            }
        }
        let prev = CURRENT.with(|c| c.borrow_mut().replace(self.inner.clone()));
        let _restore = Restore(prev);
        f()
    }
}

impl PoolInner {
    /// Run `num_task` tasks of `f` on this thread and the workers; returns when all finished.
    fn launch(&self, f: ParallelLambda, cdata: *mut c_void, num_task: usize) -> i32 {
        let Ok(_one_at_a_time) = self.launching.lock() else {
            return run_serial(f, cdata, num_task);
        };
        let launch = Arc::new(Launch {
            f,
            cdata: cdata as usize,
            num_task,
            next_task: AtomicUsize::new(0),
            pending: AtomicUsize::new(num_task),
            error: Mutex::new(None),
            barrier: Barrier::new(num_task, self.threads),
        });
        let s = &self.shared;
        match s.current.lock() {
            Ok(mut c) => *c = Some(launch.clone()),
            Err(_) => return run_serial(f, cdata, num_task),
        }
        s.generation.fetch_add(1, Ordering::Release);
        {
            let _g = s.sleep_lock.lock();
            s.wake.notify_all();
        }
        in_task(|| launch.run_tasks());
        // Wait for the tasks workers claimed; they are short, so spin, then yield.
        let start = Instant::now();
        while launch.pending.load(Ordering::Acquire) != 0 {
            if start.elapsed() < SPIN {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        if let Ok(mut c) = s.current.lock() {
            *c = None;
        }
        if launch.barrier.failed.load(Ordering::Acquire) {
            if let Some((kind, msg)) = launch.error.lock().ok().and_then(|mut e| e.take()) {
                set_error(&kind, &msg);
            }
            -1
        } else {
            0
        }
    }
}

impl Drop for PoolInner {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::Release);
        self.shared.generation.fetch_add(1, Ordering::Release);
        {
            let _g = self.shared.sleep_lock.lock();
            self.shared.wake.notify_all();
        }
        let workers = match self.workers.get_mut() {
            Ok(w) => std::mem::take(w),
            Err(p) => std::mem::take(p.into_inner()),
        };
        for w in workers {
            let _ = w.join();
        }
    }
}

/// Run `f` marked as inside a task, so launches it makes run serially.
fn in_task<R>(f: impl FnOnce() -> R) -> R {
    struct Leave(bool);
    impl Drop for Leave {
        fn drop(&mut self) {
            IN_TASK.with(|w| w.set(self.0));
        }
    }
    let _leave = Leave(IN_TASK.with(|w| w.replace(true)));
    f()
}

fn worker(s: Arc<Shared>) {
    IN_TASK.with(|w| w.set(true));
    let mut seen = 0u64;
    loop {
        let start = Instant::now();
        loop {
            let g = s.generation.load(Ordering::Acquire);
            if g != seen {
                seen = g;
                break;
            }
            if start.elapsed() < SPIN {
                std::hint::spin_loop();
                continue;
            }
            let guard = match s.sleep_lock.lock() {
                Ok(g) => g,
                Err(_) => return,
            };
            if s.generation.load(Ordering::Acquire) == seen {
                let _ = s.wake.wait_timeout(guard, Duration::from_millis(100));
            }
        }
        if s.shutdown.load(Ordering::Acquire) {
            return;
        }
        // Whatever launch is current now: the one that woke us, a later one, or none. Holding
        // it, this worker can only claim tasks of that launch.
        let launch = s.current.lock().ok().and_then(|c| c.clone());
        if let Some(launch) = launch {
            launch.run_tasks();
        }
    }
}

fn run_serial(f: ParallelLambda, cdata: *mut c_void, num_task: usize) -> i32 {
    let barrier = Barrier::new(num_task, 1);
    let mut env = ParallelGroupEnv {
        sync_handle: &barrier as *const Barrier as *mut c_void,
        num_task: num_task as i32,
    };
    for task in 0..num_task {
        // SAFETY: arguments come straight from the kernel's launch call and outlive it; `env`
        // and its barrier outlive the loop.
        if unsafe { f(task as i32, &mut env, cdata) } != 0 {
            return -1;
        }
    }
    0
}

/// The pool installed on this thread, unless this thread is running a task already.
fn current_pool() -> Option<Arc<PoolInner>> {
    if IN_TASK.with(|w| w.get()) {
        return None;
    }
    CURRENT.with(|c| c.borrow().clone())
}

// The cpu backend's own parallel loops over the installed pool (Rust closures, not TVM
// lambdas): only in builds with that backend.
#[cfg(feature = "cpu-backend")]
pub(crate) use chunked::{current_parallelism, parallel_chunks};

#[cfg(feature = "cpu-backend")]
mod chunked {
    use super::*;

    /// How many tasks a parallel loop started on this thread runs at once: the installed session
    /// pool's size, or 1 (no pool, or already inside a pool task).
    pub(crate) fn current_parallelism() -> usize {
        current_pool().map_or(1, |p| p.threads)
    }

    type ChunkFn<'a> = dyn Fn(std::ops::Range<usize>) -> crate::error::Result<()> + Sync + 'a;

    struct Chunks<'a> {
        f: &'a ChunkFn<'a>,
        n: usize,
        tasks: usize,
        error: Mutex<Option<crate::error::Error>>,
    }

    impl Chunks<'_> {
        fn range(&self, task: usize) -> std::ops::Range<usize> {
            (task * self.n / self.tasks)..((task + 1) * self.n / self.tasks)
        }

        fn fail(&self, e: crate::error::Error) {
            if let Ok(mut slot) = self.error.lock() {
                slot.get_or_insert(e);
            }
        }
    }

    unsafe extern "C" fn chunk_task(
        task: i32,
        _env: *mut ParallelGroupEnv,
        cdata: *mut c_void,
    ) -> i32 {
        // SAFETY: `cdata` is the `Chunks` that `parallel_chunks` keeps alive until every task has
        // returned; it is only read (the error slot is a mutex).
        let chunks = unsafe { &*(cdata as *const Chunks<'_>) };
        let range = chunks.range(task.max(0) as usize);
        match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (chunks.f)(range))) {
            Ok(Ok(())) => return 0,
            Ok(Err(e)) => chunks.fail(e),
            Err(_) => chunks.fail(crate::error::Error::Backend {
                backend: "cpu".into(),
                message: "a parallel task panicked".into(),
            }),
        }
        // The error itself is in `chunks`; the launch only needs to know the task failed.
        -1
    }

    /// Run `f` over `0..n`, split into contiguous chunks, one per thread of the session pool
    /// installed on this thread (serially, as one chunk, without a pool). Returns the first error.
    pub(crate) fn parallel_chunks(n: usize, f: &ChunkFn<'_>) -> crate::error::Result<()> {
        let pool = match current_pool() {
            Some(p) if p.threads.min(n) > 1 => p,
            _ => return f(0..n),
        };
        let chunks = Chunks {
            f,
            n,
            tasks: pool.threads.min(n),
            error: Mutex::new(None),
        };
        // `chunks` outlives the launch, which returns only after every task finished.
        let rc = pool.launch(
            chunk_task,
            &chunks as *const Chunks<'_> as *mut c_void,
            chunks.tasks,
        );
        if let Some(e) = chunks.error.lock().ok().and_then(|mut e| e.take()) {
            return Err(e);
        }
        if rc != 0 {
            return Err(crate::error::Error::Backend {
                backend: "cpu".into(),
                message: "a parallel task failed".into(),
            });
        }
        Ok(())
    }
}

/// `TVMBackendParallelLaunch`.
pub(crate) unsafe extern "C" fn parallel_launch(
    f: ParallelLambda,
    cdata: *mut c_void,
    num_task: i32,
) -> i32 {
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let Some(pool) = current_pool() else {
            // No pool here: one task does all the work (the lambda splits by num_task).
            return run_serial(f, cdata, num_task.max(1) as usize);
        };
        let n = if num_task > 0 {
            num_task as usize
        } else {
            pool.threads
        };
        if n == 1 || pool.threads == 1 {
            in_task(|| run_serial(f, cdata, n))
        } else {
            // Tasks beyond the pool size would deadlock at a barrier (which refuses them); TVM's
            // codegen asks for 0, meaning the pool size.
            pool.launch(f, cdata, n)
        }
    }));
    result.unwrap_or_else(|_| {
        set_error("RuntimeError", "TVMBackendParallelLaunch: Mote panicked");
        -1
    })
}

/// `TVMBackendParallelBarrier`: a generation-counting spin barrier over the launch's tasks.
pub(crate) unsafe extern "C" fn parallel_barrier(
    _task_id: i32,
    penv: *mut ParallelGroupEnv,
) -> i32 {
    if penv.is_null() {
        set_error("ValueError", "TVMBackendParallelBarrier: NULL environment");
        return -1;
    }
    // SAFETY: `penv` is the env Mote passed to this task's lambda (kernels pass it through
    // unchanged); its sync_handle points to the barrier of the launch the task belongs to,
    // which the thread running the task keeps alive.
    let b = unsafe { &*((*penv).sync_handle as *const Barrier) };
    std::panic::catch_unwind(|| barrier_wait(b)).unwrap_or_else(|_| {
        set_error("RuntimeError", "TVMBackendParallelBarrier: Mote panicked");
        -1
    })
}

fn barrier_wait(b: &Barrier) -> i32 {
    if b.total <= 1 {
        return 0;
    }
    if b.total > b.capacity {
        set_error(
            "RuntimeError",
            &format!(
                "parallel barrier over {} tasks, but only {} run at once; raise the session's thread count",
                b.total, b.capacity
            ),
        );
        return -1;
    }
    if b.failed.load(Ordering::Acquire) {
        return released_by_failure();
    }
    // The generation cannot advance before this task arrives, so reading it first is safe.
    let gen = b.generation.load(Ordering::Acquire);
    if b.arrived.fetch_add(1, Ordering::AcqRel) + 1 == b.total {
        if b.failed.load(Ordering::Acquire) {
            // A task that left this barrier early still counted as arrived: completing the
            // generation would let the others through without it.
            return released_by_failure();
        }
        b.arrived.store(0, Ordering::Relaxed);
        b.generation.fetch_add(1, Ordering::Release);
    } else {
        let start = Instant::now();
        while b.generation.load(Ordering::Acquire) == gen {
            // A failed task never arrives: waiting for it would hang the launch.
            if b.failed.load(Ordering::Acquire) {
                return released_by_failure();
            }
            if start.elapsed() < SPIN {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
    0
}

/// The barrier's answer once its launch has failed: -1, so a task that checks it unwinds. TVM's
/// generated code ignores it and runs on unsynchronised, harmless in a launch whose outputs are
/// not used. The launch reports the failed task's own error, recorded before the flag was set;
/// this one only shows if that task recorded none.
fn released_by_failure() -> i32 {
    set_error(
        "RuntimeError",
        "TVMBackendParallelBarrier: another task of this parallel launch failed",
    );
    -1
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    unsafe extern "C" fn body(task: i32, penv: *mut ParallelGroupEnv, cdata: *mut c_void) -> i32 {
        // SAFETY: the tests pass a `[AtomicU32; 8]` that outlives the launch, and Mote's env.
        let (hits, n) = unsafe { (&*(cdata as *const [AtomicU32; 8]), (*penv).num_task) };
        hits[task as usize].fetch_add(1, Ordering::SeqCst);
        // Everyone must have counted before anyone passes the barrier.
        // SAFETY: `penv` is the env Mote passed to this task.
        if unsafe { parallel_barrier(task, penv) } != 0 {
            return -1;
        }
        let all: u32 = hits[..n as usize]
            .iter()
            .map(|h| h.load(Ordering::SeqCst))
            .sum();
        if all as i32 == n {
            0
        } else {
            -1
        }
    }

    fn launch(f: ParallelLambda, cdata: *const c_void, num_task: i32) -> i32 {
        // SAFETY: the tests' lambdas accept the closure data they are given here.
        unsafe { parallel_launch(f, cdata.cast_mut(), num_task) }
    }

    #[test]
    fn every_task_runs_once_and_the_barrier_holds() {
        let pool = ThreadPool::new(3);
        for _ in 0..200 {
            let hits: [AtomicU32; 8] = Default::default();
            let rc = pool.install(|| launch(body, &hits as *const _ as *const c_void, 0));
            assert_eq!(rc, 0);
            let counts: Vec<u32> = hits.iter().map(|h| h.load(Ordering::SeqCst)).collect();
            assert_eq!(counts, [1, 1, 1, 0, 0, 0, 0, 0]);
        }
        // Without an installed pool the launch runs serially with a single task.
        let hits: [AtomicU32; 8] = Default::default();
        assert_eq!(launch(body, &hits as *const _ as *const c_void, 0), 0);
        assert_eq!(hits[0].load(Ordering::SeqCst), 1);
    }

    #[test]
    fn a_barrier_over_more_tasks_than_threads_is_an_error_not_a_hang() {
        let pool = ThreadPool::new(2);
        let hits: [AtomicU32; 8] = Default::default();
        let rc = pool.install(|| launch(body, &hits as *const _ as *const c_void, 5));
        assert_eq!(rc, -1);
        let (_, msg) = take_error().expect("the barrier's error reaches the launching thread");
        assert!(msg.contains("5 tasks"), "{msg}");
    }

    unsafe extern "C" fn fail_task_2(
        task: i32,
        _penv: *mut ParallelGroupEnv,
        cdata: *mut c_void,
    ) -> i32 {
        // SAFETY: the test passes an `AtomicU32` that outlives the launch.
        unsafe { &*(cdata as *const AtomicU32) }.fetch_add(1, Ordering::SeqCst);
        if task == 2 {
            set_error("ValueError", "task 2 says no");
            return -1;
        }
        0
    }

    #[test]
    fn a_task_error_reaches_the_launching_thread_and_the_pool_keeps_working() {
        let pool = ThreadPool::new(4);
        for _ in 0..50 {
            let ran = AtomicU32::new(0);
            let rc = pool.install(|| launch(fail_task_2, &ran as *const _ as *const c_void, 4));
            assert_eq!(rc, -1);
            assert_eq!(ran.load(Ordering::SeqCst), 4, "every task still runs");
            assert_eq!(
                take_error(),
                Some(("ValueError".into(), "task 2 says no".into()))
            );
            let hits: [AtomicU32; 8] = Default::default();
            assert_eq!(
                pool.install(|| launch(body, &hits as *const _ as *const c_void, 0)),
                0
            );
        }
    }

    /// What `fail_at_barrier` does in one launch: which tasks fail, and where.
    struct Failing {
        /// Bit `t` set: task `t` fails.
        fail: u32,
        /// Fail after the first barrier instead of before it.
        after_first: bool,
        /// Fail by panicking inside the lambda's own panic boundary, not by returning -1.
        panic: bool,
        /// The others ignore what the barrier returns, as TVM's generated code does.
        ignore: bool,
    }

    /// Two barriers; the chosen tasks fail before the first (or between the two). The others
    /// hand back a failing barrier's result, or ignore it.
    unsafe extern "C" fn fail_at_barrier(
        task: i32,
        penv: *mut ParallelGroupEnv,
        cdata: *mut c_void,
    ) -> i32 {
        // SAFETY: the test passes a `Failing` that outlives the launch.
        let how = unsafe { &*(cdata as *const Failing) };
        let fails = how.fail & (1 << task) != 0;
        let fail = || -> i32 {
            if how.panic {
                // A panic stopped at the lambda's boundary, as a Rust lambda must
                // (`resume_unwind` unwinds without printing a message for every launch).
                std::panic::catch_unwind(|| -> i32 { std::panic::resume_unwind(Box::new(task)) })
                    .unwrap_or_else(|_| {
                        set_error("RuntimeError", &format!("task {task} panicked"));
                        -1
                    })
            } else {
                set_error("ValueError", &format!("task {task} says no"));
                -1
            }
        };
        if fails && !how.after_first {
            return fail();
        }
        // SAFETY: `penv` is the env Mote passed to this task.
        let rc = unsafe { parallel_barrier(task, penv) };
        if rc != 0 && !how.ignore {
            return rc;
        }
        if fails {
            return fail();
        }
        // SAFETY: as above.
        let rc = unsafe { parallel_barrier(task, penv) };
        if how.ignore {
            0
        } else {
            rc
        }
    }

    /// Issue 27, item 4: a task that fails before (or between) barriers must not leave the
    /// others waiting for it. At every pool size from 1 to 8, many launches with one failing
    /// task (before the first barrier, after it, by panic) and with several, each followed by
    /// a normal launch on the same pool. The launches run on a helper thread, and each must
    /// answer within a generous deadline; before the fix the first one hung at the barrier.
    #[test]
    fn stress_a_failing_task_releases_the_barrier_at_1_to_8_threads() {
        use std::sync::mpsc;
        let rounds: u32 = if cfg!(debug_assertions) { 100 } else { 1_000 };
        let deadline = Duration::from_secs(20);
        for threads in 1..=8u32 {
            let (tx, rx) = mpsc::channel::<std::result::Result<(), String>>();
            let helper = std::thread::spawn(move || {
                let pool = ThreadPool::new(threads as usize);
                assert_eq!(pool.threads(), threads as usize, "the pool has its threads");
                for i in 0..rounds {
                    let chosen = i % threads;
                    let one = |after_first, panic, ignore| Failing {
                        fail: 1 << chosen,
                        after_first,
                        panic,
                        ignore,
                    };
                    // Every other task, starting at `chosen`.
                    let several = Failing {
                        fail: (0..threads)
                            .filter(|t| (t + chosen) % 2 == 0)
                            .fold(0, |m, t| m | 1 << t),
                        after_first: false,
                        panic: false,
                        ignore: false,
                    };
                    let variants = [
                        (
                            "one task fails before the barrier",
                            one(false, false, false),
                        ),
                        (
                            "one task fails after the first barrier",
                            one(true, false, false),
                        ),
                        (
                            "one task panics before the barrier",
                            one(false, true, false),
                        ),
                        (
                            "one fails, the others ignore the barrier",
                            one(false, false, true),
                        ),
                        ("several tasks fail before the barrier", several),
                    ];
                    for (what, how) in variants {
                        let panic = how.panic;
                        let rc = pool.install(|| {
                            launch(fail_at_barrier, &how as *const _ as *const c_void, 0)
                        });
                        let err = take_error();
                        let expected_kind = if panic { "RuntimeError" } else { "ValueError" };
                        let verdict = match (rc, &err) {
                            (-1, Some((kind, msg)))
                                if kind == expected_kind
                                    && msg.starts_with("task ")
                                    && !msg.contains("barrier") =>
                            {
                                Ok(())
                            }
                            _ => Err(format!(
                                "{threads} threads, round {i}, {what}: rc {rc}, error {err:?} \
                                 (expected -1 and a failing task's own error)"
                            )),
                        };
                        // The pool still works.
                        let hits: [AtomicU32; 8] = Default::default();
                        let next =
                            pool.install(|| launch(body, &hits as *const _ as *const c_void, 0));
                        let counts: Vec<u32> =
                            hits.iter().map(|h| h.load(Ordering::SeqCst)).collect();
                        let verdict = verdict.and_then(|()| {
                            if next == 0 && counts[..threads as usize].iter().all(|&c| c == 1) {
                                Ok(())
                            } else {
                                Err(format!(
                                    "{threads} threads, round {i}, after {what}: the next launch \
                                     gave rc {next}, task counts {counts:?}"
                                ))
                            }
                        });
                        if tx.send(verdict).is_err() {
                            return;
                        }
                    }
                }
            });
            for _ in 0..rounds * 5 {
                match rx.recv_timeout(deadline) {
                    Ok(Ok(())) => {}
                    Ok(Err(m)) => panic!("{m}"),
                    Err(_) => panic!(
                        "{threads} threads: a launch with a failing task gave no answer within \
                         {deadline:?}; the other tasks are still waiting at the barrier"
                    ),
                }
            }
            assert!(
                helper.join().is_ok(),
                "{threads} threads: the helper panicked"
            );
        }
    }

    unsafe extern "C" fn nested(
        task: i32,
        _penv: *mut ParallelGroupEnv,
        cdata: *mut c_void,
    ) -> i32 {
        // SAFETY: the test passes `[[AtomicU32; 8]; 4]` that outlives the launch.
        let rows = unsafe { &*(cdata as *const [[AtomicU32; 8]; 4]) };
        let row = &rows[task as usize];
        // From inside a task, a launch runs serially on this thread, as one task.
        let rc = launch(body, row as *const _ as *const c_void, 0);
        if rc != 0 || !IN_TASK.with(|w| w.get()) {
            return -1;
        }
        0
    }

    #[test]
    fn nested_launches_run_serially_inside_a_task() {
        let pool = ThreadPool::new(4);
        let rows: [[AtomicU32; 8]; 4] = Default::default();
        let rc = pool.install(|| launch(nested, &rows as *const _ as *const c_void, 0));
        assert_eq!(rc, 0);
        for row in &rows {
            let counts: Vec<u32> = row.iter().map(|h| h.load(Ordering::SeqCst)).collect();
            assert_eq!(counts, [1, 0, 0, 0, 0, 0, 0, 0]);
        }
        assert!(
            !IN_TASK.with(|w| w.get()),
            "the launching thread leaves task mode"
        );
    }

    #[test]
    fn parallel_chunks_cover_the_range_once_and_report_errors() {
        let pool = ThreadPool::new(3);
        let seen: Vec<AtomicU32> = (0..1000).map(|_| AtomicU32::new(0)).collect();
        let r = pool.install(|| {
            parallel_chunks(seen.len(), &|range| {
                for i in range {
                    seen[i].fetch_add(1, Ordering::SeqCst);
                }
                Ok(())
            })
        });
        assert!(r.is_ok());
        assert!(seen.iter().all(|s| s.load(Ordering::SeqCst) == 1));
        let r = pool.install(|| {
            parallel_chunks(10, &|range| {
                if range.contains(&9) {
                    Err(crate::error::Error::InvalidArgument("chunk with 9".into()))
                } else {
                    Ok(())
                }
            })
        });
        assert!(matches!(r, Err(crate::error::Error::InvalidArgument(m)) if m == "chunk with 9"));
    }

    /// One launch's record: which launch it is and how often each of its tasks ran.
    struct Record {
        hits: [AtomicU32; 4],
        /// Set when a pool worker (not the launching thread) ran one of its tasks.
        on_worker: AtomicBool,
        /// The launching thread's tasks wait until a worker has run one of this launch's.
        wait_for_worker: bool,
    }

    unsafe extern "C" fn count(task: i32, penv: *mut ParallelGroupEnv, cdata: *mut c_void) -> i32 {
        // SAFETY: the stress test keeps every record alive until all launches are done.
        let (r, n) = unsafe { (&*(cdata as *const Record), (*penv).num_task) };
        if n != 4 || !(0..4).contains(&task) {
            return -1;
        }
        let on_worker = WORKER_THREAD.with(|w| *w);
        // One launch in eight makes workers take part whatever the scheduler does: a task
        // the launching thread runs waits (10 s at most) until a worker has run one, and a
        // launching thread stuck in a task claims no more, so a worker must claim the rest.
        // The others end as fast as they can, which is when a late worker is most likely to
        // meet the next launch.
        // After one wait runs out, none waits again, so a pool whose workers never run fails
        // the test in seconds rather than hanging.
        if r.wait_for_worker && !on_worker && !GAVE_UP.load(Ordering::SeqCst) {
            let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
            while !r.on_worker.load(Ordering::SeqCst) {
                if std::time::Instant::now() > deadline {
                    GAVE_UP.store(true, Ordering::SeqCst);
                    break;
                }
                std::thread::yield_now();
            }
        }
        r.hits[task as usize].fetch_add(1, Ordering::SeqCst);
        if on_worker {
            r.on_worker.store(true, Ordering::SeqCst);
        }
        0
    }

    static GAVE_UP: AtomicBool = AtomicBool::new(false);

    thread_local! {
        static WORKER_THREAD: bool = std::thread::current()
            .name()
            .is_some_and(|n| n.starts_with("mote-worker"));
    }

    /// Back-to-back launches from several sessions at once, with more threads than cores. Every
    /// launch has its own record, all kept until the end, so a task that runs for the wrong
    /// launch (a late worker running an earlier launch's lambda) shows as a count of 2 on the
    /// earlier record and 0 on the later one. The pool this replaced failed this within about
    /// 100k launches on a loaded 2-core machine. `scripts/test.sh` runs it in release, where
    /// it makes 3 x 200,000 launches.
    #[test]
    fn stress_every_task_runs_exactly_once_for_its_own_launch() {
        let launches: usize = if cfg!(debug_assertions) {
            20_000
        } else {
            200_000
        };
        let sessions = 3;
        std::thread::scope(|scope| {
            for s in 0..sessions {
                scope.spawn(move || {
                    let pool = ThreadPool::new(4);
                    let records: Vec<Record> = (0..launches)
                        .map(|i| Record {
                            hits: Default::default(),
                            on_worker: AtomicBool::new(false),
                            wait_for_worker: i % 8 == 7,
                        })
                        .collect();
                    for (i, r) in records.iter().enumerate() {
                        let rc = pool.install(|| launch(count, r as *const _ as *const c_void, 0));
                        let hits: Vec<u32> =
                            r.hits.iter().map(|h| h.load(Ordering::SeqCst)).collect();
                        assert!(
                            rc == 0 && hits == [1, 1, 1, 1],
                            "session {s}, launch {i}: rc {rc}, task counts {hits:?}"
                        );
                    }
                    drop(pool);
                    for (i, r) in records.iter().enumerate() {
                        let hits: Vec<u32> =
                            r.hits.iter().map(|h| h.load(Ordering::SeqCst)).collect();
                        assert_eq!(hits, [1, 1, 1, 1], "session {s}, launch {i} ran late tasks");
                    }
                    let shared = records
                        .iter()
                        .filter(|r| r.on_worker.load(Ordering::Relaxed))
                        .count();
                    let forced = records.iter().filter(|r| r.wait_for_worker).count();
                    eprintln!("session {s}: workers took part in {shared} of {launches} launches");
                    // Every launch that waited for a worker must have had one.
                    let missed = records
                        .iter()
                        .filter(|r| r.wait_for_worker && !r.on_worker.load(Ordering::SeqCst))
                        .count();
                    assert!(
                        missed == 0 && shared >= forced,
                        "session {s}: {missed} of {forced} launches that waited for a worker had none"
                    );
                });
            }
        });
    }
}
