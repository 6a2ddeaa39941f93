//! One recorder per process when two images carry the C ABI.
//!
//! `libwaffle.so` and `libwaffle_mpi.so` both export every `waffle_*` function. A program linked
//! with the first and run with `LD_PRELOAD` of the second has both loaded; the dynamic linker
//! binds each of the program's calls to the first definition in its lookup order (the
//! executable, then preloaded objects, then the libraries in link order), so all of them reach
//! one image, and the other image's functions are never called. Both would still start a
//! session from `WAFFLE_OUTPUT` in their constructors, two sessions writing one file.
//!
//! So an image asks, before that start ([`waffle_std::autostart::DEFER`]), where the dynamic
//! linker resolves `waffle_abi_version`: `dlsym(RTLD_DEFAULT, ...)` gives the definition calls
//! bind to, and `dladdr` names the image it lies in. If that image is not this one, this image
//! lost symbol resolution and leaves `WAFFLE_OUTPUT` to the winner. This image is found from the
//! address of a private static, which no other image can interpose (the address of an exported
//! function might be taken through the GOT and be the winner's).
//!
//! A program linked statically with `libwaffle.a` exports no `waffle_*` symbol dynamically
//! (unless linked with `-rdynamic`), so the lookup finds a preloaded library's: its calls
//! still go to its own copy, which leaves the start to the preloaded library and then joins
//! that library's session (`waffle_std`'s hub: one recorder per process), so they record all
//! the same.

use std::ffi::c_void;

/// A byte of this image, whose address tells which image this is.
static HERE: u8 = 0;

#[waffle_std::__private::linkme::distributed_slice(waffle_std::autostart::DEFER)]
#[linkme(crate = waffle_std::__private::linkme)]
static LOST_SYMBOL_RESOLUTION: fn() -> bool = lost_symbol_resolution;

/// Whether the process's `waffle_abi_version` is another image's.
fn lost_symbol_resolution() -> bool {
    // SAFETY: the name is a NUL-terminated literal; RTLD_DEFAULT searches the global scope,
    // which is complete when constructors run.
    let found = unsafe { libc::dlsym(libc::RTLD_DEFAULT, c"waffle_abi_version".as_ptr()) };
    if found.is_null() {
        return false; // nobody exports it (a static link): this image is alone
    }
    match (image_of(found), image_of(std::ptr::addr_of!(HERE).cast())) {
        (Some(theirs), Some(ours)) => theirs != ours,
        _ => false,
    }
}

/// The base address of the image holding `addr`, as `dladdr` reports it.
fn image_of(addr: *const c_void) -> Option<usize> {
    let mut info = libc::Dl_info {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    };
    // SAFETY: `info` is a valid out-parameter; `dladdr` only reads the address as a number.
    let found = unsafe { libc::dladdr(addr, &mut info) };
    (found != 0).then_some(info.dli_fbase as usize)
}
