//! Mote's thread pool for `TVMBackendParallelLaunch`.
//!
//! Kernels hand a parallel loop body to the runtime with a task count; the calling thread runs
//! task 0 and pool workers run the others, all concurrently, so `TVMBackendParallelBarrier`
//! works. Workers spin briefly before sleeping, because inference issues launches back to back
//! and a sleeping worker costs tens of microseconds to wake.
//!
//! Each VM session owns its pool; the pool of the session currently running a kernel on this
//! thread is found through a thread-local. Launches from pool workers (nested parallelism) and
//! from threads without a session run serially.

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use crate::host::abi::{ParallelGroupEnv, ParallelLambda};

const SPIN: Duration = Duration::from_micros(200);

#[derive(Clone, Copy)]
struct Job {
    f: ParallelLambda,
    cdata: usize,
    env: usize,
    num_task: usize,
}

struct Shared {
    /// Incremented for every launch; workers wait for it to change.
    generation: AtomicU64,
    job: Mutex<Option<Job>>,
    next_task: AtomicUsize,
    pending: AtomicUsize,
    failed: AtomicBool,
    /// The first error a worker's task raised, re-raised on the launching thread.
    error: Mutex<Option<(String, String)>>,
    shutdown: AtomicBool,
    sleep_lock: Mutex<()>,
    wake: Condvar,
}

/// Barrier state for one launch, reached through `ParallelGroupEnv::sync_handle`.
struct Barrier {
    arrived: AtomicUsize,
    generation: AtomicU64,
    total: usize,
    /// How many tasks run at once; a barrier over more tasks than that would deadlock.
    capacity: usize,
}

/// A fixed set of worker threads.
pub struct ThreadPool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    threads: usize,
}

thread_local! {
    static CURRENT: Cell<*const ThreadPool> = const { Cell::new(std::ptr::null()) };
    static IN_WORKER: Cell<bool> = const { Cell::new(false) };
}

impl ThreadPool {
    /// A pool running `threads` tasks at once (the caller counts as one).
    pub fn new(threads: usize) -> ThreadPool {
        let threads = threads.max(1);
        let shared = Arc::new(Shared {
            generation: AtomicU64::new(0),
            job: Mutex::new(None),
            next_task: AtomicUsize::new(0),
            pending: AtomicUsize::new(0),
            failed: AtomicBool::new(false),
            error: Mutex::new(None),
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
            shared,
            workers,
            threads,
        }
    }

    pub fn threads(&self) -> usize {
        self.threads
    }

    /// Run `f` with this pool installed as the current thread's pool.
    pub fn install<R>(&self, f: impl FnOnce() -> R) -> R {
        struct Restore(*const ThreadPool);
        impl Drop for Restore {
            fn drop(&mut self) {
                CURRENT.with(|c| c.set(self.0));
            }
        }
        let prev = CURRENT.with(|c| c.replace(self as *const _));
        let _restore = Restore(prev);
        f()
    }

    fn launch(&self, f: ParallelLambda, cdata: *mut c_void, num_task: usize) -> i32 {
        let barrier = Barrier {
            arrived: AtomicUsize::new(0),
            generation: AtomicU64::new(0),
            total: num_task,
            capacity: self.threads,
        };
        let mut env = ParallelGroupEnv {
            sync_handle: &barrier as *const Barrier as *mut c_void,
            num_task: num_task as i32,
        };
        let job = Job {
            f,
            cdata: cdata as usize,
            env: &mut env as *mut ParallelGroupEnv as usize,
            num_task,
        };
        let s = &self.shared;
        if let Ok(mut j) = s.job.lock() {
            *j = Some(job);
        } else {
            return run_serial(f, cdata, num_task);
        }
        s.failed.store(false, Ordering::Relaxed);
        s.next_task.store(0, Ordering::Relaxed);
        s.pending.store(num_task, Ordering::Relaxed);
        s.generation.fetch_add(1, Ordering::Release);
        {
            let _g = s.sleep_lock.lock();
            s.wake.notify_all();
        }
        run_tasks(s, &job);
        // Wait for the workers' tasks; they are short, so spin then yield.
        let start = Instant::now();
        while s.pending.load(Ordering::Acquire) != 0 {
            if start.elapsed() < SPIN {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
        if let Ok(mut j) = s.job.lock() {
            *j = None;
        }
        if s.failed.load(Ordering::Acquire) {
            if let Some((kind, msg)) = s.error.lock().ok().and_then(|mut e| e.take()) {
                crate::host::error_slot::set_error(&kind, &msg);
            }
            -1
        } else {
            0
        }
    }
}

impl Drop for ThreadPool {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::Release);
        self.shared.generation.fetch_add(1, Ordering::Release);
        {
            let _g = self.shared.sleep_lock.lock();
            self.shared.wake.notify_all();
        }
        for w in self.workers.drain(..) {
            let _ = w.join();
        }
    }
}

fn run_tasks(s: &Shared, job: &Job) {
    loop {
        let task = s.next_task.fetch_add(1, Ordering::AcqRel);
        if task >= job.num_task {
            return;
        }
        // SAFETY: `f`, `cdata` and `env` come from a kernel's ParallelLaunch call, which blocks
        // until `pending` reaches zero, so they outlive this call.
        let rc = unsafe {
            (job.f)(
                task as i32,
                job.env as *mut ParallelGroupEnv,
                job.cdata as *mut c_void,
            )
        };
        if rc != 0 {
            if let Some(e) = crate::host::error_slot::take_error() {
                if let Ok(mut slot) = s.error.lock() {
                    slot.get_or_insert(e);
                }
            }
            s.failed.store(true, Ordering::Release);
        }
        s.pending.fetch_sub(1, Ordering::AcqRel);
    }
}

fn worker(s: Arc<Shared>) {
    IN_WORKER.with(|w| w.set(true));
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
        let job = s.job.lock().ok().and_then(|j| *j);
        if let Some(job) = job {
            run_tasks(&s, &job);
        }
    }
}

