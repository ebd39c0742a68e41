//! Sessions: one `mote::Session` behind a mutex that is only ever `try_lock`ed, so a second
//! caller (another thread, or a callback re-entering its own session) gets `Busy` instead of
//! waiting or racing.

use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};

use mote::{InterruptHandle, SessionOptions, Value};

use crate::callback::NativeArg;
use crate::error::NativeError;
use crate::tensor::NativeTensor;
use crate::NativeModel;

/// Options of a new session.
#[derive(uniffi::Record)]
pub struct SessionConfig {
    /// Threads for parallel kernels; 0: Mote's default (CPU count, or `MOTE_NUM_THREADS`).
    pub threads: u32,
    /// Backends for offloaded subgraphs, in order of preference; empty: all available.
    pub backends: Vec<String>,
    /// Fill every intermediate buffer with NaN / 0xA5 before use (tests).
    pub poison_memory: bool,
    /// Time every callee (read with `take_profile`).
    pub profiling: bool,
    /// `SessionOptions::memory_budget_bytes`; `None`: Mote's default (half the physical
    /// memory). Budgets are docs/untrusted-models.md §3; 0 is refused.
    pub memory_budget_bytes: Option<u64>,
    /// `SessionOptions::max_registers`; `None`: Mote's default (2^20). 0 is refused.
    pub max_registers: Option<u64>,
    /// `SessionOptions::stack_budget_bytes`; `None`: Mote's default (256 KiB). 0 is refused.
    pub stack_budget_bytes: Option<u64>,
    /// `SessionOptions::max_instructions`; `None`: Mote's default (2^28). 0 is refused.
    pub max_instructions: Option<u64>,
    /// `SessionOptions::opencl_device`: the OpenCL device a model compiled for OpenCL runs on
    /// (an index into the devices OpenCL lists); `None`: the first GPU, else the first device.
    /// An index past the list is `InvalidArgument` when the session is made.
    pub opencl_device: Option<u32>,
    /// `SessionOptions::opencl_profiling`: time each OpenCL kernel launch.
    pub opencl_profiling: bool,
    /// `SessionOptions::opencl_program_cache`: a directory of the app's own for compiled
    /// OpenCL programs; `None`: no cache. An empty path is refused.
    pub opencl_program_cache: Option<String>,
}

/// Where a session runs, as DLPack codes: `device_type` 1 (CPU, `device_id` 0) or 4 (OpenCL,
/// `device_id` the device's index).
#[derive(uniffi::Record, Debug, PartialEq, Eq)]
pub struct SessionDevice {
    pub device_type: i32,
    pub device_id: i32,
}

/// A budget of `config`: `None` keeps Mote's default; 0 (a call could do nothing) is refused,
/// never replaced by a default.
fn budget(name: &str, value: Option<u64>) -> Result<Option<u64>, NativeError> {
    match value {
        Some(0) => Err(NativeError::invalid(format!(
            "SessionOptions.{name} is 0 (must be at least 1; nil keeps Mote's default)"
        ))),
        v => Ok(v),
    }
}

/// A byte or register budget, which must also fit this platform's `usize`.
fn size_budget(name: &str, value: Option<u64>, default: usize) -> Result<usize, NativeError> {
    match budget(name, value)? {
        None => Ok(default),
        Some(v) => usize::try_from(v).map_err(|_| {
            NativeError::invalid(format!(
                "SessionOptions.{name} = {v} does not fit this platform's address space"
            ))
        }),
    }
}

/// Mote's options for `config`, every value checked.
fn session_options(config: SessionConfig) -> Result<SessionOptions, NativeError> {
    let d = SessionOptions::default();
    let opencl_program_cache = match config.opencl_program_cache {
        Some(dir) if dir.is_empty() => {
            return Err(NativeError::invalid(
                "SessionOptions.openclProgramCache is empty (nil: no cache)",
            ))
        }
        dir => dir.map(std::path::PathBuf::from),
    };
    Ok(SessionOptions {
        threads: (config.threads > 0).then_some(config.threads as usize),
        backends: config.backends,
        poison_memory: config.poison_memory,
        memory_budget_bytes: size_budget(
            "memoryBudgetBytes",
            config.memory_budget_bytes,
            d.memory_budget_bytes,
        )?,
        max_registers: size_budget("maxRegisters", config.max_registers, d.max_registers)?,
        stack_budget_bytes: size_budget(
            "stackBudgetBytes",
            config.stack_budget_bytes,
            d.stack_budget_bytes,
        )?,
        max_instructions: budget("maxInstructions", config.max_instructions)?
            .unwrap_or(d.max_instructions),
        opencl_device: config.opencl_device.map(|i| i as usize),
        opencl_profiling: config.opencl_profiling,
        opencl_program_cache,
        ..d
    })
}

