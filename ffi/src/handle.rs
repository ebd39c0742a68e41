//! Handles: what C holds is not a pointer to a Rust object but a token naming a slot in a
//! per-type table. Use of a freed handle, or of a handle of another type, is then detected and
//! reported (`MOTE_ERROR_CODE_INVALID_HANDLE`) instead of being undefined behaviour.
//!
//! Token layout (a pointer-sized integer, never 0): `(slot + 1) << SLOT_SHIFT | (generation
//! & GEN_MASK) << 8 | tag`. A slot's generation advances when it is freed, and freed slots are
//! reused oldest first, so a stale token is caught until its slot's generation wraps.

use std::collections::VecDeque;
use std::sync::{Arc, Mutex, MutexGuard};

use crate::error::{MoteError, MoteErrorCode, Result};

#[cfg(target_pointer_width = "64")]
const SLOT_SHIFT: u32 = 24;
#[cfg(not(target_pointer_width = "64"))]
const SLOT_SHIFT: u32 = 16;
const GEN_MASK: usize = (1 << (SLOT_SHIFT - 8)) - 1;
const MAX_SLOTS: usize = (usize::MAX >> SLOT_SHIFT) - 1;

struct Slots<T> {
    entries: Vec<(usize, Option<Arc<T>>)>,
    free: VecDeque<usize>,
}

pub(crate) struct Table<T> {
    tag: u8,
    name: &'static str,
    slots: Mutex<Slots<T>>,
}

impl<T> Table<T> {
    pub(crate) const fn new(tag: u8, name: &'static str) -> Self {
        Table {
            tag,
            name,
            slots: Mutex::new(Slots {
                entries: Vec::new(),
                free: VecDeque::new(),
            }),
        }
    }

    fn lock(&self) -> MutexGuard<'_, Slots<T>> {
        // Nothing panics while the lock is held, but a poisoned table is still consistent.
        self.slots.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Store `value`; the token to hand to C.
    pub(crate) fn insert(&self, value: T) -> Result<*mut std::ffi::c_void> {
        self.insert_arc(Arc::new(value))
    }

    pub(crate) fn insert_arc(&self, value: Arc<T>) -> Result<*mut std::ffi::c_void> {
        let mut s = self.lock();
        // Reuse a slot only once enough are free, so that a freed handle stays detectable
        // for a while even in a program that frees and allocates in a tight loop.
        let slot = if s.free.len() > 64 || s.entries.len() >= MAX_SLOTS {
            s.free.pop_front()
        } else {
            None
        };
        let slot = match slot {
            Some(i) => i,
            None if s.entries.len() < MAX_SLOTS => {
                s.entries.push((0, None));
                s.entries.len() - 1
            }
            None => {
                return Err(MoteError::new(
                    MoteErrorCode::OutOfMemory,
                    format!("too many live {} handles", self.name),
                ))
            }
        };
        let entry = &mut s.entries[slot];
        entry.1 = Some(value);
        let token = ((slot + 1) << SLOT_SHIFT) | ((entry.0 & GEN_MASK) << 8) | self.tag as usize;
        Ok(token as *mut std::ffi::c_void)
    }

    fn decode(&self, token: usize) -> Option<(usize, usize)> {
        if token & 0xff != self.tag as usize {
            return None;
        }
        let slot = (token >> SLOT_SHIFT).checked_sub(1)?;
        Some((slot, (token >> 8) & GEN_MASK))
    }

    /// The object behind a live token.
    pub(crate) fn get<P>(&self, handle: *const P) -> Result<Arc<T>> {
        if handle.is_null() {
            return Err(MoteError::null(self.name));
        }
        let s = self.lock();
        self.decode(handle as usize)
            .and_then(|(slot, generation)| match s.entries.get(slot) {
                Some((g, Some(v))) if g & GEN_MASK == generation => Some(v.clone()),
                _ => None,
            })
            .ok_or_else(|| {
                MoteError::new(
                    MoteErrorCode::InvalidHandle,
                    format!(
                        "the {} handle {:p} is not live (already freed, or not a {})",
                        self.name, handle, self.name
                    ),
                )
            })
    }

    /// Invalidate a token and return its object. `None` for NULL; an error for a token that is
    /// not live.
    pub(crate) fn remove<P>(&self, handle: *const P) -> Result<Option<Arc<T>>> {
        if handle.is_null() {
            return Ok(None);
        }
        let mut s = self.lock();
        let found = self.decode(handle as usize).and_then(|(slot, generation)| {
            let entry = s.entries.get_mut(slot)?;
            if entry.0 & GEN_MASK != generation || entry.1.is_none() {
                return None;
            }
            entry.0 = entry.0.wrapping_add(1);
            Some((slot, entry.1.take()))
        });
        match found {
            Some((slot, v)) => {
                s.free.push_back(slot);
                Ok(v)
            }
            None => Err(MoteError::new(
                MoteErrorCode::InvalidHandle,
                format!(
                    "the {} handle {:p} is not live (double free?)",
                    self.name, handle
                ),
            )),
        }
    }

    /// `_free`: NULL is a no-op; a stale token is logged, never acted on.
    pub(crate) fn free<P>(&self, handle: *const P) {
        if let Err(e) = self.remove(handle) {
            log::warn!("{}", e.message.to_string_lossy());
        }
    }
}
