//! Error codes, messages, the panic guard and the pointer checks every
//! exported function goes through.
//!
//! An error is a negative errno value of the platform's `<errno.h>`; the
//! table that maps [`zsmem_core::Error`] to codes is [`code_of`], and the
//! header documents the same table.

use std::cell::RefCell;
use std::ffi::{CStr, CString, c_char, c_int, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};

use zsmem_core::Error;

/// A failed call: its errno value (positive) and the message for
/// `zsmem_last_error_message`.
#[derive(Debug)]
pub(crate) struct Fail {
    pub(crate) errno: c_int,
    pub(crate) message: String,
}

impl Fail {
    /// An invalid argument (`EINVAL`) with a message saying which.
    pub(crate) fn invalid(message: impl Into<String>) -> Fail {
        Fail {
            errno: libc::EINVAL,
            message: message.into(),
        }
    }
}

/// The errno value of each zsmem error (returned negated).
pub(crate) fn code_of(e: &Error) -> c_int {
    match e {
        Error::InvalidConfig(_) | Error::ZeroLength | Error::WrongPageSize { .. } => libc::EINVAL,
        Error::TooLarge { .. } => libc::E2BIG,
        Error::WriteTooLong { .. } => libc::EMSGSIZE,
        Error::BufferTooSmall { .. } => libc::ENOBUFS,
        Error::MemoryLimit { .. }
        | Error::OsOutOfMemory { .. }
        | Error::HandlesExhausted { .. } => libc::ENOMEM,
        Error::TooManyPools { .. } => libc::EMFILE,
        Error::InvalidHandle { .. } => libc::EBADF,
        Error::SlotOutOfRange { .. } => libc::ERANGE,
        Error::NoBackingFile => libc::ENODEV,
        Error::BackingFile(_) => libc::EIO,
        // The kernel's own refusal, as it gave it.
        Error::Userfaultfd { errno, .. } if *errno > 0 => *errno,
        // Codec (corrupt data), InvariantViolated, and any error added to
        // zsmem after this binding: an I/O error is the honest general case.
        _ => libc::EIO,
    }
}

impl From<Error> for Fail {
    fn from(e: Error) -> Fail {
        Fail {
            errno: code_of(&e),
            message: e.to_string(),
        }
    }
}

thread_local! {
    static LAST_ERROR: RefCell<CString> = RefCell::new(CString::default());
}

fn set_last_error(function: &str, message: &str) {
    let text = format!("{function}: {message}").replace('\0', "\\0");
    let text = CString::new(text).unwrap_or_default();
    // During thread teardown the slot may be gone: then there is nowhere to
    // keep the message, and the code alone must do.
    let _ = LAST_ERROR.try_with(|last| *last.borrow_mut() = text);
}

/// A return type that can carry a negative errno value.
pub(crate) trait Ret: Copy {
    fn from_errno(errno: c_int) -> Self;
}

impl Ret for c_int {
    fn from_errno(errno: c_int) -> Self {
        -errno
    }
}

impl Ret for i64 {
    fn from_errno(errno: c_int) -> Self {
        -i64::from(errno)
    }
}

/// Run the body of exported function `function`: its error becomes a
/// negative errno value and this thread's last error message; a panic is
/// caught and becomes `-ENOTRECOVERABLE`.
///
/// Unwind safety is asserted: the pool's locks do not poison, and a panic
/// inside zsmem is a bug whose object the caller is told not to trust.
pub(crate) fn guard<R: Ret>(function: &str, body: impl FnOnce() -> Result<R, Fail>) -> R {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(r)) => r,
        Ok(Err(fail)) => {
            set_last_error(function, &fail.message);
            R::from_errno(fail.errno)
        }
        Err(payload) => {
            let what = payload
                .downcast_ref::<&str>()
                .map(|s| (*s).to_owned())
                .or_else(|| payload.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic payload".into());
            set_last_error(
                function,
                &format!("internal error (a bug in zsmem; please report it): {what}"),
            );
            R::from_errno(libc::ENOTRECOVERABLE)
        }
    }
}

