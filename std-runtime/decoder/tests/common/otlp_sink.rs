//! A fake OTLP/HTTP backend on 127.0.0.1 for the follow tests: it takes `POST /v1/traces`
//! (protobuf), and Zipkin's `POST /api/v2/spans` (JSON) too, remembers each span id with the
//! time it arrived, its name and parent, and can be taken away (every connection closed
//! unanswered, as a server that is gone) and brought back.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value as Json;
use waffle_export::otlp;

/// The backend.
pub struct OtlpSink {
    pub port: u16,
    /// Span id (16 hex digits) → when it first arrived, and how often.
    spans: Arc<Mutex<HashMap<String, (Instant, u32)>>>,
    /// Span id → its name and parent id ("" for none), as last received.
    shapes: Arc<Mutex<HashMap<String, (String, String)>>>,
    away: Arc<AtomicBool>,
}

impl OtlpSink {
    pub fn start() -> OtlpSink {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let spans = Arc::new(Mutex::new(HashMap::new()));
        let shapes = Arc::new(Mutex::new(HashMap::new()));
        let away = Arc::new(AtomicBool::new(false));
        let (s, h, a) = (spans.clone(), shapes.clone(), away.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                let Ok(conn) = conn else { continue };
                let (s, h, a) = (s.clone(), h.clone(), a.clone());
                std::thread::spawn(move || serve(conn, &s, &h, &a));
            }
        });
        OtlpSink { port, spans, shapes, away }
    }

    /// `otlp=http://127.0.0.1:PORT`.
    pub fn target(&self) -> String {
        format!("otlp=http://127.0.0.1:{}", self.port)
    }

    /// `zipkin=http://127.0.0.1:PORT`.
    pub fn zipkin(&self) -> String {
        format!("zipkin=http://127.0.0.1:{}", self.port)
    }

    /// Takes the backend away (`true`) or brings it back.
    pub fn set_away(&self, away: bool) {
        self.away.store(away, Ordering::SeqCst);
    }

    /// The ids received so far, with their arrival time and count.
    pub fn received(&self) -> HashMap<String, (Instant, u32)> {
        self.spans.lock().unwrap().clone()
    }

    /// Each span's name and parent id ("" for none), by id.
    pub fn shapes(&self) -> HashMap<String, (String, String)> {
        self.shapes.lock().unwrap().clone()
    }

    /// Waits up to `limit` for `id` to arrive; returns when it did.
    pub fn wait_for(&self, id: &str, limit: Duration) -> Option<Instant> {
        let deadline = Instant::now() + limit;
        loop {
            if let Some(&(at, _)) = self.spans.lock().unwrap().get(id) {
                return Some(at);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }
}

type Shapes = Mutex<HashMap<String, (String, String)>>;

fn serve(
    conn: TcpStream,
    spans: &Mutex<HashMap<String, (Instant, u32)>>,
    shapes: &Shapes,
    away: &AtomicBool,
) {
    let mut reader = BufReader::new(conn.try_clone().unwrap());
    let mut writer = conn;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).unwrap_or(0) == 0 || away.load(Ordering::SeqCst) {
            return; // gone: the connection closes unanswered
        }
        let zipkin = line.contains("/api/v2/spans");
        let mut length = 0;
        loop {
            let mut header = String::new();
            if reader.read_line(&mut header).unwrap_or(0) == 0 {
                return;
            }
            let header = header.trim_end();
            if header.is_empty() {
                break;
            }
            if let Some((name, value)) = header.split_once(':') {
                if name.eq_ignore_ascii_case("content-length") {
                    length = value.trim().parse().unwrap();
                }
            }
        }
        let mut body = vec![0; length];
        if reader.read_exact(&mut body).is_err() || away.load(Ordering::SeqCst) {
            return;
        }
        // (id, name, parent) of each span.
        let got: Vec<(String, String, String)> = if zipkin {
            let request: Json = serde_json::from_slice(&body).expect("a Zipkin JSON array");
            let text = |span: &Json, key: &str| span[key].as_str().unwrap_or("").to_owned();
            request
                .as_array()
                .unwrap()
                .iter()
                .map(|s| (text(s, "id"), text(s, "name"), text(s, "parentId")))
                .collect()
        } else {
            let request = otlp::protobuf_to_json(&body).expect("an OTLP request");
            let text = |span: &Json, key: &str| span[key].as_str().unwrap_or("").to_owned();
            all_spans(&request)
                .into_iter()
                .map(|s| (text(s, "spanId"), text(s, "name"), text(s, "parentSpanId")))
                .collect()
        };
        let now = Instant::now();
        let mut seen = spans.lock().unwrap();
        for (id, _, _) in &got {
            seen.entry(id.clone()).or_insert((now, 0)).1 += 1;
        }
        drop(seen);
        let mut shaped = shapes.lock().unwrap();
        for (id, name, parent) in got {
            shaped.insert(id, (name, parent));
        }
        drop(shaped);
        let reply = "HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n";
        if writer.write_all(reply.as_bytes()).is_err() {
            return;
        }
    }
}

/// The spans of an OTLP/JSON request.
fn all_spans(request: &Json) -> Vec<&Json> {
    let mut spans = Vec::new();
    for rs in request["resourceSpans"].as_array().into_iter().flatten() {
        for ss in rs["scopeSpans"].as_array().into_iter().flatten() {
            spans.extend(ss["spans"].as_array().into_iter().flatten());
        }
    }
    spans
}
