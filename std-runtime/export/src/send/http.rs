//! The one module that knows the HTTP client (`ureq` 3): a blocking `POST` of a body, and the
//! answer as status, headers of interest and the start of the body. A change of client touches
//! this file only.

use std::io::Read;
use std::time::Duration;

use ureq::http::Uri;

/// How much of an answer's body is read: enough for any server's message, bounded whatever
/// the server sends.
const BODY_LIMIT: u64 = 64 * 1024;

/// An answer from the server, whatever its status.
pub(super) struct Answer {
    pub status: u16,
    /// The status's standard reason phrase (`Service Unavailable`), if it has one.
    pub reason: Option<&'static str>,
    pub retry_after: Option<String>,
    pub content_type: Option<String>,
    pub location: Option<String>,
    /// The body's first [`BODY_LIMIT`] bytes.
    pub body: Vec<u8>,
}

/// A request that got no answer.
pub(super) struct Failure {
    /// What went wrong, for people.
    pub error: String,
    /// Whether trying again may help (the connection, not the request, failed).
    pub transient: bool,
}

/// A client keeping connections open between requests.
pub(super) struct Client {
    agent: ureq::Agent,
}

impl Client {
    pub fn new() -> Client {
        let config = ureq::Agent::config_builder()
            // Every status is an answer to read, not an error.
            .http_status_as_error(false)
            // A redirect of a POST is reported, not followed.
            .max_redirects(0)
            .max_redirects_will_error(false)
            .user_agent(concat!("waffle-decode/", env!("CARGO_PKG_VERSION")))
            .build();
        Client { agent: config.into() }
    }

    /// `POST url` with `body` as `content_type`, given at most `timeout` in all.
    pub fn post(
        &self,
        url: &str,
        content_type: &str,
        body: &[u8],
        timeout: Duration,
    ) -> Result<Answer, Failure> {
        let result = self
            .agent
            .post(url)
            .config()
            .timeout_global(Some(timeout))
            .build()
            .header("Content-Type", content_type)
            .send(body);
        let mut response = result.map_err(failure)?;
        let header = |name: &str| {
            let value = response.headers().get(name)?;
            Some(String::from_utf8_lossy(value.as_bytes()).into_owned())
        };
        let (retry_after, content_type, location) =
            (header("retry-after"), header("content-type"), header("location"));
        let status = response.status();
        let mut body = Vec::new();
        // A body cut short still says what it said so far.
        let _ = response.body_mut().as_reader().take(BODY_LIMIT).read_to_end(&mut body);
        Ok(Answer {
            status: status.as_u16(),
            reason: status.canonical_reason(),
            retry_after,
            content_type,
            location,
            body,
        })
    }
}

/// Whether `url` is one the client can send to; why not, if not.
pub(super) fn check_url(url: &str) -> Result<(), String> {
    let uri: Uri = url.parse().map_err(|e| format!("`{url}` is not a URL: {e}"))?;
    let Some(authority) = uri.authority().filter(|a| !a.host().is_empty()) else {
        return Err(format!("`{url}` names no host"));
    };
    // `Uri` keeps a port it cannot read as none at all; say so rather than use port 80.
    let host_port = authority.as_str().rsplit('@').next().unwrap_or("");
    if uri.port().is_none() && host_port.rsplit(']').next().unwrap_or("").contains(':') {
        return Err(format!("`{url}` is not a URL: bad port"));
    }
    Ok(())
}

fn failure(e: ureq::Error) -> Failure {
    use ureq::Error as E;
    let (error, transient) = match e {
        E::Io(e) => (e.to_string(), true),
        E::Timeout(t) => (format!("timed out ({t})"), true),
        E::HostNotFound => ("host not found".to_owned(), true),
        E::ConnectionFailed => ("connection failed".to_owned(), true),
        E::Protocol(e) => (format!("HTTP protocol error: {e}"), true),
        e => (e.to_string(), false),
    };
    Failure { error, transient }
}
