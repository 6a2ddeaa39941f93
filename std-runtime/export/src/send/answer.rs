//! What a server's answer means: accepted, worth another try, or refused, and the server's own
//! words for people. OTLP servers put them in protobuf messages (`google.rpc.Status` on
//! failure, `ExportTracePartialSuccess` on a partial success); others in text or JSON.

use prost::Message;

use super::http::Answer;

/// The most of a server's message an error repeats.
const MESSAGE_LIMIT: usize = 1000;

/// How an answer is taken.
#[derive(Debug, PartialEq, Eq)]
pub(super) enum Verdict {
    /// 2xx: the spans were taken.
    Accepted,
    /// 429 or 5xx: the server may take them later.
    Retry,
    /// Anything else: sending the same request again would get the same answer.
    Refused,
}

/// The verdict on a status.
pub(super) fn verdict(status: u16) -> Verdict {
    match status {
        200..=299 => Verdict::Accepted,
        429 | 500..=599 => Verdict::Retry,
        _ => Verdict::Refused,
    }
}

/// `HTTP 503 Service Unavailable: <the server's message>`.
pub(super) fn describe(answer: &Answer) -> String {
    let mut text = format!("HTTP {}", answer.status);
    if let Some(reason) = answer.reason {
        text = format!("{text} {reason}");
    }
    if let (300..=399, Some(location)) = (answer.status, &answer.location) {
        text = format!("{text} (to {location}; give that URL instead)");
    }
    match message(answer) {
        Some(m) => format!("{text}: {m}"),
        None => text,
    }
}

/// A warning when an OTLP server took only some of the spans (its `partial_success`).
pub(super) fn partial_success(answer: &Answer) -> Option<(u64, String)> {
    if !is_protobuf(answer) {
        return None;
    }
    let partial = ExportTraceServiceResponse::decode(&answer.body[..]).ok()?.partial_success?;
    if partial.rejected_spans <= 0 && partial.error_message.is_empty() {
        return None;
    }
    Some((partial.rejected_spans.max(0) as u64, one_line(&partial.error_message)))
}

/// The server's message: a `google.rpc.Status`'s `message` for protobuf answers, else the
/// body as text on one line; `None` when there is none or it is not text.
fn message(answer: &Answer) -> Option<String> {
    if is_protobuf(answer) {
        if let Ok(status) = Status::decode(&answer.body[..]) {
            return Some(one_line(&status.message)).filter(|m| !m.is_empty());
        }
    }
    let text = String::from_utf8_lossy(&answer.body);
    if text.chars().any(|c| c.is_control() && !c.is_whitespace()) || text.contains('\u{fffd}') {
        return Some(format!("({} bytes of a binary body)", answer.body.len()));
    }
    Some(one_line(&text)).filter(|m| !m.is_empty())
}

fn is_protobuf(answer: &Answer) -> bool {
    answer.content_type.as_deref().is_some_and(|t| t.trim().starts_with("application/x-protobuf"))
}

/// `text` with its whitespace runs made single spaces, cut to [`MESSAGE_LIMIT`] characters.
fn one_line(text: &str) -> String {
    let mut out = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if let Some((cut, _)) = out.char_indices().nth(MESSAGE_LIMIT) {
        out.truncate(cut);
        out.push('…');
    }
    out
}

/// `google.rpc.Status`, what OTLP/HTTP servers answer a failed request with.
#[derive(Clone, PartialEq, prost::Message)]
struct Status {
    #[prost(int32, tag = "1")]
    code: i32,
    #[prost(string, tag = "2")]
    message: String,
}

/// `opentelemetry.proto.collector.trace.v1.ExportTraceServiceResponse`.
#[derive(Clone, PartialEq, prost::Message)]
struct ExportTraceServiceResponse {
    #[prost(message, optional, tag = "1")]
    partial_success: Option<ExportTracePartialSuccess>,
}

/// `opentelemetry.proto.collector.trace.v1.ExportTracePartialSuccess`.
#[derive(Clone, PartialEq, prost::Message)]
struct ExportTracePartialSuccess {
    #[prost(int64, tag = "1")]
    rejected_spans: i64,
    #[prost(string, tag = "2")]
    error_message: String,
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(status: u16, content_type: &str, body: &[u8]) -> Answer {
        Answer {
            status,
            reason: ureq::http::StatusCode::from_u16(status).ok().and_then(|s| s.canonical_reason()),
            retry_after: None,
            content_type: Some(content_type.to_owned()),
            location: None,
            body: body.to_vec(),
        }
    }

    #[test]
    fn verdicts() {
        for (status, v) in [
            (200, Verdict::Accepted),
            (202, Verdict::Accepted),
            (429, Verdict::Retry),
            (500, Verdict::Retry),
            (503, Verdict::Retry),
            (400, Verdict::Refused),
            (404, Verdict::Refused),
            (413, Verdict::Refused),
            (308, Verdict::Refused),
        ] {
            assert_eq!(verdict(status), v, "{status}");
        }
    }

    #[test]
    fn messages() {
        let a = answer(400, "text/plain", b"Expected a JSON_V2 encoded list\n  at line 1");
        assert_eq!(describe(&a), "HTTP 400 Bad Request: Expected a JSON_V2 encoded list at line 1");
        let status = Status { code: 3, message: "bad span id".into() }.encode_to_vec();
        let a = answer(400, "application/x-protobuf", &status);
        assert_eq!(describe(&a), "HTTP 400 Bad Request: bad span id");
        assert_eq!(describe(&answer(503, "text/plain", b"")), "HTTP 503 Service Unavailable");
        let a = answer(500, "application/octet-stream", &[0, 1, 2, 0xff]);
        assert_eq!(describe(&a), "HTTP 500 Internal Server Error: (4 bytes of a binary body)");
        let long = "x".repeat(5000);
        assert_eq!(message(&answer(400, "text/plain", long.as_bytes())).unwrap().chars().count(), 1001);
    }

    #[test]
    fn partial_successes() {
        let ok = ExportTraceServiceResponse::default().encode_to_vec();
        assert_eq!(partial_success(&answer(200, "application/x-protobuf", &ok)), None);
        let partial = ExportTracePartialSuccess { rejected_spans: 2, error_message: "too old".into() };
        let body = ExportTraceServiceResponse { partial_success: Some(partial) }.encode_to_vec();
        assert_eq!(
            partial_success(&answer(200, "application/x-protobuf", &body)),
            Some((2, "too old".into()))
        );
        assert_eq!(partial_success(&answer(200, "application/json", b"{}")), None);
    }
}
