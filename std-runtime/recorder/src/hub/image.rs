//! This copy's image (the executable or shared object it was linked into), as the dynamic
//! loader knows it: its file name, keeping it loaded, and whether an address lies in writable
//! memory of some loaded image.

use std::ffi::{c_void, CStr, CString};

/// A byte of this image, whose address tells which image this is.
static HERE: u8 = 0;

fn info(addr: *const c_void) -> Option<libc::Dl_info> {
    let mut info = libc::Dl_info {
        dli_fname: std::ptr::null(),
        dli_fbase: std::ptr::null_mut(),
        dli_sname: std::ptr::null(),
        dli_saddr: std::ptr::null_mut(),
    };
    // SAFETY: `info` is a valid out-parameter; `dladdr` only reads the address as a number.
    let found = unsafe { libc::dladdr(addr, &mut info) };
    (found != 0).then_some(info)
}

/// This image's file name, as the loader was given it ("" for the executable, whose name the
/// loader does not keep: then the executable's path).
pub(super) fn name() -> CString {
    let named = info(std::ptr::addr_of!(HERE).cast()).and_then(|i| {
        // SAFETY: a non-null `dli_fname` is a NUL-terminated string owned by the loader, valid
        // while the image is loaded (for the whole call here).
        (!i.dli_fname.is_null()).then(|| unsafe { CStr::from_ptr(i.dli_fname) }.to_owned())
    });
    match named {
        Some(n) if !n.as_bytes().is_empty() => n,
        _ => std::env::current_exe()
            .ok()
            .and_then(|p| CString::new(p.into_os_string().into_encoded_bytes()).ok())
            .unwrap_or_else(|| c"the program".to_owned()),
    }
}

/// Keeps this image loaded for the life of the process, so that the pointers other copies hold
/// into it (its module, its hub, its functions) never dangle: a shared object is opened again
/// with `RTLD_NODELETE`, which makes `dlclose` leave it mapped. The executable needs nothing.
pub(super) fn pin() {
    let Some(i) = info(std::ptr::addr_of!(HERE).cast()) else { return };
    if i.dli_fname.is_null() {
        return;
    }
    // SAFETY: `dli_fname` is NUL-terminated (as in `name`); with RTLD_NOLOAD `dlopen` only finds
    // an image already loaded (this one) and adds a reference that is never dropped, which is
    // the point. It cannot run constructors, so calling it from one is fine.
    unsafe { libc::dlopen(i.dli_fname, libc::RTLD_NOLOAD | libc::RTLD_NODELETE | libc::RTLD_LAZY) };
}

/// Whether `len` bytes at `addr` lie inside one writable segment of an image loaded now: the
/// check made before reading a hub at an address taken from the environment.
pub(super) fn is_mapped_writable(addr: usize, len: usize) -> bool {
    struct Query {
        start: usize,
        end: usize,
        found: bool,
    }
    extern "C" fn each(info: *mut libc::dl_phdr_info, _size: libc::size_t, data: *mut c_void) -> libc::c_int {
        // SAFETY: `dl_iterate_phdr` passes a valid `info` for the call's duration, and `data`
        // is the `Query` handed to it below, borrowed for the whole iteration.
        let (info, q) = unsafe { (&*info, &mut *data.cast::<Query>()) };
        if info.dlpi_phdr.is_null() {
            return 0;
        }
        // SAFETY: `dlpi_phdr` points to `dlpi_phnum` program headers of the image.
        let headers = unsafe { std::slice::from_raw_parts(info.dlpi_phdr, usize::from(info.dlpi_phnum)) };
        for h in headers {
            if h.p_type == libc::PT_LOAD && h.p_flags & libc::PF_W != 0 {
                let seg_start = (info.dlpi_addr as usize).wrapping_add(h.p_vaddr as usize);
                let seg_end = seg_start.wrapping_add(h.p_memsz as usize);
                if q.start >= seg_start && q.end <= seg_end {
                    q.found = true;
                    return 1;
                }
            }
        }
        0
    }
    let Some(end) = addr.checked_add(len) else { return false };
    let mut q = Query { start: addr, end, found: false };
    // SAFETY: `each` matches the callback type and only reads what the loader passes; `q`
    // outlives the call.
    unsafe { libc::dl_iterate_phdr(Some(each), std::ptr::addr_of_mut!(q).cast()) };
    q.found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn statics_are_in_writable_memory_and_the_stack_and_code_are_not() {
        static WRITABLE: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
        assert!(is_mapped_writable(std::ptr::addr_of!(WRITABLE) as usize, 8));
        let local = 0u64;
        assert!(!is_mapped_writable(std::ptr::addr_of!(local) as usize, 8), "a stack is no image");
        assert!(
            !is_mapped_writable(is_mapped_writable as fn(usize, usize) -> bool as usize, 8),
            "code is not writable"
        );
        assert!(!is_mapped_writable(usize::MAX - 3, 8));
        assert!(!is_mapped_writable(8, 8));
    }

    #[test]
    fn this_image_has_a_name() {
        assert!(!name().as_bytes().is_empty());
    }
}
