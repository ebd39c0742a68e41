//! A region's constant tensors as backends read them: held in memory, or read again from the
//! model file each time a backend asks (docs/footprint.md, "Memory").
//!
//! A weight that only an offloaded region reads is not kept by the VM: its bytes stay in the
//! mapped library, and a backend that packs it into its own form reads it once, packs it, and
//! drops the copy before reading the next. Only the packed forms stay, so a model's weights are
//! resident once, not twice.

use std::any::Any;
use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use crate::error::{Error, Result};
use crate::loader::executable::InPayload;
use crate::loader::library::Library;
use crate::tensor::Tensor;
use crate::value::Value;

/// One constant of a call site.
pub(crate) enum Constant {
    /// A tensor in memory (the VM's, or one given to a [`super::SubgraphRunner`]).
    Held(Tensor),
    /// Bytes in the module blob of a library that stays mapped while the model lives.
    InFile(InFile),
}

/// Where a deferred constant's bytes are, and what they are.
pub(crate) struct InFile {
    pub library: Arc<Library>,
    /// Its range in the VM executable's payload, shape and dtype (`Executable::in_payload`).
    pub data: InPayload,
    /// What the VM's constant pool holds in the tensor's place, passed by the call: the call
    /// site is recognised by it.
    pub key: Arc<str>,
}

impl Constant {
    /// The tensor: the held one, or a fresh copy of the file's bytes (whose pages are then
    /// handed back to the system, `host::pages`).
    pub(crate) fn tensor(&self) -> Result<Tensor> {
        match self {
            Constant::Held(t) => Ok(t.clone()),
            Constant::InFile(f) => read(&f.library, &f.data),
        }
    }

    /// Whether `arg`, a call's argument, is this constant.
    pub(crate) fn is(&self, arg: &Value) -> bool {
        match (self, arg) {
            (Constant::Held(c), Value::Tensor(t)) => t.same_data(c),
            (Constant::InFile(f), Value::Str(s)) => Arc::ptr_eq(&f.key, s),
            _ => false,
        }
    }
}

/// A tensor left in `library`'s VM executable, copied out (its pages then handed back to the
/// system, `host::pages`).
pub(crate) fn read(library: &Library, data: &InPayload) -> Result<Tensor> {
    let tree = library
        .module_tree()?
        .ok_or_else(|| Error::Format("the model's module blob is no longer readable".into()))?;
    data.copy_from(tree.payloads.first().copied().unwrap_or_default(), true)
}

/// The constants of a region, in the order of its description's `constants`, as a backend
/// reads them.
///
/// Each [`Constants::get`] may copy the constant out of the model file: a backend that turns a
/// weight into its own form should drop the tensor once it has, before it gets the next one,
/// and say so in [`super::Prepared::copied_constants`]. Then the runtime keeps no copy either.
#[derive(Clone, Copy)]
pub struct Constants<'a> {
    slots: Slots<'a>,
    /// Where forms built from these constants are kept for other preparations of the same
    /// call site (`Constants::shared`); `None`: each preparation builds its own.
    forms: Option<&'a Forms>,
}

/// The forms backends built from a call site's constants (a transposed or packed weight),
/// kept for the site's other preparations: other bindings of its symbolic dimensions
/// (docs/subgraph-format.md, version 3) and other backend orders. Each form is built once and
/// shared; it lives as long as the site.
#[derive(Default)]
pub(crate) struct Forms {
    map: Mutex<HashMap<(usize, &'static str), Form>>,
}

/// One built form, of whatever type its backend made it.
type Form = Arc<dyn Any + Send + Sync>;

impl Forms {
    /// The forms kept: `(constant, kind)`, sorted.
    #[cfg(test)]
    pub(crate) fn kept(&self) -> Vec<(usize, &'static str)> {
        let mut v: Vec<_> = self
            .map
            .lock()
            .map(|m| m.keys().copied().collect())
            .unwrap_or_default();
        v.sort();
        v
    }
}

#[derive(Clone, Copy)]
enum Slots<'a> {
    Tensors(&'a [Tensor]),
    Site(&'a [Constant]),
    /// Another accessor's constants, each passed through `f` (with its index) as it is got.
    Mapped {
        inner: &'a Constants<'a>,
        f: &'a Relayout<'a>,
    },
}

/// What [`Constants::mapped`] applies to each constant it gives out.
pub(crate) type Relayout<'a> = dyn Fn(usize, Tensor) -> Result<Tensor> + Sync + 'a;

impl<'a> From<&'a [Tensor]> for Constants<'a> {
    fn from(t: &'a [Tensor]) -> Self {
        Constants {
            slots: Slots::Tensors(t),
            forms: None,
        }
    }
}

impl<'a> From<&'a Vec<Tensor>> for Constants<'a> {
    fn from(t: &'a Vec<Tensor>) -> Self {
        Constants::from(t.as_slice())
    }
}

