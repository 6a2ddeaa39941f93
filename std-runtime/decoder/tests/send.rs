//! `waffle_export::send` and `waffle-decode --send` against a scripted HTTP server on 127.0.0.1:
//! batches carry the exporters' spans in order, 429 and 5xx are retried (honouring
//! `Retry-After`), other 4xx are not and the server's message is reported, and an endpoint
//! nobody listens on is a clear error, quickly, with a short policy.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::PathBuf;
use std::process::Command;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use waffle_export::send::{self, Endpoint, GiveUp, Options, Policy, Protocol};
use waffle_export::{export, otlp, Format};
use waffle_read::model::Trace;

/// A request as the server saw it.
#[derive(Clone, Debug)]
struct Seen {
    path: String,
    content_type: String,
    body: Vec<u8>,
}

/// An answer to give: status, extra header lines, body.
type Reply = (u16, &'static str, &'static str);

/// A server answering with `script` in turn, then 200 (or 202) to everything; it remembers
/// every request.
struct Server {
    port: u16,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Server {
    fn start(script: Vec<Reply>, ok: u16) -> Server {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(Mutex::new(script.into_iter()));
        let seen2 = seen.clone();
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let (seen, script) = (seen2.clone(), script.clone());
                let Ok(conn) = conn else { continue };
                std::thread::spawn(move || serve(conn, &seen, &script, ok));
            }
        });
        Server { port, seen }
    }

    fn target(&self, protocol: Protocol) -> Endpoint {
        format!("{}=http://127.0.0.1:{}", protocol.name(), self.port).parse().unwrap()
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

/// Answers the requests of one connection (HTTP/1.1, kept alive).
fn serve(conn: TcpStream, seen: &Mutex<Vec<Seen>>, script: &Mutex<std::vec::IntoIter<Reply>>, ok: u16) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut writer = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 {
            return;
        }
        let path = line.split(' ').nth(1).unwrap_or("").to_owned();
        let (mut length, mut content_type) = (0, String::new());
        loop {
            let mut header = String::new();
            reader.read_line(&mut header).unwrap();
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            let (name, value) = header.split_once(':').unwrap();
            match name.to_ascii_lowercase().as_str() {
                "content-length" => length = value.trim().parse().unwrap(),
                "content-type" => content_type = value.trim().to_owned(),
                _ => {}
            }
        }
        let mut body = vec![0; length];
        reader.read_exact(&mut body).unwrap();
        seen.lock().unwrap().push(Seen { path, content_type, body });
        let (status, headers, text) = script.lock().unwrap().next().unwrap_or((ok, "", ""));
        let reply = format!("HTTP/1.1 {status} X\r\n{headers}Content-Length: {}\r\n\r\n{text}", text.len());
        if writer.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

/// A trace decoded from a real recording: 12 spans with events inside.
fn trace() -> &'static Trace {
    static TRACE: OnceLock<(PathBuf, Trace)> = OnceLock::new();
    &TRACE
        .get_or_init(|| {
            let path = std::env::temp_dir().join(format!("waffle-send-{}.bin", std::process::id()));
            let session = waffle_std::start(&path).unwrap();
            for i in 0..6u64 {
                let _outer = waffle::span!("outer", i);
                let _inner = waffle::span!("inner");
                let _e = waffle::event!("mark", ok = true);
            }
            session.stop().unwrap();
            let decoded = waffle_read::decode::decode_files(std::slice::from_ref(&path)).unwrap();
            (path, decoded.trace)
        })
        .1
}

fn fast(attempts: u32) -> Options {
    let policy = Policy {
        attempts,
        backoff: Duration::from_millis(10),
        max_backoff: Duration::from_millis(40),
        ..Policy::default()
    };
    Options { batch_spans: 1000, policy }
}

