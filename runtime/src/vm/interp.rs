//! The interpreter: frames, registers, instructions, and dispatch to whatever a function-table
//! entry resolved to (docs/tvm-format.md §4).

use std::sync::Arc;
use std::time::Instant;

use super::builtins::Builtin;
use super::program::{Callee, Program};
use super::{CallState, Session};
use crate::error::{Error, Result};
use crate::loader::executable::{Arg, FuncInfo, Instr};
use crate::value::{Arg as CallArg, Function, Value};

/// Deepest nesting of Relax function calls, whatever the stack budget: a backstop should the
/// stack measurement ever read wrong (the stack budget stops real calls far earlier).
pub(super) const MAX_DEPTH: usize = 4096;

/// The stack pointer: stack use is the distance from the entry frame's. Read from the
/// register, not as the address of a local: AddressSanitizer moves locals whose address is
/// taken to a "fake stack" on the heap (to catch use after return), where such an address
/// says nothing about the thread's stack, and every call then looked a megabyte deep.
#[inline(always)]
fn stack_address() -> usize {
    #[cfg(any(target_arch = "x86_64", target_arch = "aarch64"))]
    {
        let sp: usize;
        // SAFETY: copies the stack pointer register into a general register; no memory is read
        // or written and no flag or other register changes.
        unsafe {
            #[cfg(target_arch = "x86_64")]
            std::arch::asm!("mov {}, rsp", out(reg) sp, options(nomem, nostack, preserves_flags));
            #[cfg(target_arch = "aarch64")]
            std::arch::asm!("mov {}, sp", out(reg) sp, options(nomem, nostack, preserves_flags));
        }
        sp
    }
    #[cfg(not(any(target_arch = "x86_64", target_arch = "aarch64")))]
    {
        let marker = 0u8;
        std::hint::black_box(&marker) as *const u8 as usize
    }
}

impl Session {
    /// Start a call from outside: reset the call's budgets, measure the stack from here, and
    /// consume an interrupt that arrived while no call was running.
    pub(crate) fn enter<R>(&mut self, f: impl FnOnce(&mut Session) -> Result<R>) -> Result<R> {
        self.call = CallState {
            instructions_left: self.budget.instructions,
            stack_base: stack_address(),
        };
        if self.interrupt.take() {
            return Err(Error::Cancelled);
        }
        f(self)
    }

    /// Stack bytes the call in progress uses, from its entry to here.
    #[inline]
    pub(crate) fn stack_used(&self) -> usize {
        self.call.stack_base.saturating_sub(stack_address())
    }

    pub(crate) fn invoke_vm(&mut self, m: &Program, fidx: usize, args: &[Value]) -> Result<Value> {
        self.check_arity(fidx, args.len())?;
        if let Some(native) = m.compiled_function(fidx) {
            return self.invoke_compiled(m, fidx, native, args);
        }
        let f = &m.exe().funcs[fidx];
        if self.stack_used() > self.budget.stack_bytes || self.depth >= MAX_DEPTH {
            return Err(self.stack_exhausted(f));
        }
        let base = self.regs.len();
        let rfs = f.register_file_size;
        if base.saturating_add(rfs) > self.budget.max_registers {
            return Err(self.registers_exhausted(f, base));
        }
        self.charge_instructions(f, f.start)?;
        self.regs.resize(base + rfs, Value::None);
        self.regs[base..base + args.len()].clone_from_slice(args);
        self.depth += 1;
        let r = self.run_frame(m, fidx, base);
        self.depth -= 1;
        self.regs.truncate(base);
        r
    }

    // The budget errors are built out of line: the checks on the hot path stay a compare and a
    // branch each (issue 27's limit: budgets may not cost a model more than 1%).

    #[cold]
    #[inline(never)]
    pub(super) fn stack_exhausted(&self, f: &FuncInfo) -> Error {
        Error::ResourceExhausted {
            budget: "SessionOptions::stack_budget_bytes",
            message: format!(
                "calling `{}` at depth {} would pass the stack budget of {} bytes ({} used so \
                 far)",
                f.name,
                self.depth,
                self.budget.stack_bytes,
                self.stack_used()
            ),
        }
    }

    #[cold]
    #[inline(never)]
    pub(super) fn registers_exhausted(&self, f: &FuncInfo, held: usize) -> Error {
        Error::ResourceExhausted {
            budget: "SessionOptions::max_registers",
            message: format!(
                "calling `{}` needs {} registers with {held} held by the frames below, more \
                 than the budget of {}",
                f.name, f.register_file_size, self.budget.max_registers
            ),
        }
    }

    #[cold]
    #[inline(never)]
    fn instructions_exhausted(&self, f: &FuncInfo, pc: usize) -> Error {
        Error::ResourceExhausted {
            budget: "SessionOptions::max_instructions",
            message: format!(
                "`{}` at pc {pc}: the call would pass its budget of {} instructions",
                f.name, self.budget.instructions
            ),
        }
    }

    /// Charge the instruction budget for one pass over `f`'s body (at entering it, and at
    /// each backward jump, `pc`): without a backward jump, a frame runs each of its
    /// instructions at most once, so charging whole bodies bounds what a call executes with no
    /// count per instruction (docs/untrusted-models.md §3).
    #[inline]
    fn charge_instructions(&mut self, f: &FuncInfo, pc: usize) -> Result<()> {
        let body = (f.end - f.start) as u64;
        match self.call.instructions_left.checked_sub(body) {
            Some(left) => {
                self.call.instructions_left = left;
                Ok(())
            }
            None => Err(self.instructions_exhausted(f, pc)),
        }
    }