/// `len` bytes at `p` as a slice, or `EINVAL` if `p` is NULL or `len` is
/// larger than any object can be.
///
/// # Safety
/// A non-NULL `p` must be valid for reads of `len` initialised bytes for
/// `'a`, not written by anyone else meanwhile.
pub(crate) unsafe fn bytes<'a>(p: *const c_void, len: usize, what: &str) -> Result<&'a [u8], Fail> {
    if p.is_null() {
        return Err(Fail::invalid(format!("{what} is NULL")));
    }
    if len > isize::MAX as usize {
        return Err(Fail::invalid(format!(
            "{what} length {len} is not a valid buffer length"
        )));
    }
    // SAFETY: non-NULL, length checked against isize::MAX, and the caller
    // promises `len` readable initialised bytes (u8 needs no alignment).
    Ok(unsafe { std::slice::from_raw_parts(p.cast::<u8>(), len) })
}

/// Check an output buffer of `len` bytes at `p`: `EINVAL` if NULL or too
/// long for any buffer.
pub(crate) fn out_buffer(p: *mut c_void, len: usize, what: &str) -> Result<*mut u8, Fail> {
    if p.is_null() {
        return Err(Fail::invalid(format!("{what} is NULL")));
    }
    if len > isize::MAX as usize {
        return Err(Fail::invalid(format!(
            "{what} length {len} is not a valid buffer length"
        )));
    }
    Ok(p.cast())
}

/// Check an output pointer: `EINVAL` if NULL.
pub(crate) fn out_ptr<T>(p: *mut T, what: &str) -> Result<*mut T, Fail> {
    if p.is_null() {
        Err(Fail::invalid(format!("{what} is NULL")))
    } else {
        Ok(p)
    }
}

/// A short description of an error code (negative, as returned, or
/// positive), as a static string: never NULL, never to be freed.
///
/// Codes and what they mean here:
///
/// | code | meaning |
/// |---|---|
/// | `0` | success |
/// | `-EINVAL` | a NULL pointer, a pool or store pointer that is not live (destroyed, forged, or the other kind), a bad argument (zero length, a store buffer that is not one page), a bad or uninitialised configuration |
/// | `-E2BIG` | an object larger than the pool's page size |
/// | `-EMSGSIZE` | a write that runs past the end of its object |
/// | `-ENOBUFS` | a read buffer smaller than the object |
/// | `-ENOMEM` | the memory limit is reached, the OS refused memory (a slot table too large for memory), or a size class has no handle slot left |
/// | `-EMFILE` | 255 pools (stores included) are alive, the most a process can have |
/// | `-EBADF` | a handle that names no live object of this pool: freed (use after free, double free), stale, forged, 0, or another pool's |
/// | `-ERANGE` | a store slot beyond the store |
/// | `-ENODEV` | writeback asked of a store without a backing file |
/// | `-EIO` | compressed data that does not decompress, a backing file that cannot be used (in use, not zsmem's, full, an I/O error) or whose block is corrupt, a broken invariant, any other failure |
/// | `-ENOTRECOVERABLE` | a bug in zsmem was caught (a Rust panic); do not trust the object any more |
#[unsafe(no_mangle)]
pub extern "C" fn zsmem_strerror(code: c_int) -> *const c_char {
    let text: &'static CStr = match code.checked_abs().unwrap_or(-1) {
        0 => c"success",
        libc::EINVAL => c"invalid argument",
        libc::E2BIG => c"object larger than the pool's page size",
        libc::EMSGSIZE => c"write past the end of the object",
        libc::ENOBUFS => c"buffer smaller than the object",
        libc::ENOMEM => c"out of memory: the memory limit is reached or the OS refused memory",
        libc::EMFILE => c"too many pools: 255 are alive",
        libc::EBADF => c"invalid handle: freed, stale, forged or another pool's",
        libc::ERANGE => c"slot out of range",
        libc::ENODEV => c"the store has no backing file",
        libc::EIO => c"I/O error, corrupt data or internal inconsistency",
        libc::ENOTRECOVERABLE => c"internal error in zsmem (a caught panic)",
        _ => c"unknown error code",
    };
    text.as_ptr()
}