/// Accumulated time of one callee of a profiled session.
#[derive(uniffi::Record)]
pub struct ProfileRecord {
    /// Kernel, builtin or function name.
    pub name: String,
    /// `kernel`, `builtin`, `function` or `registered`.
    pub kind: String,
    /// Calls counted.
    pub calls: u64,
    /// Total time in nanoseconds.
    pub total_nanos: u64,
}

/// A session of a model: runs it on one caller at a time.
#[derive(uniffi::Object)]
pub struct NativeSession {
    inner: Mutex<mote::Session>,
    /// The session's interrupt handle, kept outside the mutex: it is used while a call holds
    /// the session.
    interrupt: InterruptHandle,
}

/// Stops a session's running call from any thread (`mote::InterruptHandle`,
/// docs/untrusted-models.md §4): the call returns `Cancelled` (code 19) at its next VM call or
/// backward jump; with no call running, the session's next call is cancelled as it starts.
#[derive(uniffi::Object)]
pub struct NativeInterruptHandle {
    inner: InterruptHandle,
}

#[uniffi::export]
impl NativeInterruptHandle {
    /// Cancel the running call, or the next one if none is running.
    pub fn interrupt(&self) {
        self.inner.interrupt();
    }

    /// Whether an interrupt waits for a call to consume it.
    pub fn is_pending(&self) -> bool {
        self.inner.is_pending()
    }
}

/// Cancels one call (`run_cancellable`) on behalf of its caller, e.g. a Swift `Task`. It
/// interrupts the session only while that call runs ("armed"); once the call returns it is
/// disarmed, and an interrupt it sent that no instruction consumed is cleared, under the same
/// lock, so a late cancellation never cancels the session's next call
/// (docs/untrusted-models.md §4). A token cancelled before its call starts makes the call
/// return `Cancelled` without running.
#[derive(uniffi::Object, Default)]
pub struct NativeCancelToken {
    state: Mutex<CancelState>,
}

#[derive(Default)]
struct CancelState {
    cancelled: bool,
    /// The session's handle while the call runs.
    armed: Option<InterruptHandle>,
    /// Whether `cancel` interrupted the armed call.
    fired: bool,
}

impl NativeCancelToken {
    fn state(&self) -> MutexGuard<'_, CancelState> {
        // Nothing in the state can be left inconsistent by a panic: plain fields.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Arm for the call about to run on the session of `handle` (whose lock the caller holds):
    /// `Cancelled` if the token was cancelled already. The guard disarms when dropped.
    fn arm<'a>(&'a self, handle: &InterruptHandle) -> Result<Armed<'a>, NativeError> {
        let mut s = self.state();
        if s.cancelled {
            return Err(mote::Error::Cancelled.into());
        }
        s.armed = Some(handle.clone());
        s.fired = false;
        Ok(Armed(self))
    }
}

/// Disarms its token when dropped (the call returned, or panicked).
struct Armed<'a>(&'a NativeCancelToken);

impl Drop for Armed<'_> {
    fn drop(&mut self) {
        let mut s = self.0.state();
        if let Some(h) = s.armed.take() {
            // Only an interrupt this token sent is dropped: one from an explicit handle that
            // arrived meanwhile still cancels the next call, as documented for it.
            if std::mem::take(&mut s.fired) {
                h.clear();
            }
        }
    }
}

#[uniffi::export]
impl NativeCancelToken {
    /// A token not cancelled.
    #[uniffi::constructor]
    pub fn new() -> Arc<Self> {
        Arc::new(NativeCancelToken::default())
    }

    /// Cancel: interrupts the call if it is running, makes it return `Cancelled` without
    /// running if it has not started, and does nothing to the session once it has returned.
    pub fn cancel(&self) {
        let mut s = self.state();
        s.cancelled = true;
        if let Some(h) = &s.armed {
            h.interrupt();
            s.fired = true;
        }
    }

    /// Whether `cancel` was called.
    pub fn is_cancelled(&self) -> bool {
        self.state().cancelled
    }
}

