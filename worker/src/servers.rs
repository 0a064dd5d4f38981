//! The servers a worker registers with: `--server`'s comma-separated list (the replicas behind
//! a Kubernetes Service, made explicit), tried in turn on every reconnect; and the URL of the
//! replica a server sends the worker to when that replica owns the worker's pool.

/// The URLs of a `--server` value, in order, blanks dropped.
pub fn list(arg: &str) -> Vec<String> {
    arg.split(',')
        .map(str::trim)
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

/// The URL of `to` (a server's advertised `HOST:PORT`, or a URL), reached as `from` was: the
/// same scheme (and so the same TLS settings; the certificate must name that host too).
pub fn redirect_url(from: &str, to: &str) -> String {
    if to.contains("://") {
        return to.to_string();
    }
    let scheme = from.split_once("://").map_or("http", |(s, _)| s);
    format!("{scheme}://{to}")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_list_is_split_and_a_redirect_keeps_the_scheme() {
        assert_eq!(
            list("http://a:1, http://b:2,,"),
            ["http://a:1", "http://b:2"]
        );
        assert_eq!(list("http://a:1"), ["http://a:1"]);
        assert!(list(" , ").is_empty());
        assert_eq!(
            redirect_url("https://a:1", "10.0.0.5:50051"),
            "https://10.0.0.5:50051"
        );
        assert_eq!(redirect_url("http://a:1", "b:2"), "http://b:2");
        assert_eq!(redirect_url("https://a:1", "http://b:2"), "http://b:2");
    }
}
