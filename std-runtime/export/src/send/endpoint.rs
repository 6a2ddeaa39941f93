//! Where to send: a backend's protocol, and its URL as `--send` takes it.

use std::fmt;
use std::str::FromStr;

use super::http;
use crate::Format;

/// A backend's protocol.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// Zipkin's v2 API.
    Zipkin,
    /// OTLP over HTTP, in protobuf.
    Otlp,
}

impl Protocol {
    /// The name `--send` takes: `zipkin`, `otlp`.
    pub fn name(self) -> &'static str {
        match self {
            Protocol::Zipkin => "zipkin",
            Protocol::Otlp => "otlp",
        }
    }

    /// The path spans are posted to.
    pub fn path(self) -> &'static str {
        match self {
            Protocol::Zipkin => "/api/v2/spans",
            Protocol::Otlp => "/v1/traces",
        }
    }

    /// The format its requests carry.
    pub fn format(self) -> Format {
        match self {
            Protocol::Zipkin => Format::Zipkin,
            Protocol::Otlp => Format::Otlp,
        }
    }

    /// The content type of the requests.
    pub fn content_type(self) -> &'static str {
        match self {
            Protocol::Zipkin => "application/json",
            Protocol::Otlp => "application/x-protobuf",
        }
    }
}

/// Where to send, as `--send` takes it: `zipkin=http://127.0.0.1:9411` or
/// `otlp=http://127.0.0.1:4318`.
///
/// The URL is the server's base; the protocol's path ([`Protocol::path`]) is appended unless
/// the URL already ends with it, so `http://host:9411`, `http://host:9411/` and
/// `http://host:9411/api/v2/spans` all post to the last, and `http://proxy/zipkin` to
/// `http://proxy/zipkin/api/v2/spans` (OTLP's rule for a base endpoint). `https://` needs
/// waffle-std's `https` feature.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Endpoint {
    /// The protocol.
    pub protocol: Protocol,
    /// The URL posted to, path included.
    pub url: String,
}

impl FromStr for Endpoint {
    type Err = String;

    fn from_str(s: &str) -> Result<Endpoint, String> {
        let (name, base) = s.split_once('=').ok_or_else(|| {
            format!("`{s}`: expected KIND=URL, such as zipkin=http://127.0.0.1:9411 or otlp=http://127.0.0.1:4318")
        })?;
        let protocol = match name.trim().to_ascii_lowercase().as_str() {
            "zipkin" => Protocol::Zipkin,
            "otlp" => Protocol::Otlp,
            other => return Err(format!("unknown kind `{other}` in `{s}`; known: zipkin, otlp")),
        };
        let base = base.trim();
        let scheme = ["http://", "https://"]
            .into_iter()
            .find(|p| base.get(..p.len()).is_some_and(|head| head.eq_ignore_ascii_case(p)))
            .ok_or_else(|| format!("`{base}`: the URL must start with http:// or https://"))?;
        if scheme == "https://" && !cfg!(feature = "https") {
            return Err(format!(
                "`{base}`: https needs waffle-decode built with the `https` feature of waffle-std (cargo build --features https)"
            ));
        }
        if base.contains(['?', '#']) || base.contains(char::is_whitespace) {
            return Err(format!("`{base}`: give the server's base URL, without query, fragment or spaces"));
        }
        let rest = base[scheme.len()..].trim_end_matches('/');
        if rest.is_empty() || rest.starts_with('/') {
            return Err(format!("`{base}` names no host"));
        }
        let path = if rest.ends_with(protocol.path()) { "" } else { protocol.path() };
        let url = format!("{scheme}{rest}{path}");
        http::check_url(&url)?;
        Ok(Endpoint { protocol, url })
    }
}

impl Endpoint {
    /// The format to scan files for before sending them here ([`send_files`]).
    pub fn format(&self) -> Format {
        self.protocol.format()
    }
}

impl fmt::Display for Endpoint {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} endpoint {}", self.protocol.name(), self.url)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn targets() {
        for (given, url) in [
            ("zipkin=http://127.0.0.1:9411", "http://127.0.0.1:9411/api/v2/spans"),
            ("zipkin=http://127.0.0.1:9411/", "http://127.0.0.1:9411/api/v2/spans"),
            ("ZIPKIN=http://localhost:9411/api/v2/spans", "http://localhost:9411/api/v2/spans"),
            ("zipkin=http://proxy/zipkin", "http://proxy/zipkin/api/v2/spans"),
            ("otlp=http://127.0.0.1:4318", "http://127.0.0.1:4318/v1/traces"),
            ("otlp=HTTP://[::1]:4318/v1/traces/", "http://[::1]:4318/v1/traces"),
            ("otlp=http://user:secret@[::1]/", "http://user:secret@[::1]/v1/traces"),
        ] {
            let t: Endpoint = given.parse().unwrap_or_else(|e| panic!("{given}: {e}"));
            assert_eq!(t.url, url, "{given}");
        }
        let t: Endpoint = "otlp=http://h:4318".parse().unwrap();
        assert_eq!(
            (t.protocol, t.to_string()),
            (Protocol::Otlp, "otlp endpoint http://h:4318/v1/traces".into())
        );
        for (bad, says) in [
            ("http://127.0.0.1:9411", "expected KIND=URL"),
            ("jaeger=http://h:1", "unknown kind `jaeger`"),
            ("zipkin=127.0.0.1:9411", "must start with http://"),
            ("zipkin=ftp://h", "must start with http://"),
            ("zipkin=http://", "names no host"),
            ("zipkin=http:///api/v2/spans", "names no host"),
            ("zipkin=http://h:9411?x=1", "without query"),
            ("zipkin=http://h a", "spaces"),
            ("otlp=http://h:notaport", "bad port"),
            ("otlp=http://[::1]:99999", "bad port"),
            ("otlp=http://h:1:2", "not a URL"),
        ] {
            let err = bad.parse::<Endpoint>().unwrap_err();
            assert!(err.contains(says), "{bad}: {err}");
        }
        let https = "otlp=https://collector:4318".parse::<Endpoint>();
        if cfg!(feature = "https") {
            assert_eq!(https.unwrap().url, "https://collector:4318/v1/traces");
        } else {
            assert!(https.unwrap_err().contains("`https` feature"));
        }
    }
}