#[test]
fn zipkin_batches_are_the_exported_spans_in_order() {
    let server = Server::start(vec![], 202);
    let options = Options { batch_spans: 5, ..fast(3) };
    let report = send::send(trace(), &server.target(Protocol::Zipkin), &options).unwrap();
    let mut file = Vec::new();
    export(trace(), Format::Zipkin, &mut file).unwrap();
    let Json::Array(all) = serde_json::from_slice(&file).unwrap() else { panic!("not a list") };
    assert_eq!(all.len(), 12);
    let seen = server.seen();
    assert_eq!(seen.iter().map(|s| s.path.as_str()).collect::<Vec<_>>(), ["/api/v2/spans"; 3]);
    assert!(seen.iter().all(|s| s.content_type == "application/json"));
    let batches: Vec<Vec<Json>> =
        seen.iter().map(|s| serde_json::from_slice::<Vec<Json>>(&s.body).unwrap()).collect();
    assert_eq!(batches.iter().map(Vec::len).collect::<Vec<_>>(), [5, 5, 2]);
    assert_eq!(batches.concat(), all);
    assert_eq!((report.spans, report.requests, report.retries), (12, 3, 0));
}

#[test]
fn otlp_is_retried_on_503_and_429_and_says_the_same_as_the_file() {
    let server = Server::start(vec![(503, "", "busy"), (429, "Retry-After: 0\r\n", "")], 200);
    let report = send::send(trace(), &server.target(Protocol::Otlp), &fast(5)).unwrap();
    assert_eq!((report.spans, report.requests, report.retries), (12, 1, 2));
    let seen = server.seen();
    assert_eq!(seen.len(), 3);
    for s in &seen {
        assert_eq!((s.path.as_str(), s.content_type.as_str()), ("/v1/traces", "application/x-protobuf"));
        assert_eq!(otlp::protobuf_to_json(&s.body).unwrap(), otlp::to_json(trace()));
    }
}

#[test]
fn otlp_batches_split_the_request() {
    let server = Server::start(vec![], 200);
    let options = Options { batch_spans: 7, ..fast(1) };
    let report = send::send(trace(), &server.target(Protocol::Otlp), &options).unwrap();
    assert_eq!((report.spans, report.requests), (12, 2));
    let spans = |j: &Json| -> Vec<Json> {
        let rs = j["resourceSpans"].as_array().unwrap();
        rs.iter().flat_map(|r| r["scopeSpans"][0]["spans"].as_array().unwrap().clone()).collect()
    };
    let pieces: Vec<Vec<Json>> =
        server.seen().iter().map(|s| spans(&otlp::protobuf_to_json(&s.body).unwrap())).collect();
    assert_eq!(pieces.iter().map(Vec::len).collect::<Vec<_>>(), [7, 5]);
    assert_eq!(pieces.concat(), spans(&otlp::to_json(trace())));
}

#[test]
fn retry_after_is_honoured() {
    let server = Server::start(vec![(503, "Retry-After: 1\r\n", "")], 202);
    let started = Instant::now();
    let report = send::send(trace(), &server.target(Protocol::Zipkin), &fast(3)).unwrap();
    assert!(started.elapsed() >= Duration::from_secs(1), "{:?}", started.elapsed());
    assert_eq!((report.requests, report.retries), (1, 1));
}

#[test]
fn client_errors_are_not_retried_and_say_what_the_server_said() {
    let server = Server::start(vec![(202, "", ""), (400, "", "Unable to read span id\nat line 1")], 202);
    let options = Options { batch_spans: 5, ..fast(5) };
    let err = send::send(trace(), &server.target(Protocol::Zipkin), &options).unwrap_err();
    assert_eq!(server.seen().len(), 2, "the 400 was not tried again");
    assert_eq!((err.attempts, err.gave_up, err.sent.spans, err.sent.requests), (1, None, 5, 1));
    let text = err.to_string();
    let url = format!("http://127.0.0.1:{}/api/v2/spans", server.port);
    assert!(text.contains(&url), "{text}");
    assert!(text.contains("HTTP 400 Bad Request: Unable to read span id at line 1; not retried"), "{text}");
}

/// A port nobody listens on (bound, then let go).
fn dead_port() -> u16 {
    TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port()
}

#[test]
fn an_endpoint_that_is_down_is_a_clear_error() {
    let target: Endpoint = format!("otlp=http://127.0.0.1:{}", dead_port()).parse().unwrap();
    let started = Instant::now();
    let err = send::send(trace(), &target, &fast(4)).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(5));
    assert_eq!((err.attempts, err.gave_up, err.sent.spans), (4, Some(GiveUp::Attempts), 0));
    assert!(err.error.to_lowercase().contains("refused"), "{}", err.error);
    assert!(err.to_string().contains("gave up after 4 attempts in"), "{err}");
}

