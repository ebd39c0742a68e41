"""remote.cl(0), as TVM's Android flow uses it: it exists and every attribute TVM's OpenCL
runtime answers has the value OpenCL itself gives, read here through ctypes straight from
libOpenCL (an oracle independent of Mote); a device past the last does not exist."""
import ctypes

from rpc_common import connect

cl = ctypes.CDLL("libOpenCL.so.1")
n = ctypes.c_uint()
assert cl.clGetPlatformIDs(0, None, ctypes.byref(n)) == 0 and n.value > 0
platforms = (ctypes.c_void_p * n.value)()
cl.clGetPlatformIDs(n.value, platforms, None)
devices = []
for p in platforms:
    k = ctypes.c_uint()
    if cl.clGetDeviceIDs(ctypes.c_void_p(p), ctypes.c_ulonglong(0xFFFFFFFF), 0, None, ctypes.byref(k)) != 0:
        continue
    ids = (ctypes.c_void_p * k.value)()
    cl.clGetDeviceIDs(ctypes.c_void_p(p), ctypes.c_ulonglong(0xFFFFFFFF), k.value, ids, None)
    devices += list(ids)


def info(dev, param, ctype):
    v = ctype()
    assert cl.clGetDeviceInfo(ctypes.c_void_p(dev), param, ctypes.sizeof(v), ctypes.byref(v), None) == 0
    return v.value


def text(dev, param):
    size = ctypes.c_size_t()
    cl.clGetDeviceInfo(ctypes.c_void_p(dev), param, 0, None, ctypes.byref(size))
    buf = ctypes.create_string_buffer(size.value)
    cl.clGetDeviceInfo(ctypes.c_void_p(dev), param, size, buf, None)
    return buf.value.decode().strip()


d0 = devices[0]
remote = connect()
dev = remote.cl(0)
assert dev.exist, "remote.cl(0) does not exist"
assert dev.device_name == text(d0, 0x102B), (dev.device_name, text(d0, 0x102B))
assert dev.max_threads_per_block == info(d0, 0x1004, ctypes.c_size_t)
assert dev.multi_processor_count == info(d0, 0x1002, ctypes.c_uint)
assert dev.max_shared_memory_per_block == info(d0, 0x1023, ctypes.c_ulonglong)
assert dev.max_clock_rate == info(d0, 0x100C, ctypes.c_uint) * 1000
assert dev.total_global_memory == info(d0, 0x101F, ctypes.c_ulonglong)
assert dev.l2_cache_size_bytes == info(d0, 0x101E, ctypes.c_ulonglong)
assert dev.driver_version == text(d0, 0x102D)
assert "OpenCL " + dev.compute_version in text(d0, 0x102F), (dev.compute_version, text(d0, 0x102F))
assert dev.warp_size == 1 and dev.api_version == 120
sizes = (ctypes.c_size_t * 3)()
cl.clGetDeviceInfo(ctypes.c_void_p(d0), 0x1005, ctypes.sizeof(sizes), sizes, None)
assert list(dev.max_thread_dimensions) == list(sizes), (dev.max_thread_dimensions, list(sizes))
assert not remote.cl(len(devices)).exist, "a device past the last must not exist"
print(f"opencl_device: ok ({dev.device_name}, {len(devices)} device(s))")
