"""A DLPack producer written by hand with ctypes, for testing `waffle.tensor` as a consumer.

`HandMade` exposes nothing but `__dlpack__` and `__dlpack_device__`. It lays out a
`DLManagedTensor` or `DLManagedTensorVersioned` (as `dlpack.h` defines them) over the bytes of
a NumPy array standing for the allocation, with whatever data pointer, byte offset, shape,
strides, element type, device and version a test asks for, and counts the calls of its deleter.
Its capsules have no destructor, so a deleter call can only come from the consumer. `expected`
builds the same tensor with NumPy's own strided indexing, for comparison.
"""

from __future__ import annotations

import ctypes
from typing import Optional

import numpy as np

# DLPack element type codes.
INT, UINT, FLOAT, BFLOAT, COMPLEX, BOOL = 0, 1, 2, 4, 5, 6
CPU, CUDA = 1, 2


class DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class DLTensor(ctypes.Structure):
    _fields_ = [
        ("data", ctypes.c_void_p),
        ("device", DLDevice),
        ("ndim", ctypes.c_int32),
        ("dtype", DLDataType),
        ("shape", ctypes.POINTER(ctypes.c_int64)),
        ("strides", ctypes.POINTER(ctypes.c_int64)),
        ("byte_offset", ctypes.c_uint64),
    ]


DELETER = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", DLTensor), ("manager_ctx", ctypes.c_void_p), ("deleter", DELETER)]


class DLPackVersion(ctypes.Structure):
    _fields_ = [("major", ctypes.c_uint32), ("minor", ctypes.c_uint32)]


class DLManagedTensorVersioned(ctypes.Structure):
    _fields_ = [
        ("version", DLPackVersion),
        ("manager_ctx", ctypes.c_void_p),
        ("deleter", DELETER),
        ("flags", ctypes.c_uint64),
        ("dl_tensor", DLTensor),
    ]


_capsule_new = ctypes.pythonapi.PyCapsule_New
_capsule_new.restype = ctypes.py_object
_capsule_new.argtypes = [ctypes.c_void_p, ctypes.c_char_p, ctypes.c_void_p]

# The capsule keeps its name's pointer: these bytes objects live as long as the module.
_NAMES = {True: b"dltensor_versioned", False: b"dltensor"}


class HandMade:
    """A tensor of `shape` with `strides` (in elements; None for C order) whose elements, of
    DLPack type (`code`, `bits`), start `byte_offset` bytes after a data pointer `data_offset`
    bytes into `memory`'s bytes."""

    def __init__(
        self,
        memory: np.ndarray,
        code: int,
        bits: int,
        shape: tuple[int, ...],
        strides: Optional[tuple[int, ...]] = None,
        byte_offset: int = 0,
        data_offset: int = 0,
        versioned: bool = True,
        version: tuple[int, int] = (1, 0),
        device: tuple[int, int] = (CPU, 0),
        on_copy_to_host: Optional["HandMade"] = None,
    ) -> None:
        self.memory = memory
        self.code, self.bits = code, bits
        self.shape, self.strides = shape, strides
        self.byte_offset, self.data_offset = byte_offset, data_offset
        self.versioned, self.version, self.device = versioned, version, device
        self.on_copy_to_host = on_copy_to_host
        self.calls: list[dict] = []
        self.deleted: list[int] = []
        self.capsules: list[object] = []
        self._keep: list[object] = []

        @DELETER
        def deleter(ptr: int) -> None:
            self.deleted.append(ptr)

        self._deleter = deleter

    def __dlpack_device__(self) -> tuple[int, int]:
        return self.device

    def __dlpack__(self, *, stream=None, max_version=None, dl_device=None, copy=None):
        self.calls.append({"stream": stream, "max_version": max_version, "dl_device": dl_device, "copy": copy})
        if dl_device is not None and tuple(dl_device) != self.device:
            if self.on_copy_to_host is None or tuple(dl_device) != (CPU, 0) or copy is False:
                raise BufferError(f"cannot export to {dl_device}")
            return self.on_copy_to_host.__dlpack__(max_version=max_version)
        versioned = self.versioned and max_version is not None and tuple(max_version) >= (1, 0)
        ndim = len(self.shape)
        shape = (ctypes.c_int64 * max(ndim, 1))(*self.shape)
        strides = None if self.strides is None else (ctypes.c_int64 * max(ndim, 1))(*self.strides)
        t = DLTensor(
            data=self.memory.ctypes.data + self.data_offset,
            device=DLDevice(*self.device),
            ndim=ndim,
            dtype=DLDataType(self.code, self.bits, 1),
            shape=shape,
            strides=ctypes.cast(strides, ctypes.POINTER(ctypes.c_int64)) if strides is not None else None,
            byte_offset=self.byte_offset,
        )
        if versioned:
            managed = DLManagedTensorVersioned(
                version=DLPackVersion(*self.version), manager_ctx=None, deleter=self._deleter, flags=0, dl_tensor=t
            )
        else:
            managed = DLManagedTensor(dl_tensor=t, manager_ctx=None, deleter=self._deleter)
        self._keep += [shape, strides, managed]
        capsule = _capsule_new(ctypes.addressof(managed), _NAMES[versioned], None)
        self.capsules.append(capsule)
        return capsule

    def expected(self, dtype) -> np.ndarray:
        """The tensor as NumPy indexes it (strides and offsets in bytes), in C order."""
        dtype = np.dtype(dtype)
        strides = self.strides
        if strides is None:
            strides = tuple(int(np.prod(self.shape[i + 1 :])) for i in range(len(self.shape)))
        raw = self.memory.view(np.uint8).ravel()
        view = np.ndarray(
            self.shape,
            dtype=dtype,
            buffer=raw,
            offset=self.data_offset + self.byte_offset,
            strides=tuple(s * dtype.itemsize for s in strides),
        )
        return view.copy(order="C")


def capsule_name(capsule: object) -> str:
    """A capsule's name, as its repr shows it."""
    return repr(capsule).split('"')[1]
