//! One request split into requests of at most `max` spans each, for sending: every piece
//! carries the resource and scope of the spans it holds, so each is a complete request on its
//! own, and the pieces put together are the whole request, spans in the same order.
//! Links and parents may name spans in other pieces; a backend joins them by id.

use prost::Message;

use super::proto::{ExportTraceServiceRequest, ResourceSpans, ScopeSpans};

/// One protobuf `ExportTraceServiceRequest` ready to send.
#[derive(Clone, Debug)]
pub struct Batch {
    /// How many spans it holds.
    pub spans: usize,
    /// The encoded request.
    pub body: Vec<u8>,
}

/// `request` cut into requests of at most `max` spans (at least 1); resources without spans
/// are left out.
pub(super) fn split(request: ExportTraceServiceRequest, max: usize) -> Vec<ExportTraceServiceRequest> {
    let max = max.max(1);
    let mut pieces = Vec::new();
    let mut current = ExportTraceServiceRequest::default();
    let mut count = 0;
    // The resource and scope the last span put into `current` came from.
    let mut last: Option<(usize, usize)> = None;
    for (r, rs) in request.resource_spans.into_iter().enumerate() {
        for (s, ss) in rs.scope_spans.into_iter().enumerate() {
            let mut spans = ss.spans.into_iter().peekable();
            while spans.peek().is_some() {
                let take: Vec<_> = spans.by_ref().take(max - count).collect();
                count += take.len();
                match last {
                    Some((lr, ls)) if lr == r && ls == s => {
                        let rs_out = current.resource_spans.last_mut().expect("the resource");
                        rs_out.scope_spans.last_mut().expect("the scope").spans.extend(take);
                    }
                    Some((lr, _)) if lr == r => {
                        let rs_out = current.resource_spans.last_mut().expect("the resource");
                        rs_out.scope_spans.push(ScopeSpans { scope: ss.scope.clone(), spans: take });
                    }
                    _ => current.resource_spans.push(ResourceSpans {
                        resource: rs.resource.clone(),
                        scope_spans: vec![ScopeSpans { scope: ss.scope.clone(), spans: take }],
                    }),
                }
                last = Some((r, s));
                if count == max {
                    pieces.push(std::mem::take(&mut current));
                    count = 0;
                    last = None;
                }
            }
        }
    }
    if count > 0 {
        pieces.push(current);
    }
    pieces
}

/// A piece as [`Batch`]: its span count and its bytes.
pub(super) fn encode(piece: &ExportTraceServiceRequest) -> Batch {
    let spans = piece.resource_spans.iter().flat_map(|rs| &rs.scope_spans).map(|ss| ss.spans.len()).sum();
    Batch { spans, body: piece.encode_to_vec() }
}

#[cfg(test)]
mod tests {
    use super::super::proto::{InstrumentationScope, KeyValue, Resource, Span};
    use super::*;

    fn resource(name: &str, spans: u8) -> ResourceSpans {
        let attributes = vec![KeyValue { key: name.into(), value: None }];
        let spans = (0..spans).map(|i| Span { name: format!("{name}{i}"), ..Span::default() }).collect();
        ResourceSpans {
            resource: Some(Resource { attributes, dropped_attributes_count: 0 }),
            scope_spans: vec![ScopeSpans {
                scope: Some(InstrumentationScope { name: "waffle".into() }),
                spans,
            }],
        }
    }

    /// Each piece as `[(resource, [span names])]`.
    fn shape(pieces: &[ExportTraceServiceRequest]) -> Vec<Vec<(String, Vec<String>)>> {
        pieces
            .iter()
            .map(|p| {
                p.resource_spans
                    .iter()
                    .map(|rs| {
                        let key = rs.resource.as_ref().unwrap().attributes[0].key.clone();
                        assert_eq!(rs.scope_spans.len(), 1);
                        assert_eq!(rs.scope_spans[0].scope.as_ref().unwrap().name, "waffle");
                        (key, rs.scope_spans[0].spans.iter().map(|s| s.name.clone()).collect())
                    })
                    .collect()
            })
            .collect()
    }

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn pieces_keep_order_and_resources() {
        let req = ExportTraceServiceRequest {
            resource_spans: vec![resource("a", 5), resource("e", 0), resource("b", 3)],
        };
        let pieces = split(req.clone(), 3);
        assert_eq!(
            shape(&pieces),
            vec![
                vec![("a".into(), names(&["a0", "a1", "a2"]))],
                vec![("a".into(), names(&["a3", "a4"])), ("b".into(), names(&["b0"]))],
                vec![("b".into(), names(&["b1", "b2"]))],
            ]
        );
        assert_eq!(pieces.iter().map(|p| encode(p).spans).collect::<Vec<_>>(), [3, 3, 2]);
        // Large enough: the request itself, less the resource without spans.
        let whole = split(req.clone(), 1000);
        assert_eq!(whole.len(), 1);
        assert_eq!(
            whole[0].resource_spans,
            vec![req.resource_spans[0].clone(), req.resource_spans[2].clone()]
        );
        // 0 means 1; nothing to send gives nothing.
        assert_eq!(split(req, 0).len(), 8);
        assert!(split(ExportTraceServiceRequest::default(), 10).is_empty());
    }
}