impl NativeSession {
    fn lock(&self) -> Result<MutexGuard<'_, mote::Session>, NativeError> {
        match self.inner.try_lock() {
            Ok(g) => Ok(g),
            // A panic inside a call cannot leave the session half-updated in a way a later
            // call trusts: each call starts from its arguments.
            Err(TryLockError::Poisoned(p)) => Ok(p.into_inner()),
            Err(TryLockError::WouldBlock) => Err(NativeError::busy(
                "session in use by another call (another thread, or a callback of its own \
                 call): use one session per thread",
            )),
        }
    }
}

fn shared(inputs: &[Arc<NativeTensor>]) -> Result<Vec<mote::Tensor>, NativeError> {
    inputs.iter().map(|t| t.share()).collect()
}

fn wrap_all(v: Vec<mote::Tensor>) -> Vec<Arc<NativeTensor>> {
    v.into_iter().map(NativeTensor::wrap).collect()
}

#[uniffi::export]
impl NativeSession {
    /// A session of `model`.
    #[uniffi::constructor]
    pub fn new(model: Arc<NativeModel>, config: SessionConfig) -> Result<Arc<Self>, NativeError> {
        let profiling = config.profiling;
        let mut s = model.inner.session_with(session_options(config)?)?;
        s.set_profiling(profiling);
        Ok(Arc::new(NativeSession {
            interrupt: s.interrupt_handle(),
            inner: Mutex::new(s),
        }))
    }

    /// The session's interrupt handle (every call to this returns the same handle).
    pub fn interrupt_handle(&self) -> Arc<NativeInterruptHandle> {
        Arc::new(NativeInterruptHandle {
            inner: self.interrupt.clone(),
        })
    }

    /// The device the session runs its model's kernels on (`mote::Session::device`).
    pub fn device(&self) -> Result<SessionDevice, NativeError> {
        match self.lock()?.device() {
            mote::Device::Cpu => Ok(SessionDevice {
                device_type: 1,
                device_id: 0,
            }),
            mote::Device::OpenCl { index } => Ok(SessionDevice {
                device_type: 4,
                device_id: index as i32,
            }),
            other => Err(NativeError::invalid(format!(
                "no DLPack code for device {other}"
            ))),
        }
    }

    /// Threads parallel kernels may use.
    pub fn threads(&self) -> Result<u32, NativeError> {
        Ok(self.lock()?.threads() as u32)
    }

    /// Call the Relax function `function` on tensors; its outputs (tuples flattened).
    pub fn run(
        &self,
        function: String,
        inputs: Vec<Arc<NativeTensor>>,
    ) -> Result<Vec<Arc<NativeTensor>>, NativeError> {
        let inputs = shared(&inputs)?;
        let out = self.lock()?.run(&function, &inputs)?;
        Ok(wrap_all(out))
    }

    /// `run`, cancelled by `token` (see `NativeCancelToken`): `Cancelled` (code 19) when the
    /// token was cancelled before the call started or stopped it while it ran. The token is
    /// armed only once this call holds the session, so cancelling it never interrupts another
    /// caller's call (a busy session fails first).
    pub fn run_cancellable(
        &self,
        function: String,
        inputs: Vec<Arc<NativeTensor>>,
        token: Arc<NativeCancelToken>,
    ) -> Result<Vec<Arc<NativeTensor>>, NativeError> {
        let inputs = shared(&inputs)?;
        let mut session = self.lock()?;
        // Declared after `session`, so dropped (disarmed, cleared) before the session is
        // unlocked: no later call can start while this token could still interrupt.
        let _armed = token.arm(&self.interrupt)?;
        let out = session.run(&function, &inputs)?;
        Ok(wrap_all(out))
    }

    /// Call a kernel of a kernel-only library; it writes into the tensors passed. Each tensor
    /// is taken out of its handle for the call (so the kernel holds it alone); one passed twice
    /// is passed as a copy at its later positions.
    pub fn call_kernel(&self, kernel: String, args: Vec<NativeArg>) -> Result<(), NativeError> {
        with_taken(&args, |values| {
            self.lock()?.call_kernel(&kernel, values)?;
            Ok(())
        })
    }

    /// Stateful API: keep `inputs` for a later `invoke_stateful(function)`.
    pub fn set_input(
        &self,
        function: String,
        inputs: Vec<Arc<NativeTensor>>,
    ) -> Result<(), NativeError> {
        let values = shared(&inputs)?.into_iter().map(Value::Tensor).collect();
        Ok(self.lock()?.set_input(&function, values)?)
    }

