//! Element types, laid out exactly like DLPack's `DLDataType`.

use std::fmt;
use std::str::FromStr;

use crate::error::Error;

/// DLPack type codes Mote understands.
pub mod code {
    pub const INT: u8 = 0;
    pub const UINT: u8 = 1;
    pub const FLOAT: u8 = 2;
    pub const HANDLE: u8 = 3;
    pub const BFLOAT: u8 = 4;
    pub const BOOL: u8 = 6;
}

/// An element type: DLPack's `{code, bits, lanes}`.
#[derive(Clone, Copy, PartialEq, Eq, Hash, Debug)]
#[repr(C)]
pub struct DType {
    pub code: u8,
    pub bits: u8,
    pub lanes: u16,
}

impl DType {
    pub const fn new(code: u8, bits: u8) -> Self {
        DType {
            code,
            bits,
            lanes: 1,
        }
    }
    pub const F16: DType = DType::new(code::FLOAT, 16);
    pub const F32: DType = DType::new(code::FLOAT, 32);
    pub const F64: DType = DType::new(code::FLOAT, 64);
    pub const BF16: DType = DType::new(code::BFLOAT, 16);
    pub const I8: DType = DType::new(code::INT, 8);
    pub const I16: DType = DType::new(code::INT, 16);
    pub const I32: DType = DType::new(code::INT, 32);
    pub const I64: DType = DType::new(code::INT, 64);
    pub const U8: DType = DType::new(code::UINT, 8);
    pub const U16: DType = DType::new(code::UINT, 16);
    pub const U32: DType = DType::new(code::UINT, 32);
    pub const U64: DType = DType::new(code::UINT, 64);
    /// Relax's `bool`: DLPack code 6, stored as one byte.
    pub const BOOL: DType = DType::new(code::BOOL, 8);

    /// Bytes one element occupies (`ceil(bits * lanes / 8)`).
    pub fn size_bytes(self) -> usize {
        (self.bits as usize * self.lanes as usize).div_ceil(8)
    }

    pub fn is_float(self) -> bool {
        matches!(self.code, code::FLOAT | code::BFLOAT)
    }
}

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let base = match (self.code, self.bits) {
            (code::BOOL, _) => "bool".to_string(),
            (code::INT, b) => format!("int{b}"),
            (code::UINT, 1) => "bool".to_string(),
            (code::UINT, b) => format!("uint{b}"),
            (code::FLOAT, b) => format!("float{b}"),
            (code::BFLOAT, b) => format!("bfloat{b}"),
            (code::HANDLE, _) => "handle".to_string(),
            (c, b) => format!("dtype(code={c},bits={b})"),
        };
        if self.lanes > 1 {
            write!(f, "{base}x{}", self.lanes)
        } else {
            f.write_str(&base)
        }
    }
}

impl FromStr for DType {
    type Err = Error;
    fn from_str(s: &str) -> Result<Self, Error> {
        let dt = match s {
            "bool" => DType::BOOL,
            "float16" | "f16" => DType::F16,
            "float32" | "f32" => DType::F32,
            "float64" | "f64" => DType::F64,
            "bfloat16" | "bf16" => DType::BF16,
            "int8" | "i8" => DType::I8,
            "int16" | "i16" => DType::I16,
            "int32" | "i32" => DType::I32,
            "int64" | "i64" => DType::I64,
            "uint8" | "u8" => DType::U8,
            "uint16" | "u16" => DType::U16,
            "uint32" | "u32" => DType::U32,
            "uint64" | "u64" => DType::U64,
            _ => return Err(Error::InvalidArgument(format!("unknown dtype `{s}`"))),
        };
        Ok(dt)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for dt in [
            DType::F16,
            DType::F32,
            DType::F64,
            DType::BF16,
            DType::I8,
            DType::I16,
            DType::I32,
            DType::I64,
            DType::U8,
            DType::BOOL,
        ] {
            assert_eq!(dt.to_string().parse::<DType>().unwrap(), dt);
        }
        assert_eq!(DType::BF16.size_bytes(), 2);
        assert_eq!(DType::BOOL.size_bytes(), 1);
        assert!("complex64".parse::<DType>().is_err());
    }
}