#[test]
fn the_time_budget_bounds_the_retries() {
    let server = Server::start(vec![(503, "", ""); 100], 200);
    let mut options = fast(100);
    options.policy.budget = Duration::from_millis(300);
    let started = Instant::now();
    let err = send::send(trace(), &server.target(Protocol::Otlp), &options).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(2), "{:?}", started.elapsed());
    assert!(matches!(err.gave_up, Some(GiveUp::Budget { .. })), "{err}");
    assert!(err.attempts > 2 && err.attempts < 100, "{err}");
    assert!(err.error.starts_with("HTTP 503 Service Unavailable"), "{err}");
}

#[test]
fn cli_sends_to_several_backends_and_fails_clearly_on_a_dead_one() {
    let (zipkin, otlp) = (Server::start(vec![], 202), Server::start(vec![(503, "", "")], 200));
    let input = std::env::temp_dir().join(format!("waffle-send-{}.bin", std::process::id()));
    let _ = trace(); // records `input`
    let out = input.with_extension("zipkin.json");
    let decode = |args: &[String]| {
        let out = Command::new(env!("CARGO_BIN_EXE_waffle-decode"))
            .arg(&input)
            .args(args)
            .env("WAFFLE_SEND_BACKOFF_MS", "10")
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
        assert!(!stderr.contains("panicked"), "{stderr}");
        (out.status.code(), stderr)
    };
    let args = [
        format!("--send=zipkin=http://127.0.0.1:{}", zipkin.port),
        format!("--send=otlp=http://127.0.0.1:{}/", otlp.port),
        "--batch-spans=4".to_owned(),
        "-o".to_owned(),
        out.display().to_string(),
    ];
    let (code, stderr) = decode(&args);
    assert_eq!(code, Some(0), "{stderr}");
    assert!(stderr.contains(&format!("wrote {}", out.display())), "{stderr}");
    let z = format!(
        "sent 12 spans to zipkin endpoint http://127.0.0.1:{}/api/v2/spans in 3 requests (0 retries,",
        zipkin.port
    );
    let o = format!(
        "sent 12 spans to otlp endpoint http://127.0.0.1:{}/v1/traces in 3 requests (1 retry,",
        otlp.port
    );
    assert!(stderr.contains(&z) && stderr.contains(&o), "{stderr}");
    assert_eq!((zipkin.seen().len(), otlp.seen().len()), (3, 4));

    let dead = dead_port();
    let started = Instant::now();
    let (code, stderr) = decode(&[format!("--send=zipkin=http://127.0.0.1:{dead}"), "-q".to_owned()]);
    assert!(started.elapsed() < Duration::from_secs(5), "{:?}", started.elapsed());
    assert_eq!(code, Some(1), "{stderr}");
    let want = format!(
        "waffle-decode: error: sending to zipkin endpoint http://127.0.0.1:{dead}/api/v2/spans failed: "
    );
    assert!(stderr.starts_with(&want) && stderr.contains("gave up after 5 attempts in"), "{stderr}");
    assert_eq!(stderr.lines().count(), 1, "{stderr}");
}

#[test]
fn a_server_that_never_answers_times_out_and_is_retried() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let held = Arc::new(Mutex::new(Vec::new()));
    let held2 = held.clone();
    std::thread::spawn(move || {
        for conn in listener.incoming().flatten() {
            held2.lock().unwrap().push(conn); // read nothing, answer nothing
        }
    });
    let mut options = fast(3);
    options.policy.timeout = Duration::from_millis(200);
    let target: Endpoint = format!("zipkin=http://127.0.0.1:{port}").parse().unwrap();
    let started = Instant::now();
    let err = send::send(trace(), &target, &options).unwrap_err();
    assert!(started.elapsed() < Duration::from_secs(3), "{:?}", started.elapsed());
    assert_eq!((err.attempts, err.gave_up), (3, Some(GiveUp::Attempts)), "{err}");
    assert!(err.error.contains("timed out"), "{err}");
    assert_eq!(held.lock().unwrap().len(), 3, "one connection per attempt");
}