/// The full message of the last call on this thread that returned an
/// error, prefixed with the function's name: for example
/// `"zsmem_pool_read: read buffer of 10 bytes is smaller than the object of 100 bytes"`.
/// An empty string if no call on this thread has failed. Successful calls
/// leave it unchanged (as `errno`). The pointer is valid until the next
/// failing call on this thread; copy the text to keep it.
#[unsafe(no_mangle)]
pub extern "C" fn zsmem_last_error_message() -> *const c_char {
    LAST_ERROR
        .try_with(|last| last.borrow().as_ptr())
        .unwrap_or(c"".as_ptr())
}

/// Largest `size` a versioned struct may declare: far above any version's,
/// low enough that garbage in an uninitialised struct is caught.
const MAX_STRUCT_SIZE: usize = 4096;

/// Fill a versioned struct (one whose first field is its `size_t size`)
/// with `defaults`, for a caller whose struct is `size` bytes long, and
/// store `size`. A caller built against an older header passes one of
/// `versions` (the sizes of the struct's earlier versions, each a prefix
/// of this one): only its `size` bytes are written, the fields of that
/// version. A longer struct than this library's gets the defaults and the
/// bytes past them zeroed (fields of a newer header, left at 0, which
/// [`read_sized`] accepts). Any other size is `EINVAL`.
///
/// # Safety
/// A non-NULL `p` must be valid for writes of `size` bytes and aligned for
/// `T` (every version starts with the same `usize`, so has its alignment);
/// `T` must be `repr(C)`, start with a `usize`, and have no padding.
pub(crate) unsafe fn init_sized<T: Copy>(
    p: *mut T,
    size: usize,
    versions: &[usize],
    defaults: T,
    what: &str,
) -> Result<(), Fail> {
    let p = out_ptr(p, what)?;
    let filled = version_bytes::<T>(size, versions, what, " size")?;
    // SAFETY: the caller promises `size` writable, aligned bytes at `p`,
    // and `filled <= size` (an earlier version's size, or ours when the
    // caller's is at least that long); `defaults` is plain integers on
    // this stack, which the caller's struct cannot overlap. Nothing is
    // written past `size`: an older caller's struct ends there.
    unsafe {
        let bytes = p.cast::<u8>();
        bytes.write_bytes(0, size);
        std::ptr::copy_nonoverlapping((&defaults as *const T).cast::<u8>(), bytes, filled);
        p.cast::<usize>().write(size);
    }
    Ok(())
}