fn run_serial(f: ParallelLambda, cdata: *mut c_void, num_task: usize) -> i32 {
    let barrier = Barrier {
        arrived: AtomicUsize::new(0),
        generation: AtomicU64::new(0),
        total: num_task,
        capacity: 1,
    };
    let mut env = ParallelGroupEnv {
        sync_handle: &barrier as *const Barrier as *mut c_void,
        num_task: num_task as i32,
    };
    for task in 0..num_task {
        // SAFETY: arguments come straight from the kernel's launch call and outlive it.
        if unsafe { f(task as i32, &mut env, cdata) } != 0 {
            return -1;
        }
    }
    0
}

/// How many tasks a parallel loop started on this thread runs at once: the installed session
/// pool's size, or 1 (no pool, or already inside a pool task).
pub(crate) fn current_parallelism() -> usize {
    if IN_WORKER.with(|w| w.get()) {
        return 1;
    }
    let pool = CURRENT.with(|c| c.get());
    if pool.is_null() {
        1
    } else {
        // SAFETY: CURRENT is only set by `install`, which keeps the pool alive meanwhile.
        unsafe { &*pool }.threads()
    }
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

unsafe extern "C" fn chunk_task(task: i32, _env: *mut ParallelGroupEnv, cdata: *mut c_void) -> i32 {
    // SAFETY: `cdata` is the `Chunks` that `parallel_chunks` keeps alive until every task has
    // returned; it is only read (the error slot is a mutex).
    let chunks = unsafe { &*(cdata as *const Chunks<'_>) };
    let range = chunks.range(task.max(0) as usize);
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| (chunks.f)(range))) {
        Ok(Ok(())) => {}
        Ok(Err(e)) => chunks.fail(e),
        Err(_) => chunks.fail(crate::error::Error::Backend {
            backend: "cpu".into(),
            message: "a parallel task panicked".into(),
        }),
    }
    0
}

/// Run `f` over `0..n`, split into contiguous chunks, one per thread of the session pool
/// installed on this thread (serially, as one chunk, without a pool). Returns the first error.
pub(crate) fn parallel_chunks(n: usize, f: &ChunkFn<'_>) -> crate::error::Result<()> {
    let tasks = current_parallelism().min(n);
    let pool = CURRENT.with(|c| c.get());
    if tasks <= 1 || pool.is_null() {
        return f(0..n);
    }
    let chunks = Chunks {
        f,
        n,
        tasks,
        error: Mutex::new(None),
    };
    // The calling thread runs task 0: a parallel loop inside it must not launch on this pool
    // again, so it counts as a worker until the launch returns.
    struct Leave(bool);
    impl Drop for Leave {
        fn drop(&mut self) {
            IN_WORKER.with(|w| w.set(self.0));
        }
    }
    let _leave = Leave(IN_WORKER.with(|w| w.replace(true)));
    // SAFETY: CURRENT is only set by `install`, which keeps the pool alive meanwhile; `chunks`
    // outlives the launch, which returns only after every task finished.
    let rc = unsafe { &*pool }.launch(
        chunk_task,
        &chunks as *const Chunks<'_> as *mut c_void,
        tasks,
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

/// `TVMBackendParallelLaunch`.
pub(crate) unsafe extern "C" fn parallel_launch(
    f: ParallelLambda,
    cdata: *mut c_void,
    num_task: i32,
) -> i32 {
    let pool = CURRENT.with(|c| c.get());
    let nested = IN_WORKER.with(|w| w.get());
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        if pool.is_null() || nested {
            // No pool here: one task does all the work (the lambda splits by num_task).
            return run_serial(f, cdata, num_task.max(1) as usize);
        }
        // SAFETY: CURRENT is only set by `install`, which keeps the pool alive meanwhile.
        let pool = unsafe { &*pool };
        let n = if num_task > 0 {
            num_task as usize
        } else {
            pool.threads()
        };
        if n == 1 || pool.threads() == 1 {
            run_serial(f, cdata, n)
        } else {
            // Tasks beyond the pool size would deadlock at a barrier; kernels ask for at most
            // the pool size when num_task is 0, which is what TVM's codegen emits.
            pool.launch(f, cdata, n)
        }
    }));
    result.unwrap_or(-1)
}

