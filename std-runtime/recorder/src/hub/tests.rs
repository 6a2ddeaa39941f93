//! Finding a hub from the environment's value: only a live hub of this process, with the
//! token it published, is taken; a hub of another protocol is recognised by its first fields.

use super::*;

/// A hub's first fields for `protocol`, of no process yet.
const fn head(protocol: u32) -> Head {
    Head {
        magic: MAGIC,
        protocol,
        pid: AtomicU32::new(0),
        token: AtomicU64::new(0),
        recording: AtomicU32::new(0),
        file: AtomicPtr::new(std::ptr::null_mut()),
    }
}

/// Makes `head` this process's, with `token`.
fn publish_as(head: &Head, token: u64) {
    head.pid.store(std::process::id(), Ordering::Release);
    head.token.store(token, Ordering::Release);
}

const fn hub_of(protocol: u32) -> Hub {
    Hub {
        head: head(protocol),
        lock_holder: AtomicU64::new(0),
        lock_depth: AtomicU32::new(0),
        owner: AtomicPtr::new(std::ptr::null_mut()),
        modules: [const { AtomicPtr::new(std::ptr::null_mut()) }; MAX_MODULES],
    }
}

fn value(addr: usize, token: u64) -> String {
    format!("{:x}:{addr:x}:{token:x}", std::process::id())
}

#[test]
fn the_value_is_pid_address_and_token_in_hex() {
    assert_eq!(parse("1f:7ffd00:abc"), Some((0x1f, 0x7ffd00, 0xabc)));
    assert_eq!(parse(" 1:2:3\n"), Some((1, 2, 3)));
    assert_eq!(parse("1:2"), None);
    assert_eq!(parse("1:2:3:4"), None);
    assert_eq!(parse("1:x:3"), None);
    assert_eq!(parse(""), None);
}

#[test]
fn a_hub_of_this_process_with_its_token_is_found() {
    static IN_IMAGE: Hub = hub_of(PROTOCOL);
    publish_as(&IN_IMAGE.head, 0x7a11);
    let addr = &IN_IMAGE as *const Hub as usize;
    assert!(matches!(found_in(&value(addr, 0x7a11)), Found::Hub(h) if std::ptr::eq(h, &IN_IMAGE)));
    assert!(matches!(found_in(&value(addr, 0x7a12)), Found::Nothing), "another token is stale");
    let other_pid = format!("{:x}:{addr:x}:7a11", std::process::id() + 1);
    assert!(matches!(found_in(&other_pid), Found::Nothing), "a parent's hub is not a child's");
    assert!(matches!(found_in("zz"), Found::Nothing));
}

#[test]
fn an_address_outside_every_image_is_never_read() {
    // The same bytes on the heap or the stack: a stale value may point anywhere.
    let boxed: &'static Hub = Box::leak(Box::new(hub_of(PROTOCOL)));
    publish_as(&boxed.head, 0x5eed);
    assert!(matches!(found_in(&value(boxed as *const Hub as usize, 0x5eed)), Found::Nothing));
    let local = hub_of(PROTOCOL);
    publish_as(&local.head, 0x5eed);
    assert!(matches!(found_in(&value(&local as *const Hub as usize, 0x5eed)), Found::Nothing));
}

#[test]
fn a_hub_of_another_protocol_is_seen_as_foreign() {
    static NEWER: Head = head(PROTOCOL + 1);
    publish_as(&NEWER, 99);
    let found = found_in(&value(&NEWER as *const Head as usize, 99));
    assert!(matches!(found, Found::Foreign(h) if std::ptr::eq(h, &NEWER)));
}

#[test]
fn modules_and_hubs_keep_their_c_layout() {
    // The frozen part is what copies of other protocols read: its offsets never change.
    assert_eq!(std::mem::offset_of!(Head, magic), 0);
    assert_eq!(std::mem::offset_of!(Head, protocol), 8);
    assert_eq!(std::mem::offset_of!(Head, pid), 12);
    assert_eq!(std::mem::offset_of!(Head, token), 16);
    assert_eq!(std::mem::offset_of!(Head, recording), 24);
    assert_eq!(std::mem::offset_of!(Head, file), 32);
    assert_eq!(std::mem::size_of::<Head>(), 40);
    assert_eq!(MAGIC.to_le_bytes(), *b"waffle-h");
}