    fn run_frame(&mut self, m: &Program, fidx: usize, base: usize) -> Result<Value> {
        let f = &m.exe().funcs[fidx];
        // The instructions up to the function's end (the loader checked `end` is in range):
        // one bounds check per instruction also catches running past the end.
        let code = &m.exe().instrs[..f.end];
        let mut pc = f.start;
        loop {
            let vm_err = |pc: usize, message: String| Error::Vm {
                function: f.name.clone(),
                pc,
                message,
            };
            let Some(&instr) = code.get(pc) else {
                return Err(vm_err(pc, "ran past the end of the function".into()));
            };
            match instr {
                Instr::Call {
                    dst,
                    func,
                    args,
                    nargs,
                } => {
                    match *m.callee(func) {
                        // `null_value` only drops a register (the compiler's early frees).
                        Callee::Builtin(Builtin::NullValue)
                            if nargs == 0 && self.profiler.is_none() =>
                        {
                            if let Some(d) = dst {
                                self.regs[base + d as usize] = Value::None;
                            }
                            pc += 1;
                            continue;
                        }
                        Callee::Kernel(k) => {
                            // The interrupt, before every kernel (and in `call_index`, before
                            // every other call but a builtin's): where a running model stops.
                            if self.interrupt.take() {
                                return Err(Error::Cancelled);
                            }
                            let v = self.call_kernel_in_place(
                                m,
                                func,
                                k,
                                base,
                                m.exe().call_args(args, nargs),
                            )?;
                            if let Some(d) = dst {
                                self.regs[base + d as usize] = v;
                            }
                            pc += 1;
                            continue;
                        }
                        Callee::DeviceKernel(k) => {
                            if self.interrupt.take() {
                                return Err(Error::Cancelled);
                            }
                            let words = m.exe().call_args(args, nargs);
                            let v =
                                self.call_device_kernel(m, func, k, Some((base, words)), &[])?;
                            if let Some(d) = dst {
                                self.regs[base + d as usize] = v;
                            }
                            pc += 1;
                            continue;
                        }
                        _ => {}
                    }
                    let mut argv = std::mem::take(&mut self.argbuf);
                    let mark = argv.len();
                    for &a in m.exe().call_args(args, nargs) {
                        let v = self.read(m, base, a);
                        argv.push(v);
                    }
                    let r = self.call_index(m, func, &argv[mark..]);
                    argv.truncate(mark);
                    self.argbuf = argv;
                    let v = r?;
                    if let Some(d) = dst {
                        self.regs[base + d as usize] = v;
                    }
                }
                Instr::Ret { reg } => return Ok(self.read(m, base, reg)),
                Instr::Goto { target } => {
                    if target <= pc {
                        // A backward jump (legal Relax control flow): the only way a frame runs
                        // more instructions than it has, so the budget is charged here, the
                        // function's whole body again, and the interrupt is checked.
                        self.charge_instructions(f, pc)?;
                        if self.interrupt.take() {
                            return Err(Error::Cancelled);
                        }
                    }
                    pc = target;
                    continue;
                }
                Instr::If { cond, else_target } => {
                    let c = self.read(m, base, cond);
                    let c = c.as_int().ok_or_else(|| {
                        vm_err(pc, format!("If condition is a {}, not an int", c.kind()))
                    })?;
                    pc = if c != 0 { pc + 1 } else { else_target };
                    continue;
                }
            }
            pc += 1;
        }
    }

    #[inline]
    fn read(&self, m: &Program, base: usize, a: Arg) -> Value {
        match a {
            Arg::Reg(r) => self.regs[base + r as usize].clone(),
            Arg::Void => Value::None,
            Arg::Vm => Value::OpaquePtr(0),
            Arg::Imm(i) => Value::Int(i),
            Arg::Const(c) => m.exe().constants[c as usize].clone(),
            Arg::Func(f) => Value::Function(Function {
                model_id: m.id(),
                index: f,
                saved: Arc::from([]),
            }),
        }
    }

    /// Call function-table entry `func` with `args`.
    pub(crate) fn call_index(&mut self, m: &Program, func: u32, args: &[Value]) -> Result<Value> {
        let start = self.profiler.is_some().then(Instant::now);
        let model = m;
        // The interrupt, before every call but a builtin's (those do bounded work of their
        // own, and whatever they call comes back here): docs/untrusted-models.md §4.
        let r = match model.callee(func) {
            Callee::Builtin(b) => self.builtin(m, *b, args),
            _ if self.interrupt.take() => Err(Error::Cancelled),
            Callee::Vm(i) => self.invoke_vm(m, *i as usize, args),
            Callee::Kernel(k) => self.call_kernel_values(m, func, *k, args),
            Callee::DeviceKernel(k) => self.call_device_kernel(m, func, *k, None, args),
            Callee::Subgraph => self.run_subgraph(m, args),
            Callee::Registered(f) => f(&args.iter().map(CallArg::from_value).collect::<Vec<_>>())
                .map_err(|e| match e {
                    e @ Error::Callback { .. } => e,
                    e => Error::Callback {
                        name: model.exe().funcs[func as usize].name.clone(),
                        message: e.to_string(),
                    },
                }),
        };
        if let Some(start) = start {
            self.record(m, func, start);
        }
        r
    }

    /// Call a function value (a closure or function-table entry), appending its saved args.
    /// The public entry point is [`Session::call_function`], which checks more.
    pub(crate) fn call_function_value(
        &mut self,
        m: &Program,
        f: &Function,
        args: &[Value],
    ) -> Result<Value> {
        if f.model_id != m.id() {
            return Err(Error::InvalidArgument(
                "a function value from another model".into(),
            ));
        }
        if f.saved.is_empty() {
            return self.call_index(m, f.index, args);
        }
        let mut all = args.to_vec();
        all.extend(f.saved.iter().cloned());
        self.call_index(m, f.index, &all)
    }
}
