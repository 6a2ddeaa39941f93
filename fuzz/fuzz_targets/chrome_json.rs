//! Any bytes given to the reader of other tools' traces (Chrome JSON, the PyTorch profiler's
//! dialect, gzip): it returns an error or the `trace.bin` files of their processes, and never
//! panics. Every file it writes decodes without a warning, to as many spans and events as the
//! conversion says it wrote.
#![no_main]

use libfuzzer_sys::fuzz_target;
use std::{cell::RefCell, io::Write, path::Path, rc::Rc};

/// A writer into a buffer the target keeps.
struct Shared(Rc<RefCell<Vec<u8>>>);

impl Write for Shared {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.borrow_mut().extend_from_slice(buf);
        Ok(buf.len())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

waffle_fuzz::limit_allocations!();

fuzz_target!(|bytes: &[u8]| {
    let outs: Rc<RefCell<Vec<Rc<RefCell<Vec<u8>>>>>> = Rc::default();
    let sink = Rc::clone(&outs);
    let converted = waffle_foreign::convert_bytes(bytes, Path::new("fuzz.json"), &mut |i, _| {
        let buf = Rc::new(RefCell::new(Vec::new()));
        let mut outs = sink.borrow_mut();
        // Read again after a disorder: the same numbers are asked for, and replaced.
        outs.truncate(i);
        outs.push(Rc::clone(&buf));
        Ok(Box::new(Shared(buf)) as Box<dyn Write>)
    });
    let Ok(done) = converted else { return };
    let outs = outs.borrow();
    assert_eq!(outs.len(), done.processes.len());
    for (out, p) in outs.iter().zip(&done.processes) {
        let bytes = out.borrow();
        let (process, warnings) = waffle_read::decode::decode_reader(bytes.as_slice(), Path::new("fuzz.bin"))
            .expect("a converted file decodes");
        assert!(warnings.is_empty(), "{warnings:?}");
        let items: usize = process.threads.iter().map(|t| t.spans.len() + t.events.len()).sum();
        assert_eq!(items as u64, p.events, "spans and events written");
    }
});