/// `TVMBackendParallelBarrier`: a generation-counting spin barrier over the launch's tasks.
pub(crate) unsafe extern "C" fn parallel_barrier(
    _task_id: i32,
    penv: *mut ParallelGroupEnv,
) -> i32 {
    if penv.is_null() {
        return -1;
    }
    // SAFETY: `penv` is the env Mote passed to this task's lambda; its sync_handle points to the
    // launch's Barrier, alive until every task has returned.
    let b = unsafe { &*((*penv).sync_handle as *const Barrier) };
    if b.total <= 1 {
        return 0;
    }
    if b.total > b.capacity {
        crate::host::error_slot::set_error(
            "RuntimeError",
            &format!(
                "parallel barrier over {} tasks, but only {} run at once; raise the session's thread count",
                b.total, b.capacity
            ),
        );
        return -1;
    }
    // The generation cannot advance before this task arrives, so reading it first is safe.
    let gen = b.generation.load(Ordering::Acquire);
    if b.arrived.fetch_add(1, Ordering::AcqRel) + 1 == b.total {
        b.arrived.store(0, Ordering::Relaxed);
        b.generation.fetch_add(1, Ordering::Release);
    } else {
        let start = Instant::now();
        while b.generation.load(Ordering::Acquire) == gen {
            if start.elapsed() < SPIN {
                std::hint::spin_loop();
            } else {
                std::thread::yield_now();
            }
        }
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::AtomicU32;

    unsafe extern "C" fn body(task: i32, penv: *mut ParallelGroupEnv, cdata: *mut c_void) -> i32 {
        let hits = unsafe { &*(cdata as *const [AtomicU32; 8]) };
        hits[task as usize].fetch_add(1, Ordering::SeqCst);
        // Everyone must have counted before anyone passes the barrier.
        unsafe { parallel_barrier(task, penv) };
        let n = unsafe { (*penv).num_task } as usize;
        let all: u32 = hits[..n].iter().map(|h| h.load(Ordering::SeqCst)).sum();
        if all as usize == n {
            0
        } else {
            -1
        }
    }

    #[test]
    fn every_task_runs_once_and_the_barrier_holds() {
        let pool = ThreadPool::new(3);
        for _ in 0..200 {
            let hits: [AtomicU32; 8] = Default::default();
            let rc = pool
                .install(|| unsafe { parallel_launch(body, &hits as *const _ as *mut c_void, 0) });
            assert_eq!(rc, 0);
            let counts: Vec<u32> = hits.iter().map(|h| h.load(Ordering::SeqCst)).collect();
            assert_eq!(&counts[..3], &[1, 1, 1]);
        }
        // Without an installed pool the launch runs serially with a single task.
        let hits: [AtomicU32; 8] = Default::default();
        assert_eq!(
            unsafe { parallel_launch(body, &hits as *const _ as *mut c_void, 0) },
            0
        );
        assert_eq!(hits[0].load(Ordering::SeqCst), 1);
    }
}