/// Read a versioned struct filled by [`init_sized`] and then by the caller.
/// `versions` lists the sizes of the struct's earlier versions (each a
/// prefix of this one): a caller built against an older header passes one
/// of them, and the fields it does not have keep `defaults`. Any other
/// `size` smaller than this library's struct, or a larger one with
/// non-zero bytes past it (fields this library does not know), is
/// `EINVAL`.
///
/// # Safety
/// A non-NULL `p` must point to the `size` bytes its first field declares,
/// all readable and aligned for `T`; `T` must be `repr(C)`, start with a
/// `usize`, have no padding and only integer fields.
pub(crate) unsafe fn read_sized<T: Copy>(
    p: *const T,
    what: &str,
    init: &str,
    versions: &[usize],
    defaults: T,
) -> Result<T, Fail> {
    if p.is_null() {
        return Err(Fail::invalid(format!("{what} is NULL")));
    }
    let ours = std::mem::size_of::<T>();
    // SAFETY: `p` is non-NULL and, per the caller, points to an aligned
    // struct, which starts with its `usize` size.
    let size = unsafe { p.cast::<usize>().read() };
    if versions.contains(&size) && size < ours {
        let mut value = defaults;
        // SAFETY: the caller promises `size` readable bytes at `p`; `value`
        // is a `T` of `ours > size` bytes, plain integers, on this stack.
        unsafe {
            std::ptr::copy_nonoverlapping(
                p.cast::<u8>(),
                (&mut value as *mut T).cast::<u8>(),
                size,
            );
        }
        return Ok(value);
    }
    if !(ours..=MAX_STRUCT_SIZE).contains(&size) {
        return Err(Fail::invalid(format!(
            "{what} has size {size}, not {ours}: initialise it with {init} first"
        )));
    }
    // SAFETY: the caller promises the `size` bytes the struct declares are
    // readable; `size >= ours` was just checked.
    let tail = unsafe { std::slice::from_raw_parts(p.cast::<u8>().add(ours), size - ours) };
    if tail.iter().any(|&b| b != 0) {
        return Err(Fail::invalid(format!(
            "{what} sets fields this library (zsmem {}) does not know: it was built for a newer header",
            env!("CARGO_PKG_VERSION")
        )));
    }
    // SAFETY: an aligned, readable `T`; every bit pattern of its integer
    // fields is valid.
    Ok(unsafe { p.read() })
}

/// Check a report's out-struct before the call acts (so a bad one leaves
/// nothing done): `EINVAL` if `out` is NULL or `out_size` is neither an
/// earlier version's size (`versions`) nor at least this library's (up to
/// the largest any struct can be): a size between two versions would end
/// inside a field. A longer struct than this library's gets its extra bytes
/// zeroed by [`write_sized`].
pub(crate) fn out_struct<T>(
    out: *mut T,
    out_size: usize,
    versions: &[usize],
    what: &str,
) -> Result<*mut T, Fail> {
    let out = out_ptr(out, what)?;
    version_bytes::<T>(out_size, versions, what, "_size")?;
    Ok(out)
}

/// How many bytes of this library's `T` a caller's struct of `size` bytes
/// holds: all of them if it is at least as long (up to
/// [`MAX_STRUCT_SIZE`]), else `size` if that is an earlier version's
/// (`versions`); any other size, which would end inside a field, is
/// `EINVAL`, its message naming `what` and `field` (" size", "_size").
fn version_bytes<T>(
    size: usize,
    versions: &[usize],
    what: &str,
    field: &str,
) -> Result<usize, Fail> {
    let ours = size_of::<T>();
    if (ours..=MAX_STRUCT_SIZE).contains(&size) {
        Ok(ours)
    } else if versions.contains(&size) && size < ours {
        Ok(size)
    } else {
        let earlier: Vec<String> = versions.iter().map(usize::to_string).collect();
        Err(Fail::invalid(format!(
            "{what}{field} {size} is not that of any version of this struct (this library's is {ours}, earlier versions' are [{}]): pass sizeof of the struct",
            earlier.join(", ")
        )))
    }
}

/// Copy the first `min(out_size, sizeof(T))` bytes of `src`
/// to `out`, zeroing the rest of the caller's `out_size` bytes.
///
/// # Safety
/// `out` is writable for `out_size` bytes (checked non-NULL here).
pub(crate) unsafe fn write_sized<T: Copy>(
    out: *mut T,
    out_size: usize,
    src: &T,
) -> Result<(), Fail> {
    let out = out_ptr(out, "out")?.cast::<u8>();
    if out_size > isize::MAX as usize {
        return Err(Fail::invalid(format!(
            "out_size {out_size} is not a struct size"
        )));
    }
    let n = out_size.min(size_of::<T>());
    // SAFETY: `out` is writable for `out_size >= n` bytes (the caller's
    // promise); `src` is a plain `T` of at least `n` bytes, and a caller's
    // buffer cannot overlap a value on this stack.
    unsafe {
        std::ptr::copy_nonoverlapping((src as *const T).cast::<u8>(), out, n);
        out.add(n).write_bytes(0, out_size - n);
    }
    Ok(())
}
