//! Devices other than the host CPU (docs/opencl.md). Each kind of device lives in its own
//! module with the same parts: a library loaded at run time, device discovery with the
//! attributes TVM asks about, contexts, memory, copies, programs and launches. OpenCL is the
//! first; Metal and Vulkan would sit beside it.

pub mod memory;
pub mod opencl;

pub use memory::{Device, DeviceQueue, DeviceStorage, DeviceTensor, Mapped};
