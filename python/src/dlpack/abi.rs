//! The `repr(C)` structs of `dlpack.h` this consumer reads (versions 0.8 to 1.3 share this
//! layout; 1.x only adds device types, element types and flags).

use std::os::raw::c_void;

#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct DLDevice {
    pub(super) device_type: i32,
    pub(super) device_id: i32,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub(super) struct DLDataType {
    pub(super) code: u8,
    pub(super) bits: u8,
    pub(super) lanes: u16,
}

#[repr(C)]
pub(super) struct DLTensor {
    pub(super) data: *mut c_void,
    pub(super) device: DLDevice,
    pub(super) ndim: i32,
    pub(super) dtype: DLDataType,
    pub(super) shape: *mut i64,
    pub(super) strides: *mut i64,
    pub(super) byte_offset: u64,
}

#[repr(C)]
pub(super) struct DLManagedTensor {
    pub(super) dl_tensor: DLTensor,
    #[allow(dead_code)] // the producer's, there for the layout
    pub(super) manager_ctx: *mut c_void,
    pub(super) deleter: Option<unsafe extern "C" fn(*mut DLManagedTensor)>,
}

#[repr(C)]
pub(super) struct DLPackVersion {
    pub(super) major: u32,
    pub(super) minor: u32,
}

#[repr(C)]
pub(super) struct DLManagedTensorVersioned {
    pub(super) version: DLPackVersion,
    #[allow(dead_code)] // the producer's, there for the layout
    pub(super) manager_ctx: *mut c_void,
    pub(super) deleter: Option<unsafe extern "C" fn(*mut DLManagedTensorVersioned)>,
    #[allow(dead_code)] // read-only and copied: nothing to a reader
    pub(super) flags: u64,
    pub(super) dl_tensor: DLTensor,
}