    /// Stateful API: run `function` on the inputs set before.
    pub fn invoke_stateful(&self, function: String) -> Result<(), NativeError> {
        Ok(self.lock()?.invoke_stateful(&function)?)
    }

    /// Stateful API: the outputs of the last `invoke_stateful(function)` (tuples flattened).
    pub fn get_output(&self, function: String) -> Result<Vec<Arc<NativeTensor>>, NativeError> {
        let v = self.lock()?.get_output(&function)?;
        Ok(wrap_all(v.flatten_tensors()))
    }

    /// Turn profiling on or off.
    pub fn set_profiling(&self, on: bool) -> Result<(), NativeError> {
        self.lock()?.set_profiling(on);
        Ok(())
    }

    /// The time per callee since profiling started or the last `take_profile`, then reset.
    pub fn take_profile(&self) -> Result<Vec<ProfileRecord>, NativeError> {
        Ok(self
            .lock()?
            .take_profile()
            .into_iter()
            .map(|e| ProfileRecord {
                name: e.name,
                kind: format!("{:?}", e.kind).to_lowercase(),
                calls: e.calls,
                total_nanos: u64::try_from(e.total.as_nanos()).unwrap_or(u64::MAX),
            })
            .collect())
    }
}

/// Runs `body` on the values of `args`, each tensor taken out of its handle for the duration
/// (one passed twice is passed as a copy at its later positions), and puts every taken tensor
/// back afterwards, also when `body` panics (the panic then goes on to uniffi's boundary, which
/// turns it into an error): a tensor must never stay taken, and so busy, after its call.
fn with_taken<R>(
    args: &[NativeArg],
    body: impl FnOnce(&mut Vec<Value>) -> Result<R, NativeError>,
) -> Result<R, NativeError> {
    let mut values = Vec::with_capacity(args.len());
    let mut taken: Vec<(usize, Arc<NativeTensor>)> = Vec::new();
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        for a in args {
            let v = match a {
                NativeArg::Tensor { tensor } => {
                    let earlier = taken.iter().find(|(_, t)| Arc::ptr_eq(t, tensor));
                    if let Some(Value::Tensor(t)) = earlier.and_then(|(i, _)| values.get(*i)) {
                        Value::Tensor(t.deep_copy()?)
                    } else {
                        let t = tensor.take()?;
                        taken.push((values.len(), tensor.clone()));
                        Value::Tensor(t)
                    }
                }
                other => other.to_value()?,
            };
            values.push(v);
        }
        body(&mut values)
    }));
    for (i, handle) in taken {
        if let Some(Value::Tensor(t)) = values.get_mut(i).map(std::mem::take) {
            handle.restore(t);
        }
    }
    match result {
        Ok(r) => r,
        Err(panic) => std::panic::resume_unwind(panic),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{LoadConfig, NativeModel};
    use mote::ErrorCode;
    use std::time::{Duration, Instant};

    fn code(r: Result<Vec<Arc<NativeTensor>>, NativeError>) -> u32 {
        match r {
            Ok(_) => 0,
            Err(NativeError::Mote { code, .. }) => code,
        }
    }

    /// A call that panics with tensors taken gives them all back (they are not busy after),
    /// and the panic goes on; a tensor passed twice is taken once.
    #[test]
    fn tensors_taken_by_a_panicking_call_are_given_back() {
        let a = NativeTensor::zeros(vec![4], "float32".into()).unwrap();
        let b = NativeTensor::zeros(vec![2], "int32".into()).unwrap();
        let args = vec![
            NativeArg::Tensor { tensor: a.clone() },
            NativeArg::Int { value: 3 },
            NativeArg::Tensor { tensor: b.clone() },
            NativeArg::Tensor { tensor: a.clone() },
        ];
        let r = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            with_taken(&args, |values| -> Result<(), NativeError> {
                assert_eq!(values.len(), 4);
                // Taken: reading either handle is busy while the call runs.
                assert!(a.clone().begin_read().is_err() && b.clone().begin_read().is_err());
                panic!("a bug in the middle of a kernel call");
            })
        }));
        assert!(r.is_err(), "the panic goes on");
        a.clone().begin_write().unwrap().end();
        b.clone().begin_write().unwrap().end();
        // And after a call that returns an error.
        let e = with_taken(&args, |_| -> Result<(), NativeError> {
            Err(NativeError::invalid("refused"))
        });
        assert!(e.is_err());
        a.clone().begin_write().unwrap().end();
        b.clone().begin_write().unwrap().end();
    }

    fn config() -> SessionConfig {
        SessionConfig {
            threads: 1,
            backends: vec![],
            poison_memory: false,
            profiling: false,
            memory_budget_bytes: None,
            max_registers: None,
            stack_budget_bytes: None,
            max_instructions: None,
            opencl_device: None,
            opencl_profiling: false,
            opencl_program_cache: None,
        }
    }

    /// `craft::endless_loop()` loaded code-free from a file, as Swift loads it.
    fn endless_loop() -> Arc<NativeModel> {
        let path = std::env::temp_dir().join(format!(
            "mote-swift-endless-{}-{:?}.tar",
            std::process::id(),
            std::thread::current().id()
        ));
        let path = path.display().to_string();
        crate::write_endless_loop_for_test(path.clone()).unwrap();
        let m = NativeModel::load_with(
            path.clone(),
            LoadConfig {
                code_free: true,
                read_into_memory: true,
                memory_budget_bytes: None,
            },
        )
        .unwrap();
        std::fs::remove_file(&path).unwrap();
        m
    }

    fn session(max_instructions: u64) -> Arc<NativeSession> {
        NativeSession::new(
            endless_loop(),
            SessionConfig {
                max_instructions: Some(max_instructions),
                ..config()
            },
        )
        .unwrap()
    }

    const EXHAUSTED: u32 = ErrorCode::ResourceExhausted as u32;
    const CANCELLED: u32 = ErrorCode::Cancelled as u32;
    const INVALID: u32 = ErrorCode::InvalidArgument as u32;

    #[test]
    fn the_instruction_budget_ends_an_endless_loop() {
        let s = session(10_000);
        match s.run("main".into(), vec![]) {
            Err(NativeError::Mote { code, message }) => {
                assert_eq!(code, EXHAUSTED, "{message}");
                assert!(message.contains("max_instructions"), "{message}");
                assert!(
                    message.contains("budget of 10000 instructions"),
                    "{message}"
                );
            }
            Ok(_) => panic!("an endless loop returned"),
        }
        assert_eq!(code(s.run("main".into(), vec![])), EXHAUSTED, "again");
    }

    #[test]
    fn opencl_options_reach_mote_and_an_empty_cache_path_is_refused() {
        let o = session_options(SessionConfig {
            opencl_device: Some(2),
            opencl_profiling: true,
            opencl_program_cache: Some("/tmp/cl".into()),
            ..config()
        })
        .unwrap();
        assert_eq!(o.opencl_device, Some(2));
        assert!(o.opencl_profiling);
        assert_eq!(
            o.opencl_program_cache.as_deref(),
            Some(std::path::Path::new("/tmp/cl"))
        );
        let d = session_options(config()).unwrap();
        assert_eq!((d.opencl_device, d.opencl_profiling), (None, false));
        assert_eq!(d.opencl_program_cache, None);
        let e = session_options(SessionConfig {
            opencl_program_cache: Some(String::new()),
            ..config()
        });
        assert!(matches!(e, Err(NativeError::Mote { code: INVALID, .. })));
        // A CPU model's session says it runs on the CPU, whatever the OpenCL device option.
        let s = NativeSession::new(
            endless_loop(),
            SessionConfig {
                opencl_device: Some(99),
                ..config()
            },
        )
        .unwrap();
        assert_eq!(
            s.device().unwrap(),
            SessionDevice {
                device_type: 1,
                device_id: 0
            }
        );
    }

    #[test]
    fn zero_budgets_are_refused_not_defaulted() {
        let m = endless_loop();
        for (name, c) in [
            (
                "memoryBudgetBytes",
                SessionConfig {
                    memory_budget_bytes: Some(0),
                    ..config()
                },
            ),
            (
                "maxRegisters",
                SessionConfig {
                    max_registers: Some(0),
                    ..config()
                },
            ),
            (
                "stackBudgetBytes",
                SessionConfig {
                    stack_budget_bytes: Some(0),
                    ..config()
                },
            ),
            (
                "maxInstructions",
                SessionConfig {
                    max_instructions: Some(0),
                    ..config()
                },
            ),
        ] {
            match NativeSession::new(m.clone(), c) {
                Err(NativeError::Mote { code, message }) => {
                    assert_eq!(code, INVALID, "{name}: {message}");
                    assert!(message.contains(name), "{name}: {message}");
                }
                Ok(_) => panic!("{name} = 0 accepted"),
            }
        }
    }

    #[test]
    fn cancelling_the_token_stops_the_running_call_and_the_session_goes_on() {
        // 2^26 instructions take seconds in a debug build: the cancellation comes first.
        let s = session(1 << 26);
        let token = NativeCancelToken::new();
        let t = token.clone();
        let canceller = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(50));
            t.cancel();
        });
        let start = Instant::now();
        assert_eq!(
            code(s.run_cancellable("main".into(), vec![], token)),
            CANCELLED
        );
        let cancelled_after = start.elapsed();
        canceller.join().unwrap();
        assert!(!s.interrupt.is_pending());
        // The same session runs again, to its budget: not cancelled.
        let start = Instant::now();
        assert_eq!(
            code(s.run_cancellable("main".into(), vec![], NativeCancelToken::new())),
            EXHAUSTED
        );
        let full = start.elapsed();
        assert!(
            cancelled_after < full,
            "cancelled after {cancelled_after:?}, a full run takes {full:?}"
        );
    }

    #[test]
    fn a_token_cancelled_before_the_call_never_runs_it() {
        // With this budget a call that ran would end ResourceExhausted.
        let s = session(1_000);
        let token = NativeCancelToken::new();
        token.cancel();
        assert!(token.is_cancelled());
        assert_eq!(
            code(s.run_cancellable("main".into(), vec![], token)),
            CANCELLED
        );
        assert!(!s.interrupt.is_pending(), "nothing left for the next call");
        assert_eq!(code(s.run("main".into(), vec![])), EXHAUSTED);
    }

    #[test]
    fn a_late_cancellation_never_cancels_the_next_call() {
        let s = session(1_000);
        // The window a late cancel can hit: armed, the interrupt sent, the call returning
        // before an instruction consumed it.
        let token = NativeCancelToken::new();
        let armed = token.arm(&s.interrupt).unwrap();
        token.cancel();
        assert!(s.interrupt.is_pending());
        drop(armed);
        assert!(
            !s.interrupt.is_pending(),
            "disarming clears the interrupt it sent"
        );
        assert_eq!(code(s.run("main".into(), vec![])), EXHAUSTED);
        // After the call returned, cancelling does nothing to the session.
        let token = NativeCancelToken::new();
        assert_eq!(
            code(s.run_cancellable("main".into(), vec![], token.clone())),
            EXHAUSTED
        );
        token.cancel();
        assert!(!s.interrupt.is_pending());
        assert_eq!(code(s.run("main".into(), vec![])), EXHAUSTED);
    }

    #[test]
    fn an_explicit_interrupt_is_not_dropped_by_a_token_that_did_not_send_it() {
        let s = session(1_000);
        let token = NativeCancelToken::new();
        let armed = token.arm(&s.interrupt).unwrap();
        s.interrupt_handle().interrupt();
        drop(armed);
        assert!(s.interrupt_handle().is_pending());
        assert_eq!(code(s.run("main".into(), vec![])), CANCELLED);
        assert_eq!(
            code(s.run("main".into(), vec![])),
            EXHAUSTED,
            "one call cancelled"
        );
    }

    #[test]
    fn cancelling_a_busy_call_never_interrupts_the_call_holding_the_session() {
        let s = session(u64::MAX);
        let runner = {
            let s = s.clone();
            std::thread::spawn(move || {
                code(s.run_cancellable("main".into(), vec![], NativeCancelToken::new()))
            })
        };
        // Wait until the runner holds the session.
        let deadline = Instant::now() + Duration::from_secs(10);
        while s.inner.try_lock().is_ok() {
            assert!(Instant::now() < deadline, "the runner never started");
            std::thread::yield_now();
        }
        let token = NativeCancelToken::new();
        token.cancel();
        assert_eq!(
            code(s.run_cancellable("main".into(), vec![], token)),
            ErrorCode::Busy as u32
        );
        let busy = NativeCancelToken::new();
        let t = busy.clone();
        let c = std::thread::spawn(move || t.cancel());
        assert_eq!(
            code(s.run_cancellable("main".into(), vec![], busy)),
            ErrorCode::Busy as u32
        );
        c.join().unwrap();
        std::thread::sleep(Duration::from_millis(50));
        assert!(
            !runner.is_finished(),
            "a busy caller's cancellation stopped the other call"
        );
        s.interrupt_handle().interrupt();
        assert_eq!(runner.join().unwrap(), CANCELLED);
    }
}
