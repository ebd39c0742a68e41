//! The Rust side of the ABI baseline: the `#[repr(C)]` types have the sizes, alignments and
//! field offsets recorded in `ffi/abi/layout.txt`, which the C side is checked against too
//! (`scripts/test-ffi.sh`), so Rust and C cannot drift apart silently.
#![cfg(target_pointer_width = "64")]

use std::collections::HashMap;
use std::mem::{align_of, offset_of, size_of};

use mote_ffi::{MoteArg, MoteCallArg, MoteDtype, MoteParamInfo, MoteProfileEntry, MoteTensorInfo};

fn baseline() -> HashMap<String, (usize, usize)> {
    let text = include_str!("../abi/layout.txt");
    let mut m = HashMap::new();
    for line in text.lines() {
        let w: Vec<&str> = line.split_whitespace().collect();
        match w.as_slice() {
            ["sizeof", name, size, "align", align] => {
                m.insert(
                    name.to_string(),
                    (size.parse().unwrap(), align.parse().unwrap()),
                );
            }
            [field, "offset", off, "size", size] => {
                m.insert(
                    field.to_string(),
                    (off.parse().unwrap(), size.parse().unwrap()),
                );
            }
            _ => {}
        }
    }
    m
}

macro_rules! check_struct {
    ($b:expr, $t:ident { $($f:ident: $ft:ty),* }) => {{
        let b = &$b;
        assert_eq!(b[stringify!($t)], (size_of::<$t>(), align_of::<$t>()), "{}", stringify!($t));
        $(
            let key = concat!(stringify!($t), ".", stringify!($f));
            assert_eq!(b[key], (offset_of!($t, $f), size_of::<$ft>()), "{key}");
        )*
        let listed = b.keys().filter(|k| k.starts_with(concat!(stringify!($t), "."))).count();
        assert_eq!(listed, [$(stringify!($f)),*].len(), "fields of {}", stringify!($t));
    }};
}

#[test]
fn repr_c_types_match_the_baseline() {
    let b = baseline();
    check_struct!(
        b,
        MoteDtype {
            code: u8,
            bits: u8,
            lanes: u16
        }
    );
    check_struct!(b, MoteTensorInfo { dtype: MoteDtype, ndim: usize, shape: *const i64, data: *mut u8, byte_size: usize });
    check_struct!(b, MoteParamInfo { name: *const u8, dtype: MoteDtype, ndim: i32, shape: *const i64 });
    check_struct!(b, MoteProfileEntry { name: *const u8, kind: *const u8, calls: u64, total_ns: u64 });
    check_struct!(b, MoteArg { kind: u32, int_value: i64, float_value: f64, pointer: *mut u8, string: *const u8, tensor: *mut u8 });
    check_struct!(b, MoteCallArg { tensor: *const u8, device_tensor: *const u8 });
}

#[test]
fn abi_version_matches_the_baseline() {
    assert!(include_str!("../abi/layout.txt")
        .lines()
        .any(|l| l == format!("MOTE_ABI_VERSION {}", mote_ffi::MOTE_ABI_VERSION)));
    assert_eq!(mote_ffi::mote_abi_version(), mote_ffi::MOTE_ABI_VERSION);
}
