//! The hand-written event parser held to serde_json's derived deserializer (`reference`), on
//! events generated at random and on the same events broken: both accept the same texts, with
//! the same values and the same length; both say "more" for every prefix of a whole event;
//! both refuse what is not JSON.

use crate::{
    event::{Arg, Event, Lenient},
    parse, reference,
    scan::Parsed,
};

/// xorshift64*: the same events on every run (the crate's tests' one generator).
pub(crate) struct Rng(pub u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }
    pub(crate) fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
    fn pick<'s>(&mut self, from: &[&'s str]) -> &'s str {
        from[self.below(from.len() as u64) as usize]
    }
}

fn ws(r: &mut Rng) -> &'static str {
    ["", "", "", " ", "\n  ", "\t", "\r\n"][r.below(7) as usize]
}

fn string(r: &mut Rng) -> String {
    let parts = [
        "a",
        "aten::mm",
        "X",
        "cpu_op",
        "é",
        "漢字",
        "→",
        "\\\"",
        "\\\\",
        "\\n",
        "\\u00e9",
        "\\ud83d\\ude00",
        "\\/",
        " ",
        "{}[],:",
        "0",
    ];
    let n = r.below(5);
    let body: String = (0..n).map(|_| r.pick(&parts)).collect();
    format!("\"{body}\"")
}

fn number(r: &mut Rng) -> String {
    match r.below(12) {
        0 => "0".into(),
        1 => "-0".into(),
        2 => r.below(1 << 20).to_string(),
        3 => format!("-{}", r.below(1 << 40)),
        4 => u64::MAX.to_string(),
        5 => "18446744073709551616".into(),
        6 => "-9223372036854775808".into(),
        7 => "-9223372036854775809".into(),
        8 => format!("{}.{}", r.below(100_000), r.below(1000)),
        9 => format!("{}e{}{}", r.below(1000), r.pick(&["", "+", "-"]), r.below(30)),
        10 => format!("-{}.{:03}E-{}", r.below(10), r.below(1000), r.below(5)),
        _ => format!("0.{}{}", "0".repeat(r.below(30) as usize), r.below(1 << 62)),
    }
}

fn value(r: &mut Rng, depth: u32) -> String {
    let kind = if depth > 3 { r.below(5) } else { r.below(7) };
    match kind {
        0 | 1 => string(r),
        2 => number(r),
        3 => r.pick(&["true", "false"]).into(),
        4 => "null".into(),
        5 => {
            let items: Vec<String> =
                (0..r.below(4)).map(|_| format!("{}{}{}", ws(r), value(r, depth + 1), ws(r))).collect();
            format!("[{}]", items.join(","))
        }
        _ => {
            let items: Vec<String> = (0..r.below(4))
                .map(|_| format!("{}{}{}:{}{}", ws(r), string(r), ws(r), ws(r), value(r, depth + 1)))
                .collect();
            format!("{{{}}}", items.join(","))
        }
    }
}

/// An event: known and unknown keys in any order, each value of any kind (a known key seldom
/// given twice), `args` mostly an object.
fn event(r: &mut Rng) -> String {
    let keys = ["ph", "name", "cat", "pid", "tid", "ts", "dur", "id", "bp", "args", "s", "other", "p\\u0068"];
    let mut entries = Vec::new();
    let mut used = Vec::new();
    for _ in 0..r.below(9) {
        let key = r.pick(&keys);
        if used.contains(&key) && r.below(20) != 0 {
            continue;
        }
        used.push(key);
        let v = if key == "args" && r.below(5) != 0 {
            let args: Vec<String> = (0..r.below(6))
                .map(|_| format!("{}{}{}:{}{}", ws(r), string(r), ws(r), ws(r), value(r, 2)))
                .collect();
            format!("{{{}}}", args.join(","))
        } else {
            value(r, 1)
        };
        entries.push(format!("{}\"{key}\"{}:{}{v}{}", ws(r), ws(r), ws(r), ws(r)));
    }
    format!("{{{}}}", entries.join(","))
}

fn same_f64(a: f64, b: f64) -> bool {
    a == b || (a - b).abs() <= a.abs().max(b.abs()) * 4.0 * f64::EPSILON
}

fn same_lenient(a: &Lenient<'_>, b: &Lenient<'_>) -> bool {
    match (a, b) {
        (Lenient::Float(x), Lenient::Float(y)) => {
            same_f64(*x, *y) && x.is_sign_negative() == y.is_sign_negative()
        }
        _ => a == b,
    }
}

fn same_arg(a: &Arg<'_>, b: &Arg<'_>) -> bool {
    match (a, b) {
        (Arg::F64(x), Arg::F64(y)) => same_f64(*x, *y),
        _ => a == b,
    }
}

fn scalars<'e, 'a>(e: &'e Event<'a>) -> [&'e Lenient<'a>; 9] {
    [&e.ph, &e.name, &e.cat, &e.pid, &e.tid, &e.ts, &e.dur, &e.id, &e.bp]
}

fn same(a: &Event<'_>, b: &Event<'_>) -> bool {
    scalars(a).iter().zip(scalars(b).iter()).all(|(x, y)| same_lenient(x, y))
        && a.args.0.len() == b.args.0.len()
        && a.args.0.iter().zip(&b.args.0).all(|(x, y)| x.0 == y.0 && same_arg(&x.1, &y.1))
}