impl<'a> Constants<'a> {
    pub(crate) fn of_site(c: &'a [Constant]) -> Self {
        Constants {
            slots: Slots::Site(c),
            forms: None,
        }
    }

    /// A site's constants whose built forms are kept in `forms` ([`Constants::shared`]).
    pub(crate) fn of_site_sharing(c: &'a [Constant], forms: &'a Forms) -> Self {
        Constants {
            slots: Slots::Site(c),
            forms: Some(forms),
        }
    }

    /// These constants as `f(i, constant)` gives them: a rewrite of the region that changes a
    /// constant's layout transforms each one only when a backend gets it, so no more than one
    /// is held in both forms at a time.
    pub(crate) fn mapped(&'a self, f: &'a Relayout<'a>) -> Constants<'a> {
        // A rewritten constant is not the site's: its forms are not shared.
        Constants {
            slots: Slots::Mapped { inner: self, f },
            forms: None,
        }
    }

    /// How many constants the region has.
    pub fn len(&self) -> usize {
        match self.slots {
            Slots::Tensors(t) => t.len(),
            Slots::Site(c) => c.len(),
            Slots::Mapped { inner, .. } => inner.len(),
        }
    }

    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// The form `kind` of constant `i` (e.g. a weight transposed or packed for one kernel):
    /// built by `make` (which reads the constant with [`Constants::get`]), or the one an
    /// earlier preparation of the same call site built. `kind` must name everything the form
    /// depends on besides the constant (the layout, the ISA level), so that two forms under
    /// one name are always equal.
    pub fn shared<T: Any + Send + Sync>(
        &self,
        i: usize,
        kind: &'static str,
        make: impl FnOnce() -> Result<T>,
    ) -> Result<Arc<T>> {
        let Some(forms) = self.forms else {
            return Ok(Arc::new(make()?));
        };
        let found = forms
            .map
            .lock()
            .ok()
            .and_then(|m| m.get(&(i, kind)).cloned())
            .and_then(|f| f.downcast::<T>().ok());
        if let Some(f) = found {
            return Ok(f);
        }
        // Built outside the lock: packing a large weight takes milliseconds, and preparations
        // of other sites' regions do not wait. Two preparations racing for one form build it
        // twice, and the first one stored is kept.
        let built = Arc::new(make()?);
        let mut map = forms.map.lock().map_err(|_| Error::Backend {
            backend: super::CPU.into(),
            message: "a preparation panicked while storing a constant's form".into(),
        })?;
        let kept = map
            .entry((i, kind))
            .or_insert_with(|| built.clone() as Form)
            .clone();
        Ok(kept.downcast::<T>().unwrap_or(built))
    }

    /// Constant `i` (`None` past the end). An error when it had to be read from the model file
    /// and could not be.
    pub fn get(&self, i: usize) -> Result<Option<Tensor>> {
        match self.slots {
            Slots::Tensors(t) => Ok(t.get(i).cloned()),
            Slots::Site(c) => c.get(i).map(Constant::tensor).transpose(),
            Slots::Mapped { inner, f } => inner.get(i)?.map(|t| f(i, t)).transpose(),
        }
    }
}