/// What the parser made of `text`: the event and its length, `None` for "more", or an error.
fn ours(text: &str) -> Result<Option<(Event<'_>, usize)>, (usize, String)> {
    let mut got = None;
    match parse::event(text, |ev| got = Some(std::mem::take(ev))) {
        Parsed::Done((), n) => Ok(got.map(|ev| (ev, n))),
        Parsed::More => Ok(None),
        Parsed::Failed { at, what } => Err((at, what)),
    }
}

/// Both parsers on `text`: the same answer (errors may word and place themselves apart).
fn agree(text: &str) {
    let reference = reference::event(text);
    match (ours(text), reference) {
        (Ok(Some((a, n))), Ok((b, m))) => {
            assert!(same(&a, &b), "{text:?}:\n ours {a:?}\n serde {b:?}");
            assert_eq!(n, m, "{text:?}");
        }
        (Ok(None), Err(None)) | (Err(_), Err(Some(_))) => {}
        // serde_json decodes the keys of an object that a scalar field holds (one level down
        // only) and refuses a lone surrogate escape there; the parser checks no string it
        // passes over beyond the escapes' form, as serde_json does deeper down.
        (Ok(Some(_)), Err(Some(e)))
            if ["surrogate", "hex escape"].iter().any(|w| e.to_string().contains(w)) => {}
        (ours, serde) => {
            panic!("{text:?}:\n ours {ours:?}\n serde {:?}", serde.map(|(e, n)| (format!("{e:?}"), n)))
        }
    }
}

#[test]
fn generated_events_read_as_serde_json_reads_them() {
    let mut r = Rng(0x9e37_79b9_7f4a_7c15);
    let mut accepted = 0;
    for _ in 0..4000 {
        let ev = event(&mut r);
        // Whole, followed by what comes after an event in a file.
        let whole = format!("{ev}{}", r.pick(&[",", "]", " ,\n", ""]));
        agree(&whole);
        let whole_ok = matches!(ours(&whole), Ok(Some(_)));
        accepted += u32::from(whole_ok);
        // Every prefix of an event is "more": a buffer may end anywhere.
        for cut in (0..ev.len()).filter(|&c| whole_ok && ev.is_char_boundary(c)) {
            assert!(matches!(ours(&ev[..cut]), Ok(None)), "{:?}", &ev[..cut]);
        }
        // Broken: a byte replaced, taken out or put in, or a character of two bytes put in.
        for _ in 0..4 {
            let mut bytes = ev.clone().into_bytes();
            let at = r.below(bytes.len() as u64) as usize;
            let puts = b"{}[]\":,0-.eE \\tfnu\x01x";
            let put = puts[r.below(puts.len() as u64) as usize];
            match r.below(4) {
                0 => bytes[at] = put,
                1 => {
                    bytes.remove(at);
                }
                2 => bytes.insert(at, put),
                _ => drop(bytes.splice(at..at, "é".bytes())),
            }
            // A broken multi-byte character is the scanner's to refuse, before any parser.
            let Ok(text) = String::from_utf8(bytes) else { continue };
            // serde_json reads an array as a struct's fields in order, and other values before
            // it refuses their type; the parser refuses any event that is not an object at once.
            if !text.trim_start().starts_with('{') {
                assert!(matches!(ours(&text), Err((_, ref w)) if w.contains("an event")), "{text:?}");
                continue;
            }
            agree(&format!("{text},"));
        }
    }
    // Most are events (a key given twice, or a lone surrogate in a string kept, is refused
    // by both).
    assert!(accepted > 3000, "{accepted}");
}

#[test]
fn deep_nesting_is_read_without_exhausting_the_stack() {
    // serde_json passes over nested values with a loop and no limit; so does the parser, which
    // keeps one bit per open level.
    for depth in [10, 127, 128, 129, 200, 100_000] {
        let text = format!(
            "{{\"args\": {{\"a\": {}{}}}, \"x\": {}{}}},",
            "[".repeat(depth),
            "]".repeat(depth),
            "[{\"a\":".repeat(depth) + "1",
            "}]".repeat(depth)
        );
        agree(&text);
        assert!(matches!(ours(&text), Ok(Some(_))), "{depth}");
        assert!(matches!(ours(&text[..text.len() / 2]), Ok(None)), "{depth}");
    }
    let text = format!("{{\"x\": {}1{}}}", "[".repeat(300), "]".repeat(299));
    assert!(
        matches!(ours(&text), Err((_, ref what)) if what.contains("expected `,` or `]`")),
        "{:?}",
        ours(&text)
    );
}

#[test]
fn errors_name_their_byte() {
    for (text, at, what) in [
        (r#"{"ph": "X", "ts": 1,, "dur": 2}"#, 20, "key must be a string"),
        (r#"{"ph": "X" "ts": 1}"#, 11, "expected `,` or `}`"),
        (r#"{"ph" "X"}"#, 6, "expected `:`"),
        (r#"{"ts": 1.x}"#, 9, "invalid number"),
        (r#"{"ph": "X", "ph": "B"}"#, 12, "duplicate field `ph`"),
        ("{\"name\": \"a\u{1}b\"}", 11, "control character"),
        (r#"{"name": "a\qb"}"#, 12, "invalid escape"),
        (r#"{"ts": 1e999}"#, 7, "number out of range"),
        (r#"{"ph": tru}"#, 7, "expected ident"),
        (r#"7"#, 0, "expected an event"),
        // A number ends before a character of several bytes (the fuzzer's find).
        ("{\"tid\": 2\u{75a}}", 9, "expected `,` or `}`"),
    ] {
        match ours(text) {
            Err((a, w)) => assert!(a == at && w.contains(what), "{text}: {a} {w}"),
            other => panic!("{text}: {other:?}"),
        }
    }
}
